/*
 * Threads: the header says predictors and encoders are thread-safe.
 *   - 8 threads predict at once on ONE predictor and ONE embedding, 30 times each, cycling
 *     through different shapes' prompts (single and batched); every result must be identical
 *     (mask, score, box) to the single-threaded one.
 *   - 2 threads encode at once on ONE encoder; each embedding must give the reference masks.
 *   - The last error message is per thread: a failure on one thread does not change another's.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { PREDICT_THREADS = 8, ITERATIONS = 30, ENCODE_THREADS = 2, ENCODE_ITERATIONS = 3 };

/* Prompt k: a click in shape k (k < 5), or all five clicks as one batch (k == 5). */
enum { PROMPT_KINDS = SHAPE_COUNT + 1 };

typedef struct reference {
    size_t objects;
    uint8_t *masks;   /* objects * plane bytes */
    float scores[SHAPE_COUNT];
    uint32_t boxes[SHAPE_COUNT][4];
} reference;

static sam2_predictor *predictor;
static sam2_encoder *encoder;
static sam2_embedding *embedding;
static test_image image;
static size_t plane;
static reference refs[PROMPT_KINDS];
static sam2_point clicks[SHAPE_COUNT];
static sam2_prompt prompts[SHAPE_COUNT];

static void prompt_of(int kind, const sam2_prompt **p, size_t *count) {
    if (kind < SHAPE_COUNT) {
        *p = &prompts[kind];
        *count = 1;
    } else {
        *p = prompts;
        *count = SHAPE_COUNT;
    }
}

/* Returns 0 when `masks` equals the reference of `kind`; otherwise describes the difference. */
static int compare(const sam2_masks *masks, int kind, char *why, size_t why_len) {
    const reference *r = &refs[kind];
    size_t objects = 0, candidates = 0;
    if (sam2_masks_count(masks, &objects, &candidates) != SAM2_OK || objects != r->objects ||
        candidates != 1) {
        snprintf(why, why_len, "count %zu x %zu", objects, candidates);
        return 1;
    }
    for (size_t i = 0; i < objects; i++) {
        const uint8_t *data = NULL;
        size_t len = 0;
        float score = 0;
        uint32_t box[4];
        uint64_t area = 0;
        if (sam2_masks_mask(masks, i, &data, &len) != SAM2_OK || len != plane ||
            memcmp(data, r->masks + i * plane, plane) != 0) {
            snprintf(why, why_len, "mask %zu differs", i);
            return 1;
        }
        if (sam2_masks_score(masks, i, &score) != SAM2_OK || score != r->scores[i]) {
            snprintf(why, why_len, "score %zu: %g != %g", i, score, r->scores[i]);
            return 1;
        }
        if (sam2_masks_box(masks, i, box, &area) != SAM2_OK ||
            memcmp(box, r->boxes[i], sizeof box) != 0) {
            snprintf(why, why_len, "box %zu differs", i);
            return 1;
        }
    }
    return 0;
}

static void make_references(void) {
    for (int kind = 0; kind < PROMPT_KINDS; kind++) {
        const sam2_prompt *p;
        size_t count;
        prompt_of(kind, &p, &count);
        sam2_masks *masks = NULL;
        CHECK_OK(sam2_predict(predictor, embedding, p, count, NULL, &masks));
        reference *r = &refs[kind];
        r->objects = count;
        r->masks = malloc(count * plane);
        CHECK(r->masks != NULL);
        for (size_t i = 0; i < count; i++) {
            memcpy(r->masks + i * plane, test_mask(masks, i, plane), plane);
            CHECK_OK(sam2_masks_score(masks, i, &r->scores[i]));
            uint64_t area = 0;
            CHECK_OK(sam2_masks_box(masks, i, r->boxes[i], &area));
            CHECK(area > 1000);
        }
        sam2_masks_free(masks);
    }
}

typedef struct worker {
    pthread_t thread;
    int index;
    int done;      /* results checked */
    int failures;  /* results that differed or calls that failed */
    char first_failure[512];
} worker;

static void note_failure(worker *w, const char *what) {
    if (w->failures++ == 0) snprintf(w->first_failure, sizeof w->first_failure, "%s", what);
}

/* Iterations per thread: fewer under valgrind, which runs the threads one at a time. */
static int iterations(int n) {
    return test_under_valgrind() ? 1 : n;
}

static void *predict_worker(void *arg) {
    worker *w = arg;
    for (int it = 0; it < iterations(ITERATIONS); it++) {
        int kind = (w->index + it) % PROMPT_KINDS;
        const sam2_prompt *p;
        size_t count;
        prompt_of(kind, &p, &count);
        sam2_masks *masks = NULL;
        if (sam2_predict(predictor, embedding, p, count, NULL, &masks) != SAM2_OK) {
            note_failure(w, test_last_error());
            continue;
        }
        char why[256];
        if (compare(masks, kind, why, sizeof why) != 0) {
            char what[400];
            snprintf(what, sizeof what, "iteration %d, prompt kind %d: %s", it, kind, why);
            note_failure(w, what);
        }
        sam2_masks_free(masks);
        w->done++;
    }
    return NULL;
}

static void *encode_worker(void *arg) {
    worker *w = arg;
    size_t len = (size_t)image.width * image.height * 3;
    for (int it = 0; it < iterations(ENCODE_ITERATIONS); it++) {
        sam2_embedding *e = NULL;
        if (sam2_encode(encoder, image.data, len, image.width, image.height, 0, SAM2_PIXEL_RGB,
                        &e) != SAM2_OK) {
            note_failure(w, test_last_error());
            continue;
        }
        /* The embedding must be the single-threaded one: every click gives the same mask. */
        for (int kind = 0; kind < PROMPT_KINDS; kind++) {
            const sam2_prompt *p;
            size_t count;
            prompt_of(kind, &p, &count);
            sam2_masks *masks = NULL;
            char why[256];
            if (sam2_predict(predictor, e, p, count, NULL, &masks) != SAM2_OK) {
                note_failure(w, test_last_error());
            } else if (compare(masks, kind, why, sizeof why) != 0) {
                note_failure(w, why);
            }
            sam2_masks_free(masks);
        }
        sam2_embedding_free(e);
        w->done++;
    }
    return NULL;
}

static void run(worker *workers, int n, void *(*body)(void *), int expected_each,
                const char *what) {
    for (int i = 0; i < n; i++) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i].index = i;
        CHECK(pthread_create(&workers[i].thread, NULL, body, &workers[i]) == 0);
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        CHECK(pthread_join(workers[i].thread, NULL) == 0);
        if (workers[i].failures || workers[i].done != expected_each) {
            fprintf(stderr, "%s: thread %d: %d done, %d failures; first: %s\n", what, i,
                    workers[i].done, workers[i].failures, workers[i].first_failure);
            failed = 1;
        }
    }
    CHECK(!failed);
    printf("  %s: %d threads x %d, all identical to the single-threaded results\n", what, n,
           expected_each);
}

/* ---- Last error is per thread ---- */

static void *fail_on_other_thread(void *arg) {
    (void)arg;
    sam2_encoder *out = NULL;
    if (sam2_encoder_new("/nonexistent/other-thread.onnx", NULL, &out) != SAM2_ERR_MODEL) return "status";
    if (!test_last_error_contains("other-thread")) return "message";
    return NULL;
}

static void last_error_is_per_thread(void) {
    sam2_encoder *out = NULL;
    CHECK_STATUS(sam2_encoder_new("/nonexistent/main-thread.onnx", NULL, &out), SAM2_ERR_MODEL);
    pthread_t t;
    void *result = "not run";
    CHECK(pthread_create(&t, NULL, fail_on_other_thread, NULL) == 0);
    CHECK(pthread_join(t, &result) == 0);
    CHECK(result == NULL);
    CHECK_MESSAGE("main-thread");
}

int main(void) {
    test_default_environment();
    test_init_runtime();
    image = test_load_image("shapes.ppm");
    plane = (size_t)image.width * image.height;
    for (int i = 0; i < SHAPE_COUNT; i++) {
        clicks[i].x = TEST_SHAPES[i].click[0];
        clicks[i].y = TEST_SHAPES[i].click[1];
        clicks[i].label = SAM2_POINT_POSITIVE;
        prompts[i] = test_points_prompt(&clicks[i], 1);
    }
    encoder = test_open_encoder("tiny_a");
    predictor = test_open_predictor(encoder, "tiny_a");
    embedding = test_encode(encoder, &image);
    make_references();

    worker workers[PREDICT_THREADS];
    run(workers, PREDICT_THREADS, predict_worker, iterations(ITERATIONS),
        "predict on one predictor");

    /* The same with an explicit pool of 4 sessions (fewer than the threads, so some wait). */
    sam2_predictor_free(predictor);
    sam2_predictor_options options;
    CHECK_OK(sam2_predictor_options_init(&options, sizeof options));
    options.pool_size = 4;
    char path[TEST_PATH_MAX];
    CHECK_OK(sam2_predictor_new(encoder, test_model_path(path, "tiny_a_decoder.onnx"), &options,
                                &predictor));
    run(workers, PREDICT_THREADS, predict_worker, iterations(ITERATIONS),
        "predict on a pool of 4");
    run(workers, ENCODE_THREADS, encode_worker, iterations(ENCODE_ITERATIONS),
        "encode on one encoder");
    last_error_is_per_thread();

    for (int k = 0; k < PROMPT_KINDS; k++) free(refs[k].masks);
    sam2_embedding_free(embedding);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
    test_image_free(&image);
    printf("test_threads: ok\n");
    return 0;
}
