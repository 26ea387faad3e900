/*
 * The embedding cache and background encoding through the C ABI, as an annotation tool uses them:
 *   - opening an image twice encodes it once (SAM2_CACHE_MISS, then SAM2_CACHE_HIT), and the kept
 *     embedding segments like a fresh one;
 *   - pre-encoding in the background: a job is waited for (with a timeout) and the image then
 *     opens from the cache; two requests for one image share one encode;
 *   - cancelling a job, a full queue, a budget of 0, an embedding of another model put in the
 *     cache, options and stats struct sizes;
 *   - NULL for every pointer of every cache function;
 *   - jobs outliving their cache.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct pixels {
    uint8_t *data;
    size_t len;
    uint32_t width, height;
} pixels;

/* The test image as BGR with `variant` pixels changed: another image to the cache. */
static pixels variant_of(const test_image *rgb, unsigned variant) {
    pixels p;
    p.data = test_convert(rgb, SAM2_PIXEL_BGR, 0, &p.len);
    p.width = rgb->width;
    p.height = rgb->height;
    for (unsigned i = 0; i < variant; i++) p.data[i * 3] ^= 0x5a;
    return p;
}

static sam2_cache_stats stats_of(const sam2_cache *cache) {
    sam2_cache_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_OK(sam2_cache_get_stats(cache, &s));
    return s;
}

/* A click in the red disc of the kept embedding selects it (IoU >= 0.9). */
static void check_segments(const sam2_predictor *predictor, const sam2_embedding *embedding,
                           const test_truth *truth) {
    sam2_point click = {TEST_SHAPES[RED_DISC].click[0], TEST_SHAPES[RED_DISC].click[1], 1};
    sam2_prompt prompt = test_points_prompt(&click, 1);
    sam2_masks *masks = test_predict1(predictor, embedding, &prompt);
    size_t plane = (size_t)truth->width * truth->height;
    uint8_t *want = test_click_truth(truth, RED_DISC);
    double iou = test_iou(test_mask(masks, 0, plane), want, plane);
    printf("  click on the cached embedding: IoU %.3f\n", iou);
    CHECK(iou >= 0.9);
    free(want);
    sam2_masks_free(masks);
}

static void open_twice_encodes_once(const test_image *img, const test_truth *truth) {
    sam2_encoder *encoder = test_open_encoder("tiny_a");
    sam2_predictor *predictor = test_open_predictor(encoder, "tiny_a");
    sam2_cache *cache = NULL;
    CHECK_OK(sam2_cache_new(NULL, &cache));
    size_t len = (size_t)img->width * img->height * 3;

    sam2_embedding *first = NULL, *second = NULL;
    uint32_t source = 99;
    CHECK_OK(sam2_cache_encode(cache, encoder, img->data, len, img->width, img->height, 0,
                               SAM2_PIXEL_RGB, &first, &source));
    CHECK(source == SAM2_CACHE_MISS);
    CHECK_OK(sam2_cache_encode(cache, encoder, img->data, len, img->width, img->height, 0,
                               SAM2_PIXEL_RGB, &second, &source));
    CHECK(source == SAM2_CACHE_HIT);
    check_segments(predictor, second, truth);

    /* out_source is optional. */
    sam2_embedding *third = NULL;
    CHECK_OK(sam2_cache_encode(cache, encoder, img->data, len, img->width, img->height, 0,
                               SAM2_PIXEL_RGB, &third, NULL));
    sam2_cache_stats s = stats_of(cache);
    CHECK(s.hits == 2 && s.misses == 1 && s.entries == 1);
    CHECK(s.host_bytes > 0 && s.device_bytes == 0);

    /* The handles outlive the cache, and the cache outlives the encoder handle. */
    sam2_encoder_free(encoder);
    sam2_embedding *fourth = NULL;
    pixels other = variant_of(img, 1);
    sam2_encoder *encoder2 = test_open_encoder("tiny_a");
    CHECK_OK(sam2_cache_encode(cache, encoder2, other.data, other.len, other.width, other.height,
                               0, SAM2_PIXEL_BGR, &fourth, &source));
    CHECK(source == SAM2_CACHE_MISS);
    sam2_encoder_free(encoder2);
    sam2_cache_free(cache);
    check_segments(predictor, first, truth);
    check_segments(predictor, fourth, truth);

    free(other.data);
    sam2_embedding_free(first);
    sam2_embedding_free(second);
    sam2_embedding_free(third);
    sam2_embedding_free(fourth);
    sam2_predictor_free(predictor);
}

static void background_encoding(const test_image *img, const test_truth *truth) {
    sam2_encoder *encoder = test_open_encoder("tiny_a");
    sam2_predictor *predictor = test_open_predictor(encoder, "tiny_a");
    sam2_cache *cache = NULL;
    CHECK_OK(sam2_cache_new(NULL, &cache));

    /* Pre-encode three "next images"; the buffers are released as soon as the calls return. */
    enum { N = 3 };
    sam2_encode_job *jobs[N];
    for (unsigned i = 0; i < N; i++) {
        pixels p = variant_of(img, i + 1);
        CHECK_OK(sam2_cache_encode_async(cache, encoder, p.data, p.len, p.width, p.height, 0,
                                         SAM2_PIXEL_BGR, SAM2_PRIORITY_BACKGROUND, &jobs[i]));
        memset(p.data, 0, p.len);
        free(p.data);
    }
    /* A second request for image 1 joins its encode (or finds it kept, if it already ended). */
    pixels p1 = variant_of(img, 1);
    sam2_encode_job *twin = NULL;
    CHECK_OK(sam2_cache_encode_async(cache, encoder, p1.data, p1.len, p1.width, p1.height, 0,
                                     SAM2_PIXEL_BGR, SAM2_PRIORITY_BACKGROUND, &twin));
    for (unsigned i = 0; i < N; i++) {
        sam2_embedding *e = NULL;
        CHECK_OK(sam2_encode_job_wait(jobs[i], SAM2_WAIT_FOREVER, &e));
        uint32_t state = 99;
        CHECK_OK(sam2_encode_job_state(jobs[i], &state));
        CHECK(state == SAM2_JOB_DONE);
        uint32_t w = 0, h = 0;
        CHECK_OK(sam2_embedding_image_size(e, &w, &h));
        CHECK(w == img->width && h == img->height);
        check_segments(predictor, e, truth);
        sam2_embedding_free(e);
    }
    sam2_embedding *e = NULL;
    CHECK_OK(sam2_encode_job_wait(twin, 0, &e)); /* already done: no waiting */
    sam2_embedding_free(e);

    /* Opening a pre-encoded image is a hit. */
    uint32_t source = 99;
    CHECK_OK(sam2_cache_encode(cache, encoder, p1.data, p1.len, p1.width, p1.height, 0,
                               SAM2_PIXEL_BGR, &e, &source));
    CHECK(source == SAM2_CACHE_HIT);
    sam2_embedding_free(e);
    sam2_cache_stats s = stats_of(cache);
    CHECK(s.misses == N && s.joins + s.hits == 2 && s.entries == N);
    CHECK(s.queued == 0);

    /* Cancelling a finished job: its handle reports the cancel, the kept embedding stays. */
    CHECK_OK(sam2_encode_job_cancel(twin));
    CHECK_OK(sam2_encode_job_cancel(twin));
    uint32_t state = 99;
    CHECK_OK(sam2_encode_job_state(twin, &state));
    CHECK(state == SAM2_JOB_CANCELLED);
    e = NULL;
    CHECK_FAILS(sam2_encode_job_wait(twin, SAM2_WAIT_FOREVER, &e), SAM2_ERR_CANCELLED,
                "cancelled");
    CHECK(e == NULL);
    CHECK(stats_of(cache).entries == N);

    size_t cancelled = 99;
    CHECK_OK(sam2_cache_cancel_all(cache, &cancelled));
    CHECK(cancelled == 0); /* nothing is pending */
    CHECK_OK(sam2_cache_cancel_all(cache, NULL));
    CHECK_OK(sam2_cache_clear(cache));
    s = stats_of(cache);
    CHECK(s.entries == 0 && s.host_bytes == 0);

    /* Jobs outlive their cache. */
    sam2_cache_free(cache);
    CHECK_OK(sam2_encode_job_wait(jobs[0], 0, &e));
    sam2_embedding_free(e);
    for (unsigned i = 0; i < N; i++) sam2_encode_job_free(jobs[i]);
    sam2_encode_job_free(twin);
    free(p1.data);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
}

static void limits_and_refusals(const test_image *img) {
    sam2_encoder *encoder = test_open_encoder("tiny_a");
    size_t len = (size_t)img->width * img->height * 3;

    /* Options: defaults, sizes. */
    sam2_cache_options o;
    memset(&o, 0xAB, sizeof o);
    CHECK_OK(sam2_cache_options_init(&o, sizeof o));
    CHECK(o.struct_size == sizeof o && o.queue_limit == 8);
    CHECK(o.host_budget_bytes == 160u << 20 && o.device_budget_bytes == 64u << 20);
    CHECK_FAILS(sam2_cache_options_init(&o, sizeof o - 1), SAM2_ERR_INVALID_ARGUMENT,
                "struct_size");
    sam2_cache *cache = NULL;
    o.queue_limit = 70000;
    CHECK_FAILS(sam2_cache_new(&o, &cache), SAM2_ERR_INVALID_ARGUMENT, "options.queue_limit");
    CHECK(cache == NULL);
    sam2_cache_options bad = o;
    bad.struct_size = 3;
    CHECK_FAILS(sam2_cache_new(&bad, &cache), SAM2_ERR_INVALID_ARGUMENT, "struct_size");

    /* No queue, nothing kept. */
    CHECK_OK(sam2_cache_options_init(&o, sizeof o));
    o.queue_limit = 0;
    o.host_budget_bytes = 0;
    CHECK_OK(sam2_cache_new(&o, &cache));
    sam2_encode_job *job = NULL;
    CHECK_FAILS(sam2_cache_encode_async(cache, encoder, img->data, len, img->width, img->height,
                                        0, SAM2_PIXEL_RGB, SAM2_PRIORITY_BACKGROUND, &job),
                SAM2_ERR_QUEUE_FULL, "queue_limit");
    CHECK(job == NULL);
    CHECK_FAILS(sam2_cache_encode_async(cache, encoder, img->data, len, img->width, img->height,
                                        0, SAM2_PIXEL_RGB, 2, &job),
                SAM2_ERR_INVALID_ARGUMENT, "priority");
    /* An image the user opened is never refused for a full queue. */
    CHECK_OK(sam2_cache_encode_async(cache, encoder, img->data, len, img->width, img->height, 0,
                                     SAM2_PIXEL_RGB, SAM2_PRIORITY_FOREGROUND, &job));
    sam2_embedding *opened = NULL;
    CHECK_OK(sam2_encode_job_wait(job, SAM2_WAIT_FOREVER, &opened));
    sam2_embedding_free(opened);
    sam2_encode_job_free(job);
    job = NULL;
    sam2_embedding *e = NULL;
    uint32_t source = 99;
    CHECK_OK(sam2_cache_encode(cache, encoder, img->data, len, img->width, img->height, 0,
                               SAM2_PIXEL_RGB, &e, &source));
    CHECK(source == SAM2_CACHE_MISS);
    sam2_cache_stats s = stats_of(cache);
    CHECK(s.entries == 0 && s.rejected == 2 && s.host_bytes == 0); /* both encodes were handed over, not kept */

    /* Stats need their struct_size. */
    sam2_cache_stats wrong;
    memset(&wrong, 0, sizeof wrong);
    CHECK_FAILS(sam2_cache_get_stats(cache, &wrong), SAM2_ERR_INVALID_ARGUMENT, "struct_size");

    /* An embedding of another model, or another size, is refused by put. */
    sam2_encoder *other = test_open_encoder("tiny_b");
    sam2_embedding *foreign = test_encode(other, img);
    CHECK_FAILS(sam2_cache_put(cache, encoder, img->data, len, img->width, img->height, 0,
                               SAM2_PIXEL_RGB, foreign),
                SAM2_ERR_MODEL_MISMATCH, "model");
    CHECK_FAILS(sam2_cache_put(cache, encoder, img->data, len, 8, 8, 0, SAM2_PIXEL_RGB, e),
                SAM2_ERR_INVALID_ARGUMENT, "embedding");
    /* Bad pixel arguments are reported as sam2_encode reports them. */
    CHECK_FAILS(sam2_cache_encode(cache, encoder, img->data, len - 1, img->width, img->height, 0,
                                  SAM2_PIXEL_RGB, &e, NULL),
                SAM2_ERR_INVALID_ARGUMENT, "pixels");
    CHECK_FAILS(sam2_cache_encode_async(cache, encoder, img->data, len, img->width, img->height,
                                        0, 9, 0, &job),
                SAM2_ERR_INVALID_ARGUMENT, "pixel_format");

    sam2_embedding_free(foreign);
    sam2_encoder_free(other);
    sam2_embedding_free(e);
    sam2_cache_free(cache);
    sam2_encoder_free(encoder);
}

static void null_arguments(const test_image *img) {
    sam2_encoder *encoder = test_open_encoder("tiny_a");
    sam2_cache *cache = NULL;
    CHECK_OK(sam2_cache_new(NULL, &cache));
    size_t len = (size_t)img->width * img->height * 3;
    const uint8_t *px = img->data;
    uint32_t w = img->width, h = img->height;
    sam2_embedding *e = NULL;
    sam2_encode_job *job = NULL;
    sam2_embedding *some = test_encode(encoder, img);

    CHECK_FAILS(sam2_cache_options_init(NULL, sizeof(sam2_cache_options)),
                SAM2_ERR_NULL_ARGUMENT, "options");
    CHECK_FAILS(sam2_cache_new(NULL, NULL), SAM2_ERR_NULL_ARGUMENT, "out");
    CHECK_FAILS(sam2_cache_encode(NULL, encoder, px, len, w, h, 0, 0, &e, NULL),
                SAM2_ERR_NULL_ARGUMENT, "cache");
    CHECK_FAILS(sam2_cache_encode(cache, NULL, px, len, w, h, 0, 0, &e, NULL),
                SAM2_ERR_NULL_ARGUMENT, "encoder");
    CHECK_FAILS(sam2_cache_encode(cache, encoder, NULL, len, w, h, 0, 0, &e, NULL),
                SAM2_ERR_NULL_ARGUMENT, "pixels");
    CHECK_FAILS(sam2_cache_encode(cache, encoder, px, len, w, h, 0, 0, NULL, NULL),
                SAM2_ERR_NULL_ARGUMENT, "out");
    CHECK_FAILS(sam2_cache_encode_async(NULL, encoder, px, len, w, h, 0, 0, 0, &job),
                SAM2_ERR_NULL_ARGUMENT, "cache");
    CHECK_FAILS(sam2_cache_encode_async(cache, NULL, px, len, w, h, 0, 0, 0, &job),
                SAM2_ERR_NULL_ARGUMENT, "encoder");
    CHECK_FAILS(sam2_cache_encode_async(cache, encoder, NULL, len, w, h, 0, 0, 0, &job),
                SAM2_ERR_NULL_ARGUMENT, "pixels");
    CHECK_FAILS(sam2_cache_encode_async(cache, encoder, px, len, w, h, 0, 0, 0, NULL),
                SAM2_ERR_NULL_ARGUMENT, "out");
    CHECK_FAILS(sam2_cache_put(NULL, encoder, px, len, w, h, 0, 0, some), SAM2_ERR_NULL_ARGUMENT,
                "cache");
    CHECK_FAILS(sam2_cache_put(cache, NULL, px, len, w, h, 0, 0, some), SAM2_ERR_NULL_ARGUMENT,
                "encoder");
    CHECK_FAILS(sam2_cache_put(cache, encoder, NULL, len, w, h, 0, 0, some),
                SAM2_ERR_NULL_ARGUMENT, "pixels");
    CHECK_FAILS(sam2_cache_put(cache, encoder, px, len, w, h, 0, 0, NULL), SAM2_ERR_NULL_ARGUMENT,
                "embedding");
    CHECK_FAILS(sam2_cache_clear(NULL), SAM2_ERR_NULL_ARGUMENT, "cache");
    CHECK_FAILS(sam2_cache_cancel_all(NULL, NULL), SAM2_ERR_NULL_ARGUMENT, "cache");
    sam2_cache_stats s;
    s.struct_size = sizeof s;
    CHECK_FAILS(sam2_cache_get_stats(NULL, &s), SAM2_ERR_NULL_ARGUMENT, "cache");
    CHECK_FAILS(sam2_cache_get_stats(cache, NULL), SAM2_ERR_NULL_ARGUMENT, "out");
    uint32_t state = 0;
    CHECK_FAILS(sam2_encode_job_wait(NULL, 0, &e), SAM2_ERR_NULL_ARGUMENT, "job");
    CHECK_FAILS(sam2_encode_job_state(NULL, &state), SAM2_ERR_NULL_ARGUMENT, "job");
    CHECK_FAILS(sam2_encode_job_cancel(NULL), SAM2_ERR_NULL_ARGUMENT, "job");
    CHECK_OK(sam2_cache_encode_async(cache, encoder, px, len, w, h, 0, 0, 0, &job));
    CHECK_FAILS(sam2_encode_job_wait(job, 0, NULL), SAM2_ERR_NULL_ARGUMENT, "out");
    CHECK_FAILS(sam2_encode_job_state(job, NULL), SAM2_ERR_NULL_ARGUMENT, "out_state");
    sam2_cache_free(NULL);
    sam2_encode_job_free(NULL);
    CHECK(e == NULL);

    sam2_encode_job_free(job);
    sam2_embedding_free(some);
    sam2_cache_free(cache);
    sam2_encoder_free(encoder);
}

/* An encode that fails inside ONNX Runtime reports its status and message to the job's waiter. */
static void background_failure(void) {
    sam2_encoder *faulty = test_open_encoder("faulty_a"); /* fails on an almost white image */
    sam2_cache *cache = NULL;
    CHECK_OK(sam2_cache_new(NULL, &cache));
    uint8_t white[32 * 24 * 3];
    memset(white, 255, sizeof white);
    sam2_encode_job *job = NULL;
    CHECK_OK(sam2_cache_encode_async(cache, faulty, white, sizeof white, 32, 24, 0, SAM2_PIXEL_RGB,
                                     SAM2_PRIORITY_BACKGROUND, &job));
    sam2_embedding *e = NULL;
    CHECK_FAILS(sam2_encode_job_wait(job, SAM2_WAIT_FOREVER, &e), SAM2_ERR_ONNXRUNTIME, "Reshape");
    CHECK(e == NULL);
    uint32_t state = 99;
    CHECK_OK(sam2_encode_job_state(job, &state));
    CHECK(state == SAM2_JOB_FAILED);
    CHECK_FAILS(sam2_cache_encode(cache, faulty, white, sizeof white, 32, 24, 0, SAM2_PIXEL_RGB,
                                  &e, NULL),
                SAM2_ERR_ONNXRUNTIME, "Reshape");
    CHECK(stats_of(cache).entries == 0);
    sam2_encode_job_free(job);
    sam2_cache_free(cache);
    sam2_encoder_free(faulty);
}

int main(void) {
    test_default_environment();
    test_init_runtime();
    test_image img = test_load_image("shapes.ppm");
    test_truth truth = test_load_truth();

    open_twice_encodes_once(&img, &truth);
    background_encoding(&img, &truth);
    limits_and_refusals(&img);
    null_arguments(&img);
    background_failure();

    test_truth_free(&truth);
    test_image_free(&img);
    printf("test_cache: ok\n");
    return 0;
}
