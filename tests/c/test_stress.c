/*
 * Stress: for a bounded time, many threads encode, predict and save/load on SHARED handles (one
 * encoder and one predictor per model pair, one embedding per image, all used by every thread
 * at once), and every result must equal the single-threaded one: the same masks, scores and
 * boxes, bit for bit.
 *
 *   - predict: a shared embedding, one of several prompts (clicks, a box, a batch, multimask);
 *   - encode: a fresh embedding of the same image on the shared encoder, then one prompt on it;
 *   - files: save a shared embedding to the thread's own file, load it back, one prompt on it.
 *
 * SAM2_STRESS_SECONDS sets the duration (default 5; 1 under valgrind), SAM2_STRESS_THREADS the
 * thread count (default 6). SAM2_STRESS_MODELS=real runs on the real SAM2.1 tiny exports of
 * $SAM2_REAL_MODELS (samexporter's pair and ONNX Runtime's; not under valgrind, where a real
 * model's load takes minutes) instead of the generated tiny_a and tiny_c; SAM2_STRESS_PAIRS=1 uses
 * the first pair only. Prints iterations and
 * mismatches (the goal is 0), and with SAM2_REPORT_DIR set writes them to stress.tsv
 * (stress-real.tsv for the real models) for scripts/reliability.sh.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

enum { PAIRS = 2, IMAGES = 2, PROMPTS = 5, MAX_THREADS = 32, MAX_OBJECTS = SHAPE_COUNT };

static const char *const PAIR_NAMES[PAIRS] = {"tiny_a", "tiny_c"};
/* The real SAM2.1 tiny exports (SAM2_STRESS_MODELS=real): encoder and decoder of each pair. */
static const char *const REAL_PAIRS[PAIRS][2] = {
    {"sam2.1_hiera_tiny.encoder.onnx", "sam2.1_hiera_tiny.decoder.onnx"},
    {"sam2.1_hiera_tiny_image_encoder.onnx", "sam2.1_hiera_tiny_image_decoder.onnx"},
};
static int real;
static const char *const IMAGE_FILES[IMAGES] = {"shapes.ppm", "demo.ppm"};

typedef struct result {
    size_t count;     /* masks */
    size_t plane;
    uint8_t *masks;   /* count * plane */
    float scores[MAX_OBJECTS * 3];
    uint32_t boxes[MAX_OBJECTS * 3][4];
} result;

static test_image images[IMAGES];
static sam2_encoder *encoders[PAIRS];
static sam2_predictor *predictors[PAIRS];
static sam2_embedding *embeddings[PAIRS][IMAGES];
static result refs[PAIRS][IMAGES][PROMPTS];

static sam2_point clicks[IMAGES][SHAPE_COUNT];
static sam2_prompt prompts[IMAGES][PROMPTS][SHAPE_COUNT];
static size_t prompt_counts[PROMPTS];
static sam2_predict_options multimask;

static char dir[TEST_PATH_MAX];
static double deadline;
/* Pairs and images in use: all, or one of each under valgrind (it runs the threads one at a
 * time, ~50x slower: the run checks the same code for leaks and invalid accesses). */
static int pairs_used = PAIRS, images_used = IMAGES;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Prompt kinds: 0-1 a click, 2 a box, 3 a batch of three clicks, 4 a click with every candidate. */
static void make_prompts(void) {
    for (int im = 0; im < IMAGES; im++) {
        uint32_t w = images[im].width, h = images[im].height;
        for (int s = 0; s < SHAPE_COUNT; s++) {
            /* Shape clicks on shapes.ppm; spread points on the other image. */
            float x = im == 0 ? TEST_SHAPES[s].click[0] : (float)(w * (s + 1)) / (SHAPE_COUNT + 1);
            float y = im == 0 ? TEST_SHAPES[s].click[1] : (float)(h * (s % 3 + 1)) / 4;
            clicks[im][s] = (sam2_point){x, y, SAM2_POINT_POSITIVE};
        }
        prompts[im][0][0] = test_points_prompt(&clicks[im][0], 1);
        prompts[im][1][0] = test_points_prompt(&clicks[im][1], 2);
        prompts[im][2][0] = test_box_prompt((float)w / 8, (float)h / 8, (float)w / 2, (float)h / 2);
        for (int s = 0; s < 3; s++) prompts[im][3][s] = test_points_prompt(&clicks[im][s + 2], 1);
        prompts[im][4][0] = test_points_prompt(&clicks[im][3], 1);
    }
    for (int k = 0; k < PROMPTS; k++) prompt_counts[k] = k == 3 ? 3 : 1;
    CHECK_OK(sam2_predict_options_init(&multimask, sizeof multimask));
    multimask.multimask = 1;
}

/* Runs prompt kind `k`; returns the status, and the masks in *out. */
static sam2_status run(int pair, int im, const sam2_embedding *e, int k, sam2_masks **out) {
    return sam2_predict(predictors[pair], e, prompts[im][k], prompt_counts[k],
                        k == 4 ? &multimask : NULL, out);
}

static void capture(const sam2_masks *m, result *r) {
    size_t objects = 0, candidates = 0;
    uint32_t w = 0, h = 0;
    CHECK_OK(sam2_masks_count(m, &objects, &candidates));
    CHECK_OK(sam2_masks_size(m, &w, &h));
    r->count = objects * candidates;
    r->plane = (size_t)w * h;
    CHECK(r->count <= MAX_OBJECTS * 3);
    r->masks = malloc(r->count * r->plane);
    CHECK(r->masks != NULL);
    for (size_t i = 0; i < r->count; i++) {
        memcpy(r->masks + i * r->plane, test_mask(m, i, r->plane), r->plane);
        CHECK_OK(sam2_masks_score(m, i, &r->scores[i]));
        uint64_t area = 0;
        CHECK_OK(sam2_masks_box(m, i, r->boxes[i], &area));
    }
}

/* 0 when `m` equals `r` exactly. Reads only: called from many threads. */
static int differs(const sam2_masks *m, const result *r) {
    size_t objects = 0, candidates = 0;
    if (sam2_masks_count(m, &objects, &candidates) != SAM2_OK || objects * candidates != r->count)
        return 1;
    for (size_t i = 0; i < r->count; i++) {
        const uint8_t *data = NULL;
        size_t len = 0;
        float score = 0;
        uint32_t box[4];
        uint64_t area = 0;
        if (sam2_masks_mask(m, i, &data, &len) != SAM2_OK || len != r->plane ||
            memcmp(data, r->masks + i * r->plane, len) != 0)
            return 1;
        if (sam2_masks_score(m, i, &score) != SAM2_OK || score != r->scores[i]) return 1;
        if (sam2_masks_box(m, i, box, &area) != SAM2_OK || memcmp(box, r->boxes[i], sizeof box) != 0)
            return 1;
    }
    return 0;
}

typedef struct worker {
    pthread_t thread;
    int index;
    unsigned seed;
    long iterations[3]; /* predict, encode, files */
    long mismatches;
    long failures;      /* calls that failed */
    char first[512];
} worker;

static void note(worker *w, const char *what, int pair, int im, int k) {
    if (w->mismatches + w->failures == 1) {
        snprintf(w->first, sizeof w->first, "%s (pair %s, image %s, prompt %d): %s", what,
                 real ? REAL_PAIRS[pair][1] : PAIR_NAMES[pair], IMAGE_FILES[im], k,
                 test_last_error());
    }
}

/* Runs prompt `k` on `e` and compares; counts a failure or a mismatch. */
static void check(worker *w, int pair, int im, const sam2_embedding *e, int k) {
    sam2_masks *m = NULL;
    if (run(pair, im, e, k, &m) != SAM2_OK) {
        w->failures++;
        note(w, "predict failed", pair, im, k);
    } else if (differs(m, &refs[pair][im][k])) {
        w->mismatches++;
        note(w, "result differs from the single-threaded one", pair, im, k);
    }
    sam2_masks_free(m);
}

static void *work(void *arg) {
    worker *w = arg;
    char path[TEST_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/thread%d.sam2", dir, w->index);
    /* At least one iteration each, so even a short run (under valgrind) does every kind. */
    for (long i = 0; i == 0 || now() < deadline; i++) {
        int pair = rand_r(&w->seed) % pairs_used, im = rand_r(&w->seed) % images_used;
        int k = rand_r(&w->seed) % PROMPTS;
        /* Mostly predicts (what a UI does on every click), some encodes, some file round trips;
         * the first iteration of thread t does kind t % 3. */
        int op = i == 0                      ? w->index % 3
                 : (w->index + i) % 8 == 0 ? 1
                 : (w->index + i) % 8 == 4 ? 2
                                           : 0;
        if (op == 0) {
            check(w, pair, im, embeddings[pair][im], k);
        } else if (op == 1) {
            const test_image *img = &images[im];
            sam2_embedding *e = NULL;
            if (sam2_encode(encoders[pair], img->data, (size_t)img->width * img->height * 3,
                            img->width, img->height, 0, SAM2_PIXEL_RGB, &e) != SAM2_OK) {
                w->failures++;
                note(w, "encode failed", pair, im, k);
            } else {
                check(w, pair, im, e, k);
            }
            sam2_embedding_free(e);
        } else {
            sam2_embedding *e = NULL;
            if (sam2_embedding_save(embeddings[pair][im], path) != SAM2_OK ||
                sam2_embedding_load(path, predictors[pair], SAM2_PLACE_HOST, &e) != SAM2_OK) {
                w->failures++;
                note(w, "save or load failed", pair, im, k);
            } else {
                check(w, pair, im, e, k);
            }
            sam2_embedding_free(e);
        }
        w->iterations[op]++;
    }
    unlink(path);
    return NULL;
}

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v != NULL && atoi(v) > 0 ? atoi(v) : fallback;
}

/* Opens pair `p`: generated, or real. */
static void open_pair(int p) {
    if (!real) {
        encoders[p] = test_open_encoder(PAIR_NAMES[p]);
        predictors[p] = test_open_predictor(encoders[p], PAIR_NAMES[p]);
        return;
    }
    const char *models = getenv("SAM2_REAL_MODELS");
    CHECK(models != NULL && models[0] != '\0');
    char path[TEST_PATH_MAX];
    CHECK(snprintf(path, sizeof path, "%s/%s", models, REAL_PAIRS[p][0]) < (int)sizeof path);
    CHECK_OK(sam2_encoder_new(path, NULL, &encoders[p]));
    CHECK(snprintf(path, sizeof path, "%s/%s", models, REAL_PAIRS[p][1]) < (int)sizeof path);
    CHECK_OK(sam2_predictor_new(encoders[p], path, NULL, &predictors[p]));
}

int main(void) {
    test_default_environment();
    const char *which = getenv("SAM2_STRESS_MODELS");
    real = which != NULL && strcmp(which, "real") == 0;
    if (real && test_under_valgrind()) {
        printf("test_stress: the real models are not run under valgrind (a load takes minutes)\n");
        return 0;
    }
    test_init_runtime();
    double seconds = env_int("SAM2_STRESS_SECONDS", test_under_valgrind() ? 1 : 5);
    int threads = env_int("SAM2_STRESS_THREADS", test_under_valgrind() ? 3 : 6);
    if (test_under_valgrind()) pairs_used = images_used = 1;
    int wanted_pairs = env_int("SAM2_STRESS_PAIRS", pairs_used);
    if (wanted_pairs < pairs_used) pairs_used = wanted_pairs;
    CHECK(threads <= MAX_THREADS);
    CHECK(mkdtemp(test_scratch_template(dir, "sam2_stress_")) != NULL);
    for (int im = 0; im < IMAGES; im++) images[im] = test_load_image(IMAGE_FILES[im]);
    make_prompts();

    /* Single-threaded references. */
    for (int p = 0; p < pairs_used; p++) {
        open_pair(p);
        for (int im = 0; im < images_used; im++) {
            embeddings[p][im] = test_encode(encoders[p], &images[im]);
            for (int k = 0; k < PROMPTS; k++) {
                sam2_masks *m = NULL;
                CHECK_OK(run(p, im, embeddings[p][im], k, &m));
                capture(m, &refs[p][im][k]);
                sam2_masks_free(m);
            }
        }
    }

    worker workers[MAX_THREADS];
    deadline = now() + seconds;
    for (int t = 0; t < threads; t++) {
        memset(&workers[t], 0, sizeof workers[t]);
        workers[t].index = t;
        workers[t].seed = 1234u + (unsigned)t;
        CHECK(pthread_create(&workers[t].thread, NULL, work, &workers[t]) == 0);
    }
    long iterations[3] = {0, 0, 0}, mismatches = 0, failures = 0;
    for (int t = 0; t < threads; t++) {
        CHECK(pthread_join(workers[t].thread, NULL) == 0);
        for (int op = 0; op < 3; op++) iterations[op] += workers[t].iterations[op];
        mismatches += workers[t].mismatches;
        failures += workers[t].failures;
        if (workers[t].first[0] != '\0') {
            fprintf(stderr, "thread %d: first problem: %s\n", t, workers[t].first);
        }
    }
    long total = iterations[0] + iterations[1] + iterations[2];
    printf("stress (%s models): %d threads for %.0f s on shared handles: %ld iterations (%ld "
           "predicts, %ld encodes, %ld save/load round trips), %ld mismatches, %ld failed calls\n",
           real ? "real" : "generated", threads, seconds, total, iterations[0], iterations[1],
           iterations[2], mismatches, failures);
    FILE *f = test_report_file(real ? "stress-real.tsv" : "stress.tsv");
    if (f != NULL) {
        fprintf(f, "threads\tseconds\titerations\tpredicts\tencodes\tfiles\tmismatches\tfailures\n"
                   "%d\t%.0f\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\n",
                threads, seconds, total, iterations[0], iterations[1], iterations[2], mismatches,
                failures);
        fclose(f);
    }

    for (int p = 0; p < pairs_used; p++) {
        for (int im = 0; im < images_used; im++) {
            for (int k = 0; k < PROMPTS; k++) free(refs[p][im][k].masks);
            sam2_embedding_free(embeddings[p][im]);
        }
        sam2_predictor_free(predictors[p]);
        sam2_encoder_free(encoders[p]);
    }
    for (int im = 0; im < IMAGES; im++) test_image_free(&images[im]);
    CHECK(rmdir(dir) == 0);
    /* Every thread did each kind of work, and nothing differed or failed. */
    CHECK(iterations[0] > 0 && iterations[1] > 0 && iterations[2] > 0);
    CHECK(mismatches == 0 && failures == 0);
    printf("test_stress: ok\n");
    return 0;
}
