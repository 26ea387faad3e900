//! The cache's memory bound, measured by what is alive rather than by its own accounting: while a
//! queue of background encodes drains into a cache with room for three embeddings, the bytes of
//! embedding tensors alive in the process never exceed the budget plus the one embedding in flight.
//! (A test binary of its own: the live-bytes counter is process-wide.)

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use sam2::cache::{CacheOptions, EmbeddingCache, Priority};
use sam2::{Encoder, ImageView, PixelFormat};

#[test]
fn memory_stays_within_the_budget_plus_the_embedding_in_flight() {
    init_runtime();
    let encoder =
        Arc::new(Encoder::new(model("tiny_a_encoder.onnx"), &Default::default()).unwrap());
    let mut img = read_pnm(&testdata("shapes.ppm"));
    let one = {
        let e = encoder
            .encode(&ImageView::packed(&img.data, img.width, img.height, PixelFormat::Rgb).unwrap())
            .unwrap();
        e.tensors().iter().map(|t| t.byte_len()).sum::<usize>()
    };
    let baseline = sam2::embedding::live_bytes();
    let budget = 3 * one;
    const IMAGES: usize = 16;
    let cache = EmbeddingCache::new(CacheOptions {
        host_budget: budget,
        queue_limit: IMAGES,
        ..Default::default()
    })
    .unwrap();

    let stop = AtomicBool::new(false);
    let peak = AtomicUsize::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let live = sam2::embedding::live_bytes().saturating_sub(baseline);
                peak.fetch_max(live, Ordering::Relaxed);
                std::thread::yield_now();
            }
        });
        for v in 0..IMAGES {
            img.data[v * 3] ^= 0x5a; // another image each time
            let pixels = img.data.clone();
            let image =
                ImageView::packed(&pixels, img.width, img.height, PixelFormat::Rgb).unwrap();
            // Fire and forget: the job handle is dropped, the result lands in the cache.
            drop(
                cache
                    .encode_async(&encoder, &image, Priority::Background)
                    .unwrap(),
            );
        }
        let start = Instant::now();
        while cache.stats().misses < IMAGES as u64
            || cache.stats().queued + cache.stats().running > 0
        {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the queue did not drain"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::Relaxed);
    });

    let peak = peak.into_inner();
    let stats = cache.stats();
    println!(
        "{IMAGES} background encodes into a budget of 3 embeddings ({} MiB): peak live {:.1} MiB, \
         budget + one in flight {:.1} MiB; {} evictions",
        budget >> 20,
        peak as f64 / (1 << 20) as f64,
        (budget + one) as f64 / (1 << 20) as f64,
        stats.evictions
    );
    assert!(
        peak <= budget + one,
        "peak {peak} > budget {budget} + one {one}"
    );
    assert!(
        peak >= budget,
        "the cache did fill up to its budget ({peak} < {budget})"
    );
    assert_eq!((stats.entries, stats.evictions), (3, IMAGES as u64 - 3));
    assert_eq!(stats.host_bytes, budget);
    drop(cache);
    assert_eq!(
        sam2::embedding::live_bytes(),
        baseline,
        "dropping the cache released every embedding it kept"
    );
}
