//! The embedding cache and background encoding: hits without the encoder, byte budgets with LRU
//! eviction, a bounded queue, cancellation through ONNX Runtime's termination flag, and
//! waited-for encodes that go ahead of background work.

use crate::common;

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use common::*;
use sam2::cache::{CacheOptions, EmbeddingCache, JobState, Priority, Source};
use sam2::{Encoder, Error, ImageView, PixelFormat};

fn encoder(pair: &str) -> Arc<Encoder> {
    init_runtime();
    Arc::new(Encoder::new(model(&format!("{pair}_encoder.onnx")), &Default::default()).unwrap())
}

/// The test image with one pixel changed per `variant` (0 = the original), so each variant is a
/// different image to the cache and nearly the same one to the encoder.
fn image(variant: u8) -> Image {
    let mut img = read_pnm(&testdata("shapes.ppm"));
    if variant > 0 {
        img.data[variant as usize * 3] ^= 0x5a;
    }
    img
}

fn view(img: &Image) -> ImageView<'_> {
    ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap()
}

fn bytes_of(e: &sam2::Embedding) -> Vec<u8> {
    e.tensors()
        .iter()
        .flat_map(|t| t.host_bytes().unwrap().to_vec())
        .collect()
}

fn embedding_bytes(e: &sam2::Embedding) -> usize {
    e.tensors().iter().map(|t| t.byte_len()).sum()
}

/// Polls until `done` holds, for at most 30 s.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn an_image_seen_before_is_served_without_the_encoder() {
    let encoder = encoder("tiny_a");
    let cache = EmbeddingCache::new(CacheOptions::default()).unwrap();
    let img = image(0);

    let (first, source) = cache.encode(&encoder, &view(&img)).unwrap();
    assert_eq!(source, Source::Encoded);
    assert_eq!(
        bytes_of(&first),
        bytes_of(&encoder.encode(&view(&img)).unwrap())
    );

    let (again, source) = cache.encode(&encoder, &view(&img)).unwrap();
    assert_eq!(source, Source::Cache);
    assert!(
        Arc::ptr_eq(&first, &again),
        "the kept embedding itself is handed out"
    );

    // The same pixels in rows padded to a wider stride are the same image.
    let stride = img.width * 3 + 13;
    let mut padded = vec![0xEEu8; stride * img.height];
    for y in 0..img.height {
        padded[y * stride..y * stride + img.width * 3]
            .copy_from_slice(&img.data[y * img.width * 3..(y + 1) * img.width * 3]);
    }
    let padded_view =
        ImageView::new(&padded, img.width, img.height, stride, PixelFormat::Rgb).unwrap();
    assert_eq!(
        cache.encode(&encoder, &padded_view).unwrap().1,
        Source::Cache
    );

    // One changed pixel, or the same bytes read as BGR, is another image.
    assert_eq!(
        cache.encode(&encoder, &view(&image(7))).unwrap().1,
        Source::Encoded
    );
    let bgr = ImageView::packed(&img.data, img.width, img.height, PixelFormat::Bgr).unwrap();
    assert_eq!(cache.encode(&encoder, &bgr).unwrap().1, Source::Encoded);

    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.entries), (2, 3, 3));
    assert_eq!(stats.host_bytes, 3 * embedding_bytes(&first));
}

#[test]
fn the_budget_drops_the_least_recently_used_embedding_and_its_memory() {
    let encoder = encoder("tiny_a");
    let one = embedding_bytes(&encoder.encode(&view(&image(0))).unwrap());
    let budget = one * 5 / 2; // room for two
    let cache = EmbeddingCache::new(CacheOptions {
        host_budget: budget,
        ..Default::default()
    })
    .unwrap();

    let (a, _) = cache.encode(&encoder, &view(&image(1))).unwrap();
    let (b, _) = cache.encode(&encoder, &view(&image(2))).unwrap();
    let (a_weak, b_weak): (Weak<_>, Weak<_>) = (Arc::downgrade(&a), Arc::downgrade(&b));
    drop((a, b));
    // Use A again, so B is the least recently used when C arrives.
    assert_eq!(
        cache.encode(&encoder, &view(&image(1))).unwrap().1,
        Source::Cache
    );
    cache.encode(&encoder, &view(&image(3))).unwrap();

    let stats = cache.stats();
    assert_eq!((stats.entries, stats.evictions), (2, 1));
    assert!(
        stats.host_bytes <= budget,
        "{} > {budget}",
        stats.host_bytes
    );
    assert!(
        b_weak.upgrade().is_none(),
        "the evicted embedding's memory is released"
    );
    assert!(a_weak.upgrade().is_some(), "the recently used one is kept");
    assert!(cache.contains(&encoder, &view(&image(1))));
    assert!(!cache.contains(&encoder, &view(&image(2))));

    cache.clear();
    assert!(a_weak.upgrade().is_none());
    assert_eq!((cache.stats().entries, cache.stats().host_bytes), (0, 0));

    // A budget smaller than one embedding keeps nothing, but still hands the embedding over.
    let tiny = EmbeddingCache::new(CacheOptions {
        host_budget: one - 1,
        ..Default::default()
    })
    .unwrap();
    let (e, _) = tiny.encode(&encoder, &view(&image(0))).unwrap();
    assert_eq!(embedding_bytes(&e), one);
    let stats = tiny.stats();
    assert_eq!((stats.entries, stats.rejected, stats.host_bytes), (0, 1, 0));
}

/// An embedding is kept only where the encoder's own would be: of its model, of the image's size,
/// and in its memory. (Device embeddings counted against their own budget: tests/webgpu.rs, on a
/// real device.)
#[test]
fn the_cache_keeps_only_embeddings_the_encoder_could_have_made() {
    let encoder = encoder("tiny_a");
    let img = image(0);
    let host = Arc::new(encoder.encode(&view(&img)).unwrap());
    let one = embedding_bytes(&host);
    let cache = EmbeddingCache::new(CacheOptions {
        host_budget: 10 * one,
        device_budget: 2 * one,
        ..Default::default()
    })
    .unwrap();
    cache.put(&encoder, &view(&img), Arc::clone(&host)).unwrap();
    // A device embedding (a stand-in: host bytes labelled "Cuda") for this CPU encoder: refused,
    // naming both memories, rather than filed under the encoder's key and handed out by its
    // next encode of that picture as if the encoder had written it.
    let device = sam2::Embedding::simulate_device(&host, "Cuda", 0).unwrap();
    match cache.put(&encoder, &view(&image(1)), Arc::new(device)) {
        Err(Error::InvalidArgument {
            name: "embedding",
            reason,
        }) => assert!(
            reason.contains("Cuda") && reason.contains("Cpu"),
            "{reason}"
        ),
        other => panic!("a device embedding was kept for a CPU encoder: {other:?}"),
    }
    assert!(!cache.contains(&encoder, &view(&image(1))));
    let stats = cache.stats();
    assert_eq!(
        (stats.entries, stats.host_bytes, stats.device_bytes),
        (1, one, 0)
    );
    let (found, source) = cache.encode(&encoder, &view(&image(1))).unwrap();
    assert_eq!(source, Source::Encoded);
    assert!(found.is_serializable());

    // An embedding of another model, or of another image size, is refused.
    let other = self::encoder("tiny_b");
    let foreign = Arc::new(other.encode(&view(&img)).unwrap());
    assert!(matches!(
        cache.put(&encoder, &view(&img), foreign),
        Err(Error::ModelMismatch(_))
    ));
    let small = ImageView::packed(&img.data[..30], 10, 1, PixelFormat::Rgb).unwrap();
    assert!(matches!(
        cache.put(&encoder, &small, host),
        Err(Error::InvalidArgument {
            name: "embedding",
            ..
        })
    ));
}

#[test]
fn background_encodes_land_in_the_cache_and_requests_for_one_image_share_an_encode() {
    let encoder = encoder("tiny_a");
    let cache = EmbeddingCache::new(CacheOptions::default()).unwrap();
    let jobs: Vec<_> = (0..4u8)
        .map(|v| {
            cache
                .encode_async(&encoder, &view(&image(v)), Priority::Background)
                .unwrap()
        })
        .collect();
    // A second request for image 3, and a cancelled one for image 2 (image 2 is still wanted by
    // its first job, so it is encoded anyway).
    let twin = cache
        .encode_async(&encoder, &view(&image(3)), Priority::Background)
        .unwrap();
    let withdrawn = cache
        .encode_async(&encoder, &view(&image(2)), Priority::Background)
        .unwrap();
    withdrawn.cancel();
    assert_eq!(withdrawn.state(), JobState::Cancelled);
    assert!(matches!(withdrawn.wait(None), Err(Error::Cancelled)));

    for (v, job) in jobs.iter().enumerate() {
        let e = job.wait(None).unwrap();
        assert_eq!(job.state(), JobState::Done);
        assert_eq!(
            bytes_of(&e),
            bytes_of(&encoder.encode(&view(&image(v as u8))).unwrap()),
            "image {v}"
        );
    }
    assert!(Arc::ptr_eq(
        &twin.wait(None).unwrap(),
        &jobs[3].wait(None).unwrap()
    ));
    let stats = cache.stats();
    // The second requests joined the encodes, or found them kept if they had already ended.
    assert_eq!(
        (stats.misses, stats.joins + stats.hits, stats.entries),
        (4, 2, 4)
    );
    // Opening a pre-encoded image is a hit.
    assert_eq!(
        cache.encode(&encoder, &view(&image(2))).unwrap().1,
        Source::Cache
    );
    // A request for a kept image gives a job that is already done.
    let kept = cache
        .encode_async(&encoder, &view(&image(1)), Priority::Background)
        .unwrap();
    assert_eq!(kept.state(), JobState::Done);
    assert_eq!(
        kept.wait(Some(Duration::ZERO)).unwrap().image_size(),
        (512, 384)
    );
}

/// The bench encoder takes about a second, long enough to observe queueing and cancellation.
#[test]
fn the_queue_is_bounded_and_cancelling_stops_an_encode_in_flight() {
    let encoder = encoder("bench_a");
    let cache = EmbeddingCache::new(CacheOptions {
        queue_limit: 2,
        ..Default::default()
    })
    .unwrap();

    // How long one encode takes here, for comparison.
    let start = Instant::now();
    encoder.encode(&view(&image(0))).unwrap();
    let encode_time = start.elapsed();

    let running = cache
        .encode_async(&encoder, &view(&image(1)), Priority::Background)
        .unwrap();
    wait_until("the first job to start", || {
        running.state() == JobState::Running
    });
    let queued: Vec<_> = (2..4u8)
        .map(|v| {
            cache
                .encode_async(&encoder, &view(&image(v)), Priority::Background)
                .unwrap()
        })
        .collect();
    match cache.encode_async(&encoder, &view(&image(4)), Priority::Background) {
        Err(Error::QueueFull { limit: 2 }) => {}
        other => panic!("expected QueueFull, got {other:?}"),
    }
    assert!(matches!(
        running.wait(Some(Duration::from_millis(1))),
        Err(Error::Timeout { waited_ms: 1 })
    ));
    // Let the encode get well under way, then cancel everything.
    std::thread::sleep(encode_time / 5);
    let start = Instant::now();
    assert_eq!(cache.cancel_all(), 3);
    wait_until("the worker to stop", || cache.stats().running == 0);
    let stop_time = start.elapsed();
    println!(
        "cancel: encode {:.0} ms, in-flight encode stopped {:.1} ms after the cancel",
        encode_time.as_secs_f64() * 1e3,
        stop_time.as_secs_f64() * 1e3
    );
    assert!(
        stop_time < encode_time / 2,
        "the termination flag stops the run between nodes: {stop_time:?} vs an encode of {encode_time:?}"
    );
    for job in queued.iter().chain([&running]) {
        assert!(matches!(job.wait(None), Err(Error::Cancelled)));
    }
    let stats = cache.stats();
    assert_eq!((stats.cancelled, stats.entries, stats.queued), (3, 0, 0));

    // The worker is usable afterwards, and the cancelled image encodes normally.
    let job = cache
        .encode_async(&encoder, &view(&image(1)), Priority::Background)
        .unwrap();
    assert_eq!(job.wait(None).unwrap().image_size(), (512, 384));
}

#[test]
fn a_waited_for_encode_goes_ahead_of_background_work() {
    let encoder = encoder("bench_a");
    let cache = EmbeddingCache::new(CacheOptions::default()).unwrap();
    let background = cache
        .encode_async(&encoder, &view(&image(1)), Priority::Background)
        .unwrap();
    let queued = cache
        .encode_async(&encoder, &view(&image(2)), Priority::Background)
        .unwrap();
    wait_until("the background encode to start", || {
        background.state() == JobState::Running
    });

    // The user opens an image that was not pre-encoded.
    let (opened, source) = cache.encode(&encoder, &view(&image(0))).unwrap();
    assert_eq!(source, Source::Encoded);
    assert_ne!(
        background.state(),
        JobState::Done,
        "it was interrupted, not finished first"
    );
    assert_ne!(queued.state(), JobState::Done);
    assert_eq!(cache.stats().preempted, 1);

    // The interrupted encode runs again and gives the same result as an undisturbed one.
    let again = background.wait(None).unwrap();
    assert_eq!(
        bytes_of(&again),
        bytes_of(&encoder.encode(&view(&image(1))).unwrap())
    );
    queued.wait(None).unwrap();
    assert_eq!(
        bytes_of(&opened),
        bytes_of(&encoder.encode(&view(&image(0))).unwrap())
    );
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.entries, stats.cancelled), (3, 3, 0));
}

#[test]
fn dropping_the_cache_cancels_its_work_without_finishing_it() {
    let encoder = encoder("bench_a");
    let start = Instant::now();
    encoder.encode(&view(&image(0))).unwrap();
    let encode_time = start.elapsed();

    let cache = EmbeddingCache::new(CacheOptions::default()).unwrap();
    let running = cache
        .encode_async(&encoder, &view(&image(1)), Priority::Background)
        .unwrap();
    let queued = cache
        .encode_async(&encoder, &view(&image(2)), Priority::Background)
        .unwrap();
    wait_until("the encode to start", || {
        running.state() == JobState::Running
    });
    std::thread::sleep(encode_time / 5);
    let start = Instant::now();
    drop(cache);
    let drop_time = start.elapsed();
    assert!(
        drop_time < encode_time / 2,
        "{drop_time:?} vs {encode_time:?}"
    );
    assert!(matches!(running.wait(None), Err(Error::Cancelled)));
    assert!(matches!(queued.wait(None), Err(Error::Cancelled)));
    assert_eq!(queued.state(), JobState::Cancelled);
}

#[test]
fn many_threads_share_one_cache() {
    let encoder = encoder("tiny_a");
    let cache = Arc::new(EmbeddingCache::new(CacheOptions::default()).unwrap());
    let expected: Vec<Vec<u8>> = (0..4u8)
        .map(|v| bytes_of(&encoder.encode(&view(&image(v))).unwrap()))
        .collect();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (cache, encoder, expected) = (&cache, &encoder, &expected);
            s.spawn(move || {
                for i in 0..12 {
                    let v = ((t + i) % 4) as u8;
                    let img = image(v);
                    let e = if i % 2 == 0 {
                        cache.encode(encoder, &view(&img)).unwrap().0
                    } else {
                        cache
                            .encode_async(encoder, &view(&img), Priority::Background)
                            .unwrap()
                            .wait(None)
                            .unwrap()
                    };
                    assert_eq!(bytes_of(&e), expected[v as usize]);
                }
            });
        }
    });
    let stats = cache.stats();
    assert_eq!(stats.misses, 4, "each image is encoded once: {stats:?}");
    assert_eq!(stats.hits + stats.joins, 48 - 4);
}

#[test]
fn cancelling_a_job_wakes_its_waiter_while_the_encode_goes_on_for_another() {
    let encoder = encoder("bench_a");
    let cache = EmbeddingCache::new(CacheOptions::default()).unwrap();
    let mine = cache
        .encode_async(&encoder, &view(&image(1)), Priority::Background)
        .unwrap();
    let theirs = cache
        .encode_async(&encoder, &view(&image(1)), Priority::Background)
        .unwrap();
    wait_until("the encode to start", || mine.state() == JobState::Running);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let start = Instant::now();
            let result = mine.wait(None);
            (result, start.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        mine.cancel();
        let (result, _) = waiter.join().unwrap();
        assert!(matches!(result, Err(Error::Cancelled)));
        assert_eq!(
            theirs.state(),
            JobState::Running,
            "the other request keeps it going"
        );
    });
    assert_eq!(theirs.wait(None).unwrap().image_size(), (512, 384));
    assert_eq!(cache.stats().cancelled, 0);
}

#[test]
fn a_failed_background_encode_reports_its_error_and_the_worker_goes_on() {
    let faulty = encoder("faulty_a");
    let cache = EmbeddingCache::new(CacheOptions::default()).unwrap();
    // The faulty encoder fails inside ONNX Runtime on an almost white image.
    let white = vec![255u8; 64 * 48 * 3];
    let white_view = ImageView::packed(&white, 64, 48, PixelFormat::Rgb).unwrap();
    let failing = cache
        .encode_async(&faulty, &white_view, Priority::Background)
        .unwrap();
    let fine = cache
        .encode_async(&faulty, &view(&image(0)), Priority::Background)
        .unwrap();
    let twin = cache
        .encode_async(&faulty, &white_view, Priority::Background)
        .unwrap();
    for job in [&failing, &twin] {
        match job.wait(None) {
            Err(Error::OnnxRuntime(message)) => {
                assert!(message.contains("Reshape"), "{message}")
            }
            other => panic!("expected the run's error, got {other:?}"),
        }
        assert_eq!(job.state(), JobState::Failed);
    }
    assert_eq!(fine.wait(None).unwrap().image_size(), (512, 384));
    // A failure is not kept: asking again runs the encoder again (and fails again).
    assert!(matches!(
        cache.encode(&faulty, &white_view),
        Err(Error::OnnxRuntime(_))
    ));
    let stats = cache.stats();
    // The twin joined the failing encode, or came after it had failed and ran it again.
    assert_eq!(
        (stats.entries, stats.misses + stats.joins, stats.hits),
        (1, 4, 0)
    );
}

/// Cancelling the only request for an encode in flight dooms that run; a request for the same
/// image made right after must not join it (and fail with `Cancelled`) but encode afresh.
#[test]
fn a_request_after_a_cancel_encodes_afresh_instead_of_joining_the_cancelled_run() {
    let encoder = encoder("bench_a");
    let cache = EmbeddingCache::new(CacheOptions::default()).unwrap();
    let img = image(1);
    for priority in [Priority::Foreground, Priority::Background] {
        let doomed = cache
            .encode_async(&encoder, &view(&img), Priority::Background)
            .unwrap();
        wait_until("the encode to start", || {
            doomed.state() == JobState::Running
        });
        doomed.cancel();
        let fresh = cache.encode_async(&encoder, &view(&img), priority).unwrap();
        assert_eq!(
            fresh.source(),
            Source::Encoded,
            "{priority:?}: a new encode, not the cancelled one"
        );
        match fresh.wait(None) {
            Ok(embedding) => assert_eq!(embedding.image_size(), (512, 384)),
            Err(e) => panic!("{priority:?}: the new request failed: {e}"),
        }
        assert!(matches!(doomed.wait(None), Err(Error::Cancelled)));
        cache.clear();
    }
    // The blocking call a host makes when the user opens the image.
    let doomed = cache
        .encode_async(&encoder, &view(&img), Priority::Background)
        .unwrap();
    wait_until("the encode to start", || {
        doomed.state() == JobState::Running
    });
    doomed.cancel();
    let (embedding, source) = cache.encode(&encoder, &view(&img)).unwrap();
    assert_eq!(
        (embedding.image_size(), source),
        ((512, 384), Source::Encoded)
    );
}

/// An fp16 encoder's input is prepared on the requesting thread without its session: a request
/// made while another image encodes returns at once instead of waiting for that run to end.
#[test]
fn an_fp16_request_does_not_wait_for_the_encode_in_flight() {
    let encoder = encoder("tiny_a_fp16");
    let cache = EmbeddingCache::new(CacheOptions::default()).unwrap();
    let img = image(0);
    let expected = bytes_of(&encoder.encode(&view(&img)).unwrap());
    let (sent, received) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        // Stands for a long encode in flight on this encoder's session.
        let in_flight = encoder.hold_session_for_test();
        s.spawn(|| {
            let input = encoder.prepare_input(&view(&img)).map(|_| ());
            let job = cache.encode_async(&encoder, &view(&img), Priority::Background);
            let _ = sent.send((input, job));
        });
        let answer = received.recv_timeout(Duration::from_secs(20));
        drop(in_flight);
        let (input, job) = answer.expect("the request waited for the session");
        input.unwrap();
        let job = job.unwrap();
        assert_eq!(job.source(), Source::Encoded);
        assert_eq!(bytes_of(&job.wait(None).unwrap()), expected);
    });
}
