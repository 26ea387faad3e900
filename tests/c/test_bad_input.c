/*
 * Bad input, everywhere: every exported function is called with every kind of bad value a host
 * can pass, and each call must give its documented status with a message naming the argument,
 * leave its out-params untouched, and not crash (tools/ci/test-valgrind.sh also runs this program
 * under valgrind: nothing may leak or touch invalid memory). NULL, in every pointer argument, is
 * test_null_sweep.c's; everything else is here:
 *
 *   - handles: a small integer, a misaligned pointer, a live handle of another type, and a
 *     handle already freed (the registry of live handles: nothing reads freed memory, so this
 *     runs under valgrind too); double and wrong-type frees are ignored;
 *   - sizes: zero, "negative" (SIZE_MAX, INT32_MIN), width × height × stride that overflows,
 *     a stride smaller than a row, buffers shorter than the image, counts beyond the limits;
 *   - numbers: NaN, ±inf and out-of-image coordinates for every point and box coordinate;
 *   - enums and flags: the first value past the last, UINT32_MAX;
 *   - struct_size: 0, 1, between published versions, one more than the header's, SIZE_MAX;
 *   - strings: empty, invalid UTF-8; paths that do not exist, are directories, are not writable,
 *     or pass through a file;
 *   - model files: truncated, corrupted, not ONNX, ONNX but not SAM2, an encoder paired with a
 *     decoder of another export; and the hostile copies of the real SAM2.1 tiny exports
 *     ($SAM2_REAL_HOSTILE, tools/models/hostile_models.py): truncated, bit-flipped, external data
 *     outside the model's directory, huge declared dimensions (not under valgrind: a real
 *     model's load takes minutes there);
 *   - ONNX Runtime libraries: missing, a directory, not a shared library, a library that is not
 *     ONNX Runtime, one too old, one without the API; discovery through a bad variable.
 *
 * Every input is counted per entry point (sweep.h); the table is printed and, with SAM2_REPORT_DIR
 * set, written to bad_input.tsv for scripts/reliability.sh. A mismatch does not stop the sweep:
 * all are listed, then the program fails.
 *
 * On Windows (tools/ci/test-windows.sh, under Wine) the same sweep runs with Windows' counterparts:
 * the stand-ins are DLLs, kernel32.dll is the library that is not ONNX Runtime, a named pipe and
 * NUL are the files that are not regular, and discovery has no system search to list. The two
 * checks of directory permissions with no counterpart there are skipped, each with a line saying
 * why.
 *
 * Usage: test_bad_input <fake_ort.so (1.20.0)> <fake_ort_null_api.so>
 */
#define _POSIX_C_SOURCE 200809L

#include <fcntl.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "sweep.h"
#include "track_clip.h"

#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#endif

#define SENTINEL_PTR ((void *)(uintptr_t)0x5a5a5a50U)

/* ---- Fixtures ---- */

static test_image image;
static char dir[TEST_PATH_MAX];           /* scratch directory, removed at the end */
static char enc_path[TEST_PATH_MAX], dec_path[TEST_PATH_MAX];
static sam2_encoder *encoder;
static sam2_predictor *predictor;
static sam2_embedding *embedding;
static sam2_masks *masks;
static sam2_cache *cache;
static sam2_encode_job *job;
static size_t image_len;
/* A tracker on the generated modules (num_frames 24), frame 0 of the clip, and the result of a
 * click on the disc there (one object). */
static sam2_tracker *tracker;
static sam2_track_result *track_result;
/* The masks segment everything found on the embedding (a 2 x 2 grid, thresholds at 0). */
static sam2_everything *everything;
static uint8_t clip_rgb[CLIP_WIDTH * CLIP_HEIGHT * 3];
enum { CLIP_LEN = CLIP_WIDTH * CLIP_HEIGHT * 3 };

static void scratch(char out[TEST_PATH_MAX], const char *name) {
    CHECK(snprintf(out, TEST_PATH_MAX, "%s/%s", dir, name) < TEST_PATH_MAX);
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(len == 0 || fwrite(data, 1, len, f) == len);
    CHECK(fclose(f) == 0);
}

static int exists(const char *path) {
    return access(path, F_OK) == 0;
}

/* ---- Bad handles ---- */

enum kind {
    ENCODER, PREDICTOR, EMBEDDING, MASKS, CACHE, JOB, TRACKER, TRACK_RESULT, EVERYTHING, KINDS
};
static const char *const FREE_NAMES[KINDS] = {
    "sam2_encoder_free", "sam2_predictor_free", "sam2_embedding_free",  "sam2_masks_free",
    "sam2_cache_free",   "sam2_encode_job_free", "sam2_tracker_free", "sam2_track_result_free",
    "sam2_everything_free"};

static const void *live(enum kind k) {
    switch (k) {
    case ENCODER: return encoder;
    case PREDICTOR: return predictor;
    case EMBEDDING: return embedding;
    case MASKS: return masks;
    case CACHE: return cache;
    case TRACKER: return tracker;
    case TRACK_RESULT: return track_result;
    case EVERYTHING: return everything;
    default: return job;
    }
}

/* Segment everything on the embedding with a 2 x 2 grid: a small result. */
static sam2_everything *small_everything(void) {
    sam2_everything_options o;
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.points_per_side = 2;
    o.pred_iou_thresh = 0.0f;
    o.stability_score_thresh = 0.0f;
    sam2_everything *e = NULL;
    CHECK_OK(sam2_segment_everything_embedding(predictor, embedding, &o, &e));
    return e;
}

/* A handle of kind `k`, made and freed just now: the pointer is dangling, its block not yet
 * reused by another handle of that kind. */
static const void *freed(enum kind k) {
    switch (k) {
    case ENCODER: {
        sam2_encoder *e = NULL;
        CHECK_OK(sam2_encoder_new(enc_path, NULL, &e));
        sam2_encoder_free(e);
        return e;
    }
    case PREDICTOR: {
        sam2_predictor_options o;
        CHECK_OK(sam2_predictor_options_init(&o, sizeof o));
        o.pool_size = 1;
        sam2_predictor *p = NULL;
        CHECK_OK(sam2_predictor_new(NULL, dec_path, &o, &p));
        sam2_predictor_free(p);
        return p;
    }
    case EMBEDDING: {
        sam2_embedding *e = NULL;
        CHECK_OK(sam2_embedding_to_host(embedding, &e));
        sam2_embedding_free(e);
        return e;
    }
    case MASKS: {
        sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
        sam2_prompt prompt = test_points_prompt(&pt, 1);
        sam2_masks *m = test_predict1(predictor, embedding, &prompt);
        sam2_masks_free(m);
        return m;
    }
    case CACHE: {
        sam2_cache *c = NULL;
        CHECK_OK(sam2_cache_new(NULL, &c));
        sam2_cache_free(c);
        return c;
    }
    case TRACKER: {
        sam2_tracker *t = test_open_tracker(NULL);
        sam2_tracker_free(t);
        return t;
    }
    case EVERYTHING: {
        sam2_everything *e = small_everything();
        sam2_everything_free(e);
        return e;
    }
    case TRACK_RESULT: {
        sam2_point pt = {34, 96, SAM2_POINT_POSITIVE};
        sam2_prompt prompt = test_points_prompt(&pt, 1);
        sam2_track_result *r = NULL;
        CHECK_OK(sam2_tracker_add_prompt(tracker, 0, clip_rgb, CLIP_LEN, CLIP_WIDTH, CLIP_HEIGHT,
                                         0, SAM2_PIXEL_RGB, 1, &prompt, &r));
        sam2_track_result_free(r);
        return r;
    }
    default: {
        sam2_encode_job *j = NULL;
        CHECK_OK(sam2_cache_encode_async(cache, encoder, image.data, image_len, image.width,
                                         image.height, 0, SAM2_PIXEL_RGB,
                                         SAM2_PRIORITY_BACKGROUND, &j));
        sam2_encode_job_free(j);
        return j;
    }
    }
}

/* Successive bad values for a handle argument of kind `kind` (NULL is test_null_sweep.c's). */
typedef struct bad_handle {
    enum kind kind;
    int step;
    const void *ptr;
    sam2_status want;
} bad_handle;

static int next_bad(bad_handle *b) {
    for (;;) {
        int step = b->step++;
        b->want = SAM2_ERR_INVALID_ARGUMENT;
        if (step == 0) { b->ptr = (const void *)(uintptr_t)0x10; return 1; }
        if (step == 1) { b->ptr = (const char *)live(b->kind) + 1; return 1; }
        if (step >= 2 && step < 2 + KINDS) {
            enum kind other = (enum kind)(step - 2);
            if (other == b->kind) continue;
            b->ptr = live(other);
            return 1;
        }
        if (step == 2 + KINDS) {
            /* Under valgrind too: handles are checked against the registry of live handles,
             * never read, so a freed one is recognised without touching freed memory. */
            b->ptr = freed(b->kind);
            return 1;
        }
        return 0;
    }
}

#define FOR_BAD(k, b) for (bad_handle b = {k, 0, NULL, SAM2_OK}; next_bad(&b);)

/* ---- ONNX Runtime (first: nothing is loaded yet) ---- */

static void runtime(const char *fake_old, const char *fake_null_api) {
    const char *E = "sam2_runtime_init";
    const char *real = getenv("SAM2_ONNXRUNTIME_PATH");
    CHECK(real != NULL && real[0] != '\0');
    TRY_VALUE("sam2_runtime_version", sam2_runtime_version() == NULL, NULL);

#ifdef _WIN32
    const char *missing = "C:\\nonexistent\\sam2\\onnxruntime.dll";
    /* A system library that is not ONNX Runtime, by full path (the only way sam2 loads one). */
    char not_ort[TEST_PATH_MAX];
    UINT n = GetSystemDirectoryA(not_ort, MAX_PATH);
    CHECK(n > 0 && n < MAX_PATH);
    strcat(not_ort, "\\kernel32.dll");
    const char *library_name = "onnxruntime.dll";
#else
    const char *missing = "/nonexistent/sam2/libonnxruntime.so.1.31.1";
    const char *not_ort = "libm.so.6";
    const char *library_name = "libonnxruntime.so";
#endif
    TRY(E, sam2_runtime_init(missing), SAM2_ERR_RUNTIME_NOT_FOUND, missing);
    TRY(E, sam2_runtime_init(dir), SAM2_ERR_RUNTIME_NOT_FOUND, dir);
    char text[TEST_PATH_MAX];
    scratch(text, library_name);
    write_file(text, "not a shared object\n", 20);
    TRY(E, sam2_runtime_init(text), SAM2_ERR_RUNTIME_NOT_FOUND, text);
    TRY(E, sam2_runtime_init(not_ort), SAM2_ERR_RUNTIME_NOT_FOUND, "OrtGetApiBase");
    TRY(E, sam2_runtime_init(fake_old), SAM2_ERR_RUNTIME_NOT_FOUND, "1.20.0");
    TRY(E, sam2_runtime_init(fake_null_api), SAM2_ERR_RUNTIME_NOT_FOUND, fake_null_api);
    TRY(E, sam2_runtime_init(""), SAM2_ERR_INVALID_ARGUMENT, "onnxruntime_path");
    TRY(E, sam2_runtime_init("\xff\xfe.so"), SAM2_ERR_INVALID_ARGUMENT, "onnxruntime_path");
    /* Discovery through a variable naming a missing file: every path tried is listed. */
    char *saved = strdup(real);
    CHECK(saved != NULL);
    setenv("SAM2_ONNXRUNTIME_PATH", missing, 1);
    unsetenv("ORT_DYLIB_PATH");
    TRY(E, sam2_runtime_init(NULL), SAM2_ERR_RUNTIME_NOT_FOUND, missing);
    CHECK_MESSAGE("SAM2_ONNXRUNTIME_PATH");
    CHECK_MESSAGE(library_name); /* how to fix it names this system's file */
#ifdef _WIN32
    /* No system search on Windows (an old onnxruntime.dll in System32 is a known trap): the
     * last place tried is sam2.dll's directory, which test-windows.sh keeps without one. */
    CHECK_MESSAGE("beside libsam2");
    CHECK(!test_last_error_contains("system library search"));
#else
    CHECK_MESSAGE("system library search");
#endif
    setenv("SAM2_ONNXRUNTIME_PATH", saved, 1);
    free(saved);
    TRY_VALUE("sam2_runtime_version", sam2_runtime_version() == NULL, NULL);

    CHECK_OK(sam2_runtime_init(NULL));
    TRY(E, sam2_runtime_init(fake_old), SAM2_ERR_ENVIRONMENT_CONFIGURATION, fake_old);
    unlink(text);
}

/* ---- Strings, errors, log callback, options_init ---- */

static void library(void) {
    const uint32_t unknown[] = {SAM2_ERR_OUT_OF_MEMORY + 1, 100, 0x7FFFFFFFu, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = sam2_status_str(unknown[i]);
        TRY_VALUE("sam2_status_str", s != NULL && strstr(s, "unknown") != NULL, NULL);
    }
    const uint32_t levels[] = {SAM2_LOG_ERROR + 1, 0xFFFFFFFFu};
    for (size_t i = 0; i < 2; i++) {
        TRY("sam2_set_log_callback", sam2_set_log_callback(NULL, NULL, levels[i]),
            SAM2_ERR_INVALID_ARGUMENT, "min_level");
    }

    /* (buf, len, needed): too small never writes the buffer, and keeps the message. */
    const char *E = "sam2_last_error_message";
    sam2_encoder *unused = NULL;
    CHECK_STATUS(sam2_encoder_new("/nonexistent/for-the-message.onnx", NULL, &unused),
                 SAM2_ERR_MODEL);
    size_t needed = 0;
    char small[4] = {'Z', 'Z', 'Z', 'Z'};
    TRY_IF(E, sam2_last_error_message(small, 0, NULL), SAM2_ERR_BUFFER_TOO_SMALL, NULL,
           small[0] == 'Z');
    TRY_IF(E, sam2_last_error_message(small, sizeof small, &needed), SAM2_ERR_BUFFER_TOO_SMALL,
           "for-the-message", small[0] == 'Z' && small[3] == 'Z');

    /* options_init: every struct_size that is not a published one. */
    const size_t sizes[] = {0, 1, 3, 20, 100, SIZE_MAX};
    sam2_encoder_options eo;
    sam2_predictor_options po;
    sam2_predict_options qo;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        memset(&eo, 0x77, sizeof eo);
        memset(&po, 0x77, sizeof po);
        memset(&qo, 0x77, sizeof qo);
        TRY_IF("sam2_encoder_options_init", sam2_encoder_options_init(&eo, sizes[i]),
               SAM2_ERR_INVALID_ARGUMENT, "struct_size", eo.struct_size == 0x77777777u);
        TRY_IF("sam2_predictor_options_init", sam2_predictor_options_init(&po, sizes[i]),
               SAM2_ERR_INVALID_ARGUMENT, "struct_size", po.struct_size == 0x77777777u);
        TRY_IF("sam2_predict_options_init", sam2_predict_options_init(&qo, sizes[i]),
               SAM2_ERR_INVALID_ARGUMENT, "struct_size", qo.struct_size == 0x77777777u);
        sam2_tracker_options to;
        memset(&to, 0x77, sizeof to);
        TRY_IF("sam2_tracker_options_init", sam2_tracker_options_init(&to, sizes[i]),
               SAM2_ERR_INVALID_ARGUMENT, "struct_size", to.struct_size == 0x77777777u);
        sam2_everything_options vo;
        memset(&vo, 0x77, sizeof vo);
        TRY_IF("sam2_everything_options_init", sam2_everything_options_init(&vo, sizes[i]),
               SAM2_ERR_INVALID_ARGUMENT, "struct_size", vo.struct_size == 0x77777777u);
    }
    {
        /* Between the first version (ending at max_clicks) and this one, and one past it. */
        sam2_everything_options vo;
        const size_t between[] = {offsetof(sam2_everything_options, max_clicks) + 8,
                                  sizeof vo + 1};
        for (size_t i = 0; i < 2; i++) {
            memset(&vo, 0x77, sizeof vo);
            TRY_IF("sam2_everything_options_init", sam2_everything_options_init(&vo, between[i]),
                   SAM2_ERR_INVALID_ARGUMENT, "struct_size", vo.struct_size == 0x77777777u);
        }
    }
    TRY_IF("sam2_encoder_options_init", sam2_encoder_options_init(&eo, sizeof eo + 1),
           SAM2_ERR_INVALID_ARGUMENT, "struct_size", eo.struct_size == 0x77777777u);
}

/* ---- Models ---- */

static void encoder_fails(const char *path, const sam2_encoder_options *o, sam2_status want,
                          const char *needle) {
    sam2_encoder *out = SENTINEL_PTR;
    TRY_IF("sam2_encoder_new", sam2_encoder_new(path, o, &out), want, needle, out == SENTINEL_PTR);
}

static void predictor_fails(const sam2_encoder *e, const char *path,
                            const sam2_predictor_options *o, sam2_status want,
                            const char *needle) {
    sam2_predictor *out = SENTINEL_PTR;
    TRY_IF("sam2_predictor_new", sam2_predictor_new(e, path, o, &out), want, needle,
           out == SENTINEL_PTR);
}

/* A model file with some bytes changed: its load may fail (SAM2_ERR_MODEL) or, when only
 * weights or names changed, succeed; either way nothing crashes, and a model that loads runs
 * (a decoder on `on`) or fails cleanly. Counted as handled when the status is one of those. */
static void corrupted_model_on(const char *path, int is_encoder, const sam2_embedding *on) {
    const char *E = is_encoder ? "sam2_encoder_new" : "sam2_predictor_new";
    sam2_status got;
    if (is_encoder) {
        sam2_encoder *e = NULL;
        got = sam2_encoder_new(path, NULL, &e);
        if (got == SAM2_OK) {
            sam2_embedding *out = NULL;
            sam2_status s = sam2_encode(e, image.data, image_len, image.width, image.height, 0,
                                        SAM2_PIXEL_RGB, &out);
            if (s != SAM2_OK && s != SAM2_ERR_ONNXRUNTIME) got = s;
            sam2_embedding_free(out);
            sam2_encoder_free(e);
        }
    } else {
        sam2_predictor *p = NULL;
        got = sam2_predictor_new(NULL, path, NULL, &p);
        if (got == SAM2_OK) {
            sam2_point pt = {10, 10, SAM2_POINT_POSITIVE};
            sam2_prompt prompt = test_points_prompt(&pt, 1);
            sam2_masks *m = NULL;
            sam2_status s = sam2_predict(p, on, &prompt, 1, NULL, &m);
            if (s != SAM2_OK && s != SAM2_ERR_ONNXRUNTIME && s != SAM2_ERR_MODEL_MISMATCH) got = s;
            sam2_masks_free(m);
            sam2_predictor_free(p);
        }
    }
    sweep_record(E, got == SAM2_ERR_MODEL ? SAM2_OK : got, SAM2_OK, NULL, 1, __FILE__, __LINE__,
                 "a corrupted model file (SAM2_OK or SAM2_ERR_MODEL)");
}

static void corrupted_model(const char *path, int is_encoder) {
    corrupted_model_on(path, is_encoder, embedding);
}

static void model_files(void) {
    char path[TEST_PATH_MAX];
    /* Paths. */
    encoder_fails("", NULL, SAM2_ERR_MODEL, "cannot be read");
    encoder_fails("/nonexistent/encoder.onnx", NULL, SAM2_ERR_MODEL, "/nonexistent/encoder.onnx");
    encoder_fails(dir, NULL, SAM2_ERR_IO, dir);
    encoder_fails("\xff\xfe.onnx", NULL, SAM2_ERR_INVALID_ARGUMENT, "model_path");
    predictor_fails(NULL, "/nonexistent/decoder.onnx", NULL, SAM2_ERR_MODEL, "/nonexistent");
    predictor_fails(NULL, dir, NULL, SAM2_ERR_IO, dir);
    predictor_fails(NULL, "\xff.onnx", NULL, SAM2_ERR_INVALID_ARGUMENT, "decoder_path");

    /* Not ONNX at all; ONNX that is not the SAM2 part expected (the message lists the names
     * each contract expects); an encoder paired with a decoder of another export. */
    test_data_path(path, "shapes.ppm");
    encoder_fails(path, NULL, SAM2_ERR_MODEL, "not a readable ONNX model");
    predictor_fails(NULL, path, NULL, SAM2_ERR_MODEL, "not a readable ONNX model");
    encoder_fails(dec_path, NULL, SAM2_ERR_MODEL, "high_res_feats_0");
    predictor_fails(NULL, enc_path, NULL, SAM2_ERR_MODEL, "point_coords");
    sam2_encoder *encoder_c = test_open_encoder("tiny_c");
    predictor_fails(encoder, test_model_path(path, "tiny_c_decoder.onnx"), NULL,
                    SAM2_ERR_MODEL_MISMATCH, "image_features_0");
    predictor_fails(encoder_c, dec_path, NULL, SAM2_ERR_MODEL_MISMATCH, "high_res_feats_0");
    sam2_encoder_free(encoder_c);

    /* Truncated and corrupted copies of both models. */
    const char *sources[2] = {enc_path, dec_path};
    for (int m = 0; m < 2; m++) {
        size_t len = 0;
        uint8_t *bytes = test_read_file(sources[m], &len);
        CHECK(len > 0);
        char bad[TEST_PATH_MAX];
        scratch(bad, m == 0 ? "bad_encoder.onnx" : "bad_decoder.onnx");
        const size_t cuts[] = {0, 1, 16, 200, len / 3, len / 2, len - 100, len - 1};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            write_file(bad, bytes, cuts[i]);
            if (m == 0) {
                encoder_fails(bad, NULL, SAM2_ERR_MODEL, bad);
            } else {
                predictor_fails(NULL, bad, NULL, SAM2_ERR_MODEL, bad);
            }
        }
        /* Bytes overwritten at deterministic pseudo-random places (fewer under valgrind,
         * where every model that still loads takes seconds). */
        int trials = test_under_valgrind() ? 4 : 40;
        uint32_t seed = 12345u + (uint32_t)m;
        for (int t = 0; t < trials; t++) {
            uint8_t *copy = malloc(len);
            CHECK(copy != NULL);
            memcpy(copy, bytes, len);
            int changes = 1 + t % 8;
            for (int c = 0; c < changes; c++) {
                seed = seed * 1664525u + 1013904223u;
                /* Mostly the structure (the first and last few KB), sometimes anywhere. */
                size_t at = (t % 4 == 3) ? seed % len
                            : (seed & 1) ? (seed >> 1) % (len < 4096 ? len : 4096)
                                         : len - 1 - (seed >> 1) % (len < 4096 ? len : 4096);
                seed = seed * 1664525u + 1013904223u;
                copy[at] = (uint8_t)(seed >> 24);
            }
            write_file(bad, copy, len);
            free(copy);
            corrupted_model(bad, m == 0);
        }
        free(bytes);
        unlink(bad);
    }
}

/* ---- Hostile copies of the real SAM2.1 tiny exports ($SAM2_REAL_HOSTILE) ----
 *
 * The files of tests/it/hostile_models.rs, through the C ABI: tools/models/hostile_models.py writes
 * them once (tools/setup/setup-real.sh, into $SAM2_REAL_HOSTILE) and lists them in cases.tsv with
 * what each must give: SAM2_ERR_MODEL naming the file, or, for a flipped bit, that or a model that
 * loads and runs. Every decoder case runs here, and the encoder's truncations; the encoder's other
 * copies (each a 109 MB load that may then encode) are the Rust test's alone. The external-data
 * locations are those of this system (cases.tsv's platform column). */

/* A hostile decoder: only SAM2_ERR_MODEL naming the file is right. Should it load (the bug this
 * case once found), it runs on `on`, as a host would. */
static void hostile_decoder(const char *path, const sam2_embedding *on) {
    sam2_predictor *p = SENTINEL_PTR;
    sam2_status got = sam2_predictor_new(NULL, path, NULL, &p);
    if (got == SAM2_OK) {
        sam2_point pt = {10, 10, SAM2_POINT_POSITIVE};
        sam2_prompt prompt = test_points_prompt(&pt, 1);
        sam2_masks *m = NULL;
        sam2_predict(p, on, &prompt, 1, NULL, &m);
        sam2_masks_free(m);
        sam2_predictor_free(p);
        p = SENTINEL_PTR;
    }
    sweep_record("sam2_predictor_new", got, SAM2_ERR_MODEL, path, p == SENTINEL_PTR, __FILE__,
                 __LINE__, "a hostile real decoder");
}

/* A copy of $SAM2_REAL_HOSTILE (NULL without it); the program stops at once without it (but
 * under valgrind, which skips the real models). A copy, since the runtime checks set and unset
 * variables before the real models are read: on Windows `_putenv_s` rebuilds the C library's
 * environment, and the string an earlier `getenv` returned may be gone (under Wine the path once
 * came back without its first 8 characters). */
static const char *real_hostile_dir(void) {
    const char *hostile = getenv("SAM2_REAL_HOSTILE");
    if (!test_under_valgrind() && (hostile == NULL || hostile[0] == '\0')) {
        fprintf(stderr, "SAM2_REAL_HOSTILE is not set: run `. tools/setup/setup-real.sh` (the README's "
                        "test command does) before configuring the C tests\n");
        exit(1);
    }
    if (hostile == NULL) {
        return NULL;
    }
    char *copy = strdup(hostile);
    CHECK(copy != NULL);
    return copy;
}

static void real_models(const char *hostile) {
    if (test_under_valgrind()) {
        printf("test_bad_input: hostile real models skipped (under valgrind a real model's load "
               "takes minutes)\n");
        return;
    }
    char list[TEST_PATH_MAX], path[TEST_PATH_MAX], line[8192];
    CHECK(snprintf(list, sizeof list, "%s/cases.tsv", hostile) < (int)sizeof list);
    FILE *f = fopen(list, "r");
    if (f == NULL) {
        fprintf(stderr, "%s cannot be read: run `. tools/setup/setup-real.sh`, which writes it\n", list);
        exit(1);
    }
    CHECK(fgets(line, sizeof line, f) != NULL);
    line[strcspn(line, "\r\n")] = '\0';
    CHECK(strcmp(line, "group\trole\tfamily\texpect\tplatform\tfile\tcase") == 0);
#ifdef _WIN32
    const char *other_system = "posix";
#else
    const char *other_system = "windows";
#endif
    sam2_encoder *encoder_c = test_open_encoder("tiny_c");
    sam2_embedding *embedding_c = test_encode(encoder_c, &image); /* ONNX Runtime's family */
    int loaded = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        /* group, role, family, expect, platform, file, case */
        char *col[7];
        int n = 0;
        for (char *p = line; n < 7 && p != NULL; n++) {
            col[n] = p;
            p = strchr(p, '\t');
            if (p != NULL) *p++ = '\0';
        }
        CHECK(n == 7);
        int is_encoder = strcmp(col[1], "encoder") == 0;
        /* The control that must load is the Rust test's (it watches what the load opens). */
        if (strcmp(col[4], other_system) == 0 || strcmp(col[3], "loads") == 0 ||
            (is_encoder && strcmp(col[0], "truncated") != 0))
            continue;
        CHECK(snprintf(path, sizeof path, "%s/%s", hostile, col[5]) < (int)sizeof path);
        /* A decoder runs on an embedding of a generated model of its family's layout. */
        const sam2_embedding *on = strcmp(col[2], "onnxruntime") == 0 ? embedding_c : embedding;
        if (strcmp(col[3], "model_error_or_runs") == 0) {
            corrupted_model_on(path, is_encoder, on);
        } else {
            CHECK(strcmp(col[3], "model_error") == 0);
            if (is_encoder) {
                encoder_fails(path, NULL, SAM2_ERR_MODEL, path);
            } else {
                hostile_decoder(path, on);
            }
        }
        loaded++;
    }
    fclose(f);
    CHECK(loaded > 0);
    printf("test_bad_input: %d hostile real-model files from %s\n", loaded, hostile);
    sam2_embedding_free(embedding_c);
    sam2_encoder_free(encoder_c);
}

/* ---- Options structs of sam2_encoder_new / sam2_predictor_new ---- */

static void options(void) {
    sam2_encoder_options eo;
#define ENC_BAD(field, value, needle)                                                          \
    do {                                                                                     \
        CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));                                 \
        eo.field = value;                                                                    \
        encoder_fails(enc_path, &eo, SAM2_ERR_INVALID_ARGUMENT, needle);                     \
    } while (0)
    ENC_BAD(struct_size, 0, "struct_size");
    ENC_BAD(struct_size, 8, "struct_size");
    ENC_BAD(struct_size, 20, "struct_size");
    ENC_BAD(struct_size, (uint32_t)sizeof eo + 8, "struct_size");
    ENC_BAD(struct_size, 0xFFFFFFFFu, "struct_size");
    ENC_BAD(output_target, SAM2_OUTPUT_HOST + 1, "output_target");
    ENC_BAD(output_target, 0xFFFFFFFFu, "output_target");
    ENC_BAD(intra_threads, 1025, "intra_threads");
    ENC_BAD(intra_threads, 0xFFFFFFFFu, "intra_threads");
    ENC_BAD(on_device_mismatch, SAM2_ON_MISMATCH_FAIL + 1, "on_device_mismatch");
    ENC_BAD(weight_sharing, SAM2_WEIGHTS_COPY + 1, "weight_sharing");
    ENC_BAD(graph_optimization, SAM2_OPTIMIZATION_ALL + 1, "graph_optimization");
    ENC_BAD(graph_optimization, 0xFFFFFFFFu, "graph_optimization");
    ENC_BAD(disabled_rewrites, SAM2_REWRITE_ALL + 1, "disabled_rewrites");
    ENC_BAD(disabled_rewrites, UINT64_MAX, "disabled_rewrites");
    CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));
    sam2_provider many[17];
    for (int i = 0; i < 17; i++) many[i] = (sam2_provider){SAM2_PROVIDER_CPU, 0, 0, 0};
    eo.providers = many;
    eo.provider_count = 17;
    encoder_fails(enc_path, &eo, SAM2_ERR_INVALID_ARGUMENT, "provider_count");
    eo.provider_count = SIZE_MAX;
    encoder_fails(enc_path, &eo, SAM2_ERR_INVALID_ARGUMENT, "provider_count");
    struct { uint32_t provider; int32_t device; uint32_t arena; const char *needle; } reqs[] = {
        {SAM2_PROVIDER_WEBGPU + 1, 0, 0, "provider"},
        {0xFFFFFFFFu, 0, 0, "provider"},
        {SAM2_PROVIDER_CUDA, -1, 0, "device_id"},
        {SAM2_PROVIDER_CUDA, INT32_MIN, 0, "device_id"},
        {SAM2_PROVIDER_CUDA, 0, SAM2_ARENA_SAME_AS_REQUESTED + 1, "arena_extend_strategy"},
    };
    sam2_predictor_options po;
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        sam2_provider p = {reqs[i].provider, reqs[i].device, 0, reqs[i].arena};
        CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));
        eo.providers = &p;
        eo.provider_count = 1;
        encoder_fails(enc_path, &eo, SAM2_ERR_INVALID_ARGUMENT, reqs[i].needle);
        CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
        po.providers = &p;
        po.provider_count = 1;
        predictor_fails(NULL, dec_path, &po, SAM2_ERR_INVALID_ARGUMENT, reqs[i].needle);
    }

#define PRED_BAD(field, value, needle)                                                         \
    do {                                                                                     \
        CHECK_OK(sam2_predictor_options_init(&po, sizeof po));                               \
        po.field = value;                                                                    \
        predictor_fails(NULL, dec_path, &po, SAM2_ERR_INVALID_ARGUMENT, needle);             \
    } while (0)
    PRED_BAD(struct_size, 0, "struct_size");
    PRED_BAD(struct_size, 12, "struct_size");
    PRED_BAD(struct_size, (uint32_t)sizeof po + 8, "struct_size");
    PRED_BAD(struct_size, 0xFFFFFFFFu, "struct_size");
    PRED_BAD(intra_threads, 1025, "intra_threads");
    PRED_BAD(pool_size, 65, "pool_size");
    PRED_BAD(pool_size, 0xFFFFFFFFu, "pool_size");
    PRED_BAD(allow_embedding_copy, 2, "allow_embedding_copy");
    PRED_BAD(on_device_mismatch, 2, "on_device_mismatch");
    PRED_BAD(weight_sharing, 2, "weight_sharing");
    PRED_BAD(graph_optimization, 3, "graph_optimization");
    PRED_BAD(disabled_rewrites, (uint64_t)1 << 40, "disabled_rewrites");
    PRED_BAD(encoder_fingerprint, "", "encoder_fingerprint");
    PRED_BAD(encoder_fingerprint, "not a fingerprint", "encoder_fingerprint");
    PRED_BAD(encoder_fingerprint, "sam2fp1-0123456789abcdeg", "encoder_fingerprint");
    PRED_BAD(encoder_fingerprint, "sam2fp1-0123456789abcdef0", "encoder_fingerprint");
    PRED_BAD(encoder_fingerprint, "\xff\xfe", "encoder_fingerprint");
    CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
    po.encoder_fingerprint = "sam2fp1-0123456789abcdef"; /* well-formed, not `encoder`'s */
    predictor_fails(encoder, dec_path, &po, SAM2_ERR_INVALID_ARGUMENT, "contradicts");

    /* The encoder argument of sam2_predictor_new. */
    FOR_BAD(ENCODER, b) predictor_fails(b.ptr, dec_path, NULL, b.want, "`encoder`");
}

/* ---- sam2_encode ---- */

static void encode_fails(const void *e, const uint8_t *px, size_t len, uint32_t w, uint32_t h,
                         size_t stride, uint32_t format, sam2_status want, const char *needle) {
    sam2_embedding *out = SENTINEL_PTR;
    TRY_IF("sam2_encode", sam2_encode(e, px, len, w, h, stride, format, &out), want, needle,
           out == SENTINEL_PTR);
}

static void encode(void) {
    const uint8_t *px = image.data;
    uint32_t w = image.width, h = image.height;
    size_t len = image_len, row = (size_t)w * 3;
    FOR_BAD(ENCODER, b) encode_fails(b.ptr, px, len, w, h, 0, SAM2_PIXEL_RGB, b.want, "`encoder`");
    /* Sizes. */
    encode_fails(encoder, px, 0, w, h, 0, SAM2_PIXEL_RGB, SAM2_ERR_INVALID_ARGUMENT, "pixels");
    encode_fails(encoder, px, len - 1, w, h, 0, SAM2_PIXEL_RGB, SAM2_ERR_INVALID_ARGUMENT, "pixels");
    encode_fails(encoder, px, len, 0, h, 0, SAM2_PIXEL_RGB, SAM2_ERR_INVALID_ARGUMENT, "width");
    encode_fails(encoder, px, len, w, 0, 0, SAM2_PIXEL_RGB, SAM2_ERR_INVALID_ARGUMENT, "height");
    encode_fails(encoder, px, len, 65537, h, 0, SAM2_PIXEL_RGB, SAM2_ERR_INVALID_ARGUMENT, "width");
    encode_fails(encoder, px, len, w, 0xFFFFFFFFu, 0, SAM2_PIXEL_RGB, SAM2_ERR_INVALID_ARGUMENT,
                 "height");
    encode_fails(encoder, px, len, 0xFFFFFFFFu, 0xFFFFFFFFu, 0, SAM2_PIXEL_RGBA,
                 SAM2_ERR_INVALID_ARGUMENT, "width");
    /* width × height × 4 does not overflow 64 bits but is far beyond the buffer. */
    encode_fails(encoder, px, len, 65536, 65536, 0, SAM2_PIXEL_RGBA, SAM2_ERR_INVALID_ARGUMENT,
                 "pixels");
    /* Strides: smaller than a row, and large enough that stride × (height − 1) overflows. */
    encode_fails(encoder, px, len, w, h, 1, SAM2_PIXEL_RGB, SAM2_ERR_INVALID_ARGUMENT, "stride");
    encode_fails(encoder, px, len, w, h, row - 1, SAM2_PIXEL_RGB, SAM2_ERR_INVALID_ARGUMENT,
                 "stride");
    encode_fails(encoder, px, len, w, h, row + 1, SAM2_PIXEL_RGB, SAM2_ERR_INVALID_ARGUMENT,
                 "pixels");
    const size_t huge[] = {SIZE_MAX, SIZE_MAX / 2 + 1, SIZE_MAX / 3 + 1, SIZE_MAX / (h - 1) + 1,
                           (size_t)1 << 62};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        /* "stride" when the product overflows, "pixels" when it fits but exceeds the buffer. */
        encode_fails(encoder, px, len, w, h, huge[i], SAM2_PIXEL_RGB, SAM2_ERR_INVALID_ARGUMENT,
                     "`stride`|`pixels`");
    }
    /* A 1×1 image with any stride needs only one row. */
    uint8_t one[4] = {1, 2, 3, 4};
    sam2_embedding *ok = NULL;
    CHECK_OK(sam2_encode(encoder, one, 3, 1, 1, SIZE_MAX, SAM2_PIXEL_RGB, &ok));
    sam2_embedding_free(ok);
    /* Formats. */
    const uint32_t formats[] = {SAM2_PIXEL_GRAY + 1, 0x80000000u, 0xFFFFFFFFu};
    for (size_t i = 0; i < 3; i++) {
        encode_fails(encoder, px, len, w, h, 0, formats[i], SAM2_ERR_INVALID_ARGUMENT,
                     "pixel_format");
    }
    /* An RGB buffer declared as RGBA is 4/3 too short. */
    encode_fails(encoder, px, len, w, h, 0, SAM2_PIXEL_RGBA, SAM2_ERR_INVALID_ARGUMENT, "pixels");
}

/* ---- Encoder, predictor and embedding queries ---- */

static void queries(void) {
    char buf[128];
    uint32_t provider = 777, w = 777, h = 777;
    int32_t device = 777, fell_back = 777;
    size_t needed = 999;
    const char *E;
#define UNTOUCHED_DEVICE (provider == 777 && device == 777 && fell_back == 777)

    E = "sam2_encoder_device";
    FOR_BAD(ENCODER, b) TRY_IF(E, sam2_encoder_device(b.ptr, &provider, &device, &fell_back),
                               b.want, "`encoder`", UNTOUCHED_DEVICE);
    E = "sam2_predictor_device";
    FOR_BAD(PREDICTOR, b) TRY_IF(E, sam2_predictor_device(b.ptr, &provider, &device, &fell_back),
                                 b.want, "`predictor`", UNTOUCHED_DEVICE);

    /* (buf, len, needed) strings: bad handles leave `needed` alone; a short buffer reports the
     * size needed without writing the buffer. */
#define STRING_QUERY(entry, fn, kind, arg)                                                     \
    do {                                                                                     \
        FOR_BAD(kind, b) {                                                                   \
            needed = 999;                                                                    \
            TRY_IF(entry, fn(b.ptr, buf, sizeof buf, &needed), b.want, "`" arg "`",          \
                   needed == 999);                                                           \
        }                                                                                    \
        memset(buf, 'Z', sizeof buf);                                                        \
        TRY_IF(entry, fn(live(kind), buf, 1, &needed), SAM2_ERR_BUFFER_TOO_SMALL, NULL,      \
               buf[0] == 'Z' && needed > 1);                                                 \
        TRY_IF(entry, fn(live(kind), buf, 0, NULL), SAM2_ERR_BUFFER_TOO_SMALL, NULL,         \
               buf[0] == 'Z');                                                               \
    } while (0)
    STRING_QUERY("sam2_encoder_fingerprint", sam2_encoder_fingerprint, ENCODER, "encoder");
    STRING_QUERY("sam2_encoder_providers", sam2_encoder_providers, ENCODER, "encoder");
    STRING_QUERY("sam2_predictor_providers", sam2_predictor_providers, PREDICTOR, "predictor");
    STRING_QUERY("sam2_embedding_fingerprint", sam2_embedding_fingerprint, EMBEDDING,
                 "embedding");

    E = "sam2_embedding_device_id";
    FOR_BAD(EMBEDDING, b) TRY_IF(E, sam2_embedding_device_id(b.ptr, &device), b.want,
                                 "`embedding`", device == 777);
    E = "sam2_embedding_image_size";
    FOR_BAD(EMBEDDING, b) TRY_IF(E, sam2_embedding_image_size(b.ptr, &w, &h), b.want,
                                 "`embedding`", w == 777 && h == 777);
    /* Functions without a status: documented 0 / NULL; the reason is the last error. */
    FOR_BAD(EMBEDDING, b) {
        TRY_VALUE("sam2_embedding_is_serializable", sam2_embedding_is_serializable(b.ptr) == 0,
                  "`embedding`");
        TRY_VALUE("sam2_embedding_allocator_name", sam2_embedding_allocator_name(b.ptr) == NULL,
                  "`embedding`");
    }
}

/* ---- Embedding files, host copies, simulated devices ---- */

static void load_fails(const char *path, const void *p, uint32_t placement, sam2_status want,
                       const char *needle) {
    sam2_embedding *out = SENTINEL_PTR;
    TRY_IF("sam2_embedding_load", sam2_embedding_load(path, p, placement, &out), want, needle,
           out == SENTINEL_PTR);
}

static void files(void) {
    const char *E = "sam2_embedding_save";
    char path[TEST_PATH_MAX], bad[TEST_PATH_MAX], sub[TEST_PATH_MAX];
    scratch(path, "e.sam2");
    FOR_BAD(EMBEDDING, b) TRY_IF(E, sam2_embedding_save(b.ptr, path), b.want, "`embedding`",
                                 !exists(path));
    TRY(E, sam2_embedding_save(embedding, ""), SAM2_ERR_INVALID_ARGUMENT, "path");
    TRY(E, sam2_embedding_save(embedding, "\xff\xfe.sam2"), SAM2_ERR_INVALID_ARGUMENT, "path");
    /* Paths the OS refuses: a missing directory, a directory, through a file, a file system
     * that takes no new files (not writable, even by root). None may leave a file behind. */
    scratch(sub, "missing/e.sam2");
    TRY_IF(E, sam2_embedding_save(embedding, sub), SAM2_ERR_IO, sub, !exists(sub));
    TRY(E, sam2_embedding_save(embedding, dir), SAM2_ERR_IO, dir);
    scratch(bad, "a_file");
    write_file(bad, "x", 1);
    scratch(sub, "a_file/e.sam2");
    TRY(E, sam2_embedding_save(embedding, sub), SAM2_ERR_IO, sub);
#ifdef _WIN32
    TEST_SKIP("test_bad_input", "a save into a file system that takes no new files",
              "Windows has no file system that refuses every writer, as /proc does");
    TEST_SKIP("test_bad_input", "a save into a directory without write permission",
              "Windows' permissions are ACLs, which Wine does not enforce");
#else
    TRY_IF(E, sam2_embedding_save(embedding, "/proc/sam2_not_writable.sam2"), SAM2_ERR_IO,
           "/proc/sam2_not_writable.sam2", !exists("/proc/sam2_not_writable.sam2"));
    /* A directory with no write permission (as root the OS allows it: then it is saved). */
    scratch(sub, "readonly");
    CHECK(mkdir(sub, 0500) == 0);
    char ro_file[TEST_PATH_MAX + 16];
    snprintf(ro_file, sizeof ro_file, "%s/e.sam2", sub);
    if (geteuid() != 0) {
        TRY_IF(E, sam2_embedding_save(embedding, ro_file), SAM2_ERR_IO, ro_file, !exists(ro_file));
    } else {
        TEST_SKIP("test_bad_input", "a save into a directory without write permission",
                  "running as root, whom the OS lets write there");
    }
    unlink(ro_file);
    rmdir(sub);
#endif
    /* A device embedding: refused before anything is written. */
    sam2_embedding *device = NULL;
    CHECK_OK(sam2_test_embedding_simulate_device(embedding, "Cuda", 0, &device));
    TRY_IF(E, sam2_embedding_save(device, path), SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE, "Cuda",
           !exists(path));

    E = "sam2_embedding_load";
    CHECK_OK(sam2_embedding_save(embedding, path));
    load_fails("", NULL, SAM2_PLACE_HOST, SAM2_ERR_INVALID_ARGUMENT, "path");
    load_fails("\xff.sam2", NULL, SAM2_PLACE_HOST, SAM2_ERR_INVALID_ARGUMENT, "path");
    load_fails("/nonexistent/e.sam2", NULL, SAM2_PLACE_HOST, SAM2_ERR_IO, "/nonexistent/e.sam2");
    load_fails(dir, NULL, SAM2_PLACE_HOST, SAM2_ERR_IO, dir);
    /* Other files that are not regular: refused at once (reading a FIFO used to block until a
     * writer came). */
#ifdef _WIN32
    /* A named pipe with no writer, as an embedding file and as a model: told by its name and
     * never opened (opening one connects to it, which its server sees; Linux only stats a FIFO).
     * Then the NUL device, whose metadata Windows refuses: the message is the OS's reason, and
     * names the path. */
    char pipe[TEST_PATH_MAX];
    CHECK(snprintf(pipe, sizeof pipe, "\\\\.\\pipe\\sam2_bad_input_%lu",
                   (unsigned long)GetCurrentProcessId()) < (int)sizeof pipe);
    HANDLE server = CreateNamedPipeA(pipe, PIPE_ACCESS_INBOUND, PIPE_TYPE_BYTE | PIPE_NOWAIT, 1,
                                     4096, 4096, 0, NULL);
    CHECK(server != INVALID_HANDLE_VALUE);
    load_fails(pipe, NULL, SAM2_PLACE_HOST, SAM2_ERR_IO, "named pipe");
    encoder_fails(pipe, NULL, SAM2_ERR_MODEL, "named pipe");
    CHECK(!ConnectNamedPipe(server, NULL) && GetLastError() == ERROR_PIPE_LISTENING);
    CHECK(CloseHandle(server));
    load_fails("NUL", NULL, SAM2_PLACE_HOST, SAM2_ERR_IO, "NUL");
#else
    char fifo[TEST_PATH_MAX];
    scratch(fifo, "pipe.sam2");
    CHECK(mkfifo(fifo, 0600) == 0);
    load_fails(fifo, NULL, SAM2_PLACE_HOST, SAM2_ERR_IO, "FIFO");
    CHECK(unlink(fifo) == 0);
    load_fails("/dev/null", NULL, SAM2_PLACE_HOST, SAM2_ERR_IO, "character device");
#endif
    const uint32_t places[] = {SAM2_PLACE_DEVICE + 1, 0xFFFFFFFFu};
    for (size_t i = 0; i < 2; i++) {
        load_fails(path, predictor, places[i], SAM2_ERR_INVALID_ARGUMENT, "placement");
    }
    load_fails(path, NULL, SAM2_PLACE_DEVICE, SAM2_ERR_INVALID_ARGUMENT, "placement");
    FOR_BAD(PREDICTOR, b) load_fails(path, b.ptr, SAM2_PLACE_HOST, b.want, "`predictor`");
    /* Files that are not (whole, intact) embedding files. */
    size_t len = 0;
    uint8_t *bytes = test_read_file(path, &len);
    CHECK(len > 0);
    scratch(bad, "bad.sam2");
    const size_t cuts[] = {0, 7, 8, 9, 64, 300, len / 2, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_file(bad, bytes, cuts[i]);
        load_fails(bad, NULL, SAM2_PLACE_HOST, SAM2_ERR_EMBEDDING_FORMAT, bad);
    }
    const size_t flips[] = {0, 7, 20, 100, 400, len / 2, len - 1};
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        bytes[flips[i]] ^= 0x20;
        write_file(bad, bytes, len);
        bytes[flips[i]] ^= 0x20;
        load_fails(bad, NULL, SAM2_PLACE_HOST, SAM2_ERR_EMBEDDING_FORMAT, bad);
    }
    free(bytes);
    test_model_path(sub, "tiny_a_decoder.onnx");
    load_fails(sub, NULL, SAM2_PLACE_HOST, SAM2_ERR_EMBEDDING_FORMAT, sub);
    /* Made by another encoder than the predictor's. */
    sam2_encoder *encoder_b = test_open_encoder("tiny_b");
    sam2_predictor *predictor_b = test_open_predictor(encoder_b, "tiny_b");
    load_fails(path, predictor_b, SAM2_PLACE_HOST, SAM2_ERR_MODEL_MISMATCH, path);
    sam2_predictor_free(predictor_b);
    sam2_encoder_free(encoder_b);
    unlink(bad);
    unlink(path);
    scratch(bad, "a_file");
    unlink(bad);

    E = "sam2_embedding_to_host";
    sam2_embedding *out = SENTINEL_PTR;
    FOR_BAD(EMBEDDING, b) TRY_IF(E, sam2_embedding_to_host(b.ptr, &out), b.want, "`embedding`",
                                 out == SENTINEL_PTR);
    TRY_IF(E, sam2_embedding_to_host(device, &out), SAM2_ERR_ENVIRONMENT_CONFIGURATION, "Cuda",
           out == SENTINEL_PTR);

    E = "sam2_test_embedding_simulate_device";
    FOR_BAD(EMBEDDING, b) TRY_IF(E, sam2_test_embedding_simulate_device(b.ptr, "Cuda", 0, &out),
                                 b.want, "embedding", out == SENTINEL_PTR);
    const char *names[] = {"", "Cu da", "\xff", "a_name_longer_than_sixty_four_bytes_is_not_"
                                                "an_allocator_name_at_all"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        TRY_IF(E, sam2_test_embedding_simulate_device(embedding, names[i], 0, &out),
               SAM2_ERR_INVALID_ARGUMENT, "allocator", out == SENTINEL_PTR);
    }
    TRY_IF(E, sam2_test_embedding_simulate_device(device, "DML", 0, &out),
           SAM2_ERR_INVALID_ARGUMENT, "host embedding", out == SENTINEL_PTR);
    sam2_embedding_free(device);
}

/* ---- sam2_predict ---- */

static void predict_fails(const void *p, const void *e, const sam2_prompt *prompts, size_t count,
                          const sam2_predict_options *o, sam2_status want, const char *needle) {
    sam2_masks *out = SENTINEL_PTR;
    TRY_IF("sam2_predict", sam2_predict(p, e, prompts, count, o, &out), want, needle,
           out == SENTINEL_PTR);
}

static void point_fails(float x, float y, int32_t label, const char *needle) {
    sam2_point pt = {x, y, label};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    predict_fails(predictor, embedding, &prompt, 1, NULL, SAM2_ERR_INVALID_ARGUMENT, needle);
}

static void predict(void) {
    float w = (float)image.width, h = (float)image.height;
    sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
    sam2_prompt good = test_points_prompt(&pt, 1);

    FOR_BAD(PREDICTOR, b) predict_fails(b.ptr, embedding, &good, 1, NULL, b.want, "`predictor`");
    FOR_BAD(EMBEDDING, b) predict_fails(predictor, b.ptr, &good, 1, NULL, b.want, "`embedding`");
    /* Counts: checked before the prompts array is read (it holds one prompt here). */
    const size_t counts[] = {0, 257, 100000, SIZE_MAX / sizeof(sam2_prompt) + 1, SIZE_MAX};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        predict_fails(predictor, embedding, &good, counts[i], NULL, SAM2_ERR_INVALID_ARGUMENT,
                      "prompt_count");
    }
    /* Options. */
    sam2_predict_options o;
    const uint32_t struct_sizes[] = {0, 4, (uint32_t)sizeof o + 4, 0xFFFFFFFFu};
    for (size_t i = 0; i < 4; i++) {
        CHECK_OK(sam2_predict_options_init(&o, sizeof o));
        o.struct_size = struct_sizes[i];
        predict_fails(predictor, embedding, &good, 1, &o, SAM2_ERR_INVALID_ARGUMENT,
                      "struct_size");
    }
    CHECK_OK(sam2_predict_options_init(&o, sizeof o));
    o.multimask = 2;
    predict_fails(predictor, embedding, &good, 1, &o, SAM2_ERR_INVALID_ARGUMENT, "multimask");
    o.multimask = 0xFFFFFFFFu;
    predict_fails(predictor, embedding, &good, 1, &o, SAM2_ERR_INVALID_ARGUMENT, "multimask");

    /* Points: every bad value in each coordinate; labels. */
    const float bad_values[] = {NAN, INFINITY, -INFINITY, -1.0f, -1e-3f, 1e30f, -1e30f};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        point_fails(bad_values[i], 10, SAM2_POINT_POSITIVE, "points");
        point_fails(10, bad_values[i], SAM2_POINT_NEGATIVE, "points");
    }
    point_fails(w + 0.5f, 10, SAM2_POINT_POSITIVE, "outside");
    point_fails(10, h + 0.5f, SAM2_POINT_POSITIVE, "outside");
    const int32_t labels[] = {2, 3, -1, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++) {
        point_fails(10, 10, labels[i], "label");
    }
    /* Point arrays: a count past the limit (checked before reading). */
    sam2_prompt p = good;
    const size_t point_counts[] = {1025, SIZE_MAX};
    for (size_t i = 0; i < 2; i++) {
        p.point_count = point_counts[i];
        predict_fails(predictor, embedding, &p, 1, NULL, SAM2_ERR_INVALID_ARGUMENT, "`points`");
    }
    /* Boxes: each coordinate bad in turn, reversed, outside. */
    for (int c = 0; c < 4; c++) {
        for (size_t i = 0; i < 4; i++) {
            sam2_prompt bx = test_box_prompt(10, 10, 100, 100);
            bx.box[c] = bad_values[i];
            predict_fails(predictor, embedding, &bx, 1, NULL, SAM2_ERR_INVALID_ARGUMENT, "box");
        }
    }
    sam2_prompt bx = test_box_prompt(100, 10, 50, 100);
    predict_fails(predictor, embedding, &bx, 1, NULL, SAM2_ERR_INVALID_ARGUMENT, "box");
    bx = test_box_prompt(10, 100, 50, 10);
    predict_fails(predictor, embedding, &bx, 1, NULL, SAM2_ERR_INVALID_ARGUMENT, "box");
    bx = test_box_prompt(10, 10, w + 1, 50);
    predict_fails(predictor, embedding, &bx, 1, NULL, SAM2_ERR_INVALID_ARGUMENT, "box");
    /* Empty prompts, alone and inside a batch. */
    sam2_prompt empty;
    memset(&empty, 0, sizeof empty);
    predict_fails(predictor, embedding, &empty, 1, NULL, SAM2_ERR_INVALID_ARGUMENT, "empty");
    sam2_prompt batch[3] = {good, good, empty};
    predict_fails(predictor, embedding, batch, 3, NULL, SAM2_ERR_INVALID_ARGUMENT, "prompt 2");
    empty.point_count = 0;
    empty.has_box = 0;
    empty.points = &pt; /* points given, count 0: still empty */
    predict_fails(predictor, embedding, &empty, 1, NULL, SAM2_ERR_INVALID_ARGUMENT, "empty");
    /* Mask input: lengths other than 256², non-finite values. */
    static float logits[65536 + 1];
    p = good;
    p.mask_input = logits;
    const size_t mask_lens[] = {0, 1, 65535, 65537, SIZE_MAX};
    for (size_t i = 0; i < sizeof mask_lens / sizeof mask_lens[0]; i++) {
        p.mask_input_len = mask_lens[i];
        predict_fails(predictor, embedding, &p, 1, NULL, SAM2_ERR_INVALID_ARGUMENT, "mask_input");
    }
    p.mask_input_len = 65536;
    for (size_t i = 0; i < 3; i++) {
        logits[777] = bad_values[i];
        predict_fails(predictor, embedding, &p, 1, NULL, SAM2_ERR_INVALID_ARGUMENT, "mask_input");
    }
    logits[777] = 0;
    /* Embeddings this predictor must not run: another model's, a (simulated) device one. */
    sam2_encoder *encoder_c = test_open_encoder("tiny_c");
    sam2_embedding *embedding_c = test_encode(encoder_c, &image);
    predict_fails(predictor, embedding_c, &good, 1, NULL, SAM2_ERR_MODEL_MISMATCH, "made by encoder");
    sam2_embedding *device = NULL;
    CHECK_OK(sam2_test_embedding_simulate_device(embedding, "Cuda", 0, &device));
    predict_fails(predictor, device, &good, 1, NULL, SAM2_ERR_INVALID_ARGUMENT, "`embedding`");
    sam2_embedding_free(device);
    sam2_embedding_free(embedding_c);
    sam2_encoder_free(encoder_c);
}

/* ---- Results ---- */

static void results(void) {
    const uint8_t *data = SENTINEL_PTR;
    const float *logits = SENTINEL_PTR;
    size_t len = 777, objects = 777, candidates = 777;
    uint32_t w = 777, h = 777, side = 777, box[4] = {7, 7, 7, 7};
    uint64_t area = 777;
    float score = 7.0f;
    const char *E = "sam2_masks_count";
    FOR_BAD(MASKS, b) TRY_IF(E, sam2_masks_count(b.ptr, &objects, &candidates), b.want, "`masks`",
                             objects == 777 && candidates == 777);
    E = "sam2_masks_size";
    FOR_BAD(MASKS, b) TRY_IF(E, sam2_masks_size(b.ptr, &w, &h), b.want, "`masks`",
                             w == 777 && h == 777);

    const size_t indices[] = {1, 2, 1000, SIZE_MAX};
    E = "sam2_masks_mask";
    FOR_BAD(MASKS, b) TRY_IF(E, sam2_masks_mask(b.ptr, 0, &data, &len), b.want, "`masks`",
                             data == SENTINEL_PTR && len == 777);
    for (size_t i = 0; i < 4; i++) {
        TRY_IF(E, sam2_masks_mask(masks, indices[i], &data, &len), SAM2_ERR_INVALID_ARGUMENT,
               "`index`", data == SENTINEL_PTR && len == 777);
    }
    E = "sam2_masks_score";
    FOR_BAD(MASKS, b) TRY_IF(E, sam2_masks_score(b.ptr, 0, &score), b.want, "`masks`",
                             score == 7.0f);
    for (size_t i = 0; i < 4; i++) {
        TRY_IF(E, sam2_masks_score(masks, indices[i], &score), SAM2_ERR_INVALID_ARGUMENT,
               "`index`", score == 7.0f);
    }
    E = "sam2_masks_box";
    FOR_BAD(MASKS, b) TRY_IF(E, sam2_masks_box(b.ptr, 0, box, &area), b.want, "`masks`",
                             box[0] == 7 && area == 777);
    for (size_t i = 0; i < 4; i++) {
        TRY_IF(E, sam2_masks_box(masks, indices[i], box, &area), SAM2_ERR_INVALID_ARGUMENT,
               "`index`", box[0] == 7 && box[3] == 7 && area == 777);
    }
    E = "sam2_masks_low_res";
    FOR_BAD(MASKS, b) TRY_IF(E, sam2_masks_low_res(b.ptr, 0, &logits, &len, &side), b.want,
                             "`masks`", logits == SENTINEL_PTR && side == 777);
    for (size_t i = 0; i < 4; i++) {
        TRY_IF(E, sam2_masks_low_res(masks, indices[i], &logits, &len, &side),
               SAM2_ERR_INVALID_ARGUMENT, "`index`", logits == SENTINEL_PTR && side == 777);
    }
}

/* ---- Mask formats and model pairs: handles, indices, sizes, tolerances, paths ---- */

static void mask_formats(void) {
    const size_t indices[] = {1, 2, 1000, SIZE_MAX};
    uint8_t buf[4] = {7, 7, 7, 7};
    uint32_t box[4] = {7, 7, 7, 7}, counts[4] = {7, 7, 7, 7};
    size_t needed = 777, points = 777, rings = 777;
    float pts[8] = {7.0f};
    sam2_ring ring[2] = {{7, 7}, {7, 7}};
    char text[4] = "abc";

    const char *E = "sam2_masks_copy_mask";
    FOR_BAD(MASKS, b) TRY_IF(E, sam2_masks_copy_mask(b.ptr, 0, buf, sizeof buf), b.want, "`masks`", buf[0] == 7);
    for (size_t i = 0; i < 4; i++)
        TRY_IF(E, sam2_masks_copy_mask(masks, indices[i], buf, sizeof buf), SAM2_ERR_INVALID_ARGUMENT, "`index`",
               buf[0] == 7);
    /* Too small for width × height: refused before anything is written. */
    const size_t sizes[] = {0, 1, 4};
    for (size_t i = 0; i < 3; i++)
        TRY_IF(E, sam2_masks_copy_mask(masks, 0, buf, sizes[i]), SAM2_ERR_INVALID_ARGUMENT, "`size`",
               buf[0] == 7);

    E = "sam2_masks_crop";
    FOR_BAD(MASKS, b) TRY_IF(E, sam2_masks_crop(b.ptr, 0, buf, sizeof buf, box, &needed), b.want, "`masks`",
                             box[0] == 7 && needed == 777);
    for (size_t i = 0; i < 4; i++)
        TRY_IF(E, sam2_masks_crop(masks, indices[i], buf, sizeof buf, box, &needed), SAM2_ERR_INVALID_ARGUMENT,
               "`index`", box[0] == 7 && needed == 777);
    /* Too small: only the size needed is written. */
    TRY_IF(E, sam2_masks_crop(masks, 0, buf, sizeof buf, box, &needed), SAM2_ERR_BUFFER_TOO_SMALL, NULL,
           buf[0] == 7 && box[0] == 7 && needed > sizeof buf);
    needed = 777;

    E = "sam2_masks_rle";
    FOR_BAD(MASKS, b) TRY_IF(E, sam2_masks_rle(b.ptr, 0, counts, 4, &needed), b.want, "`masks`",
                             counts[0] == 7 && needed == 777);
    for (size_t i = 0; i < 4; i++)
        TRY_IF(E, sam2_masks_rle(masks, indices[i], counts, 4, &needed), SAM2_ERR_INVALID_ARGUMENT, "`index`",
               counts[0] == 7 && needed == 777);
    TRY_IF(E, sam2_masks_rle(masks, 0, counts, SIZE_MAX, &needed), SAM2_ERR_INVALID_ARGUMENT, "`counts`",
           counts[0] == 7 && needed == 777);
    TRY_IF(E, sam2_masks_rle(masks, 0, counts, 1, &needed), SAM2_ERR_BUFFER_TOO_SMALL, NULL,
           counts[0] == 7 && needed > 1);
    needed = 777;

    E = "sam2_masks_rle_string";
    FOR_BAD(MASKS, b) TRY_IF(E, sam2_masks_rle_string(b.ptr, 0, text, sizeof text, &needed), b.want, "`masks`",
                             text[0] == 'a' && needed == 777);
    for (size_t i = 0; i < 4; i++)
        TRY_IF(E, sam2_masks_rle_string(masks, indices[i], text, sizeof text, &needed), SAM2_ERR_INVALID_ARGUMENT,
               "`index`", text[0] == 'a' && needed == 777);
    TRY_IF(E, sam2_masks_rle_string(masks, 0, text, sizeof text, &needed), SAM2_ERR_BUFFER_TOO_SMALL, NULL,
           text[0] == 'a' && needed > sizeof text);
    needed = 777;

    E = "sam2_masks_polygons";
#define UNTOUCHED_POLYGONS (pts[0] == 7.0f && ring[0].point_count == 7 && points == 777 && rings == 777)
    FOR_BAD(MASKS, b) TRY_IF(E, sam2_masks_polygons(b.ptr, 0, 0.0f, pts, 4, ring, 2, &points, &rings), b.want,
                             "`masks`", UNTOUCHED_POLYGONS);
    for (size_t i = 0; i < 4; i++)
        TRY_IF(E, sam2_masks_polygons(masks, indices[i], 0.0f, pts, 4, ring, 2, &points, &rings),
               SAM2_ERR_INVALID_ARGUMENT, "`index`", UNTOUCHED_POLYGONS);
    const float tolerances[] = {-1.0f, -0.0001f, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < 5; i++)
        TRY_IF(E, sam2_masks_polygons(masks, 0, tolerances[i], pts, 4, ring, 2, &points, &rings),
               SAM2_ERR_INVALID_ARGUMENT, "`tolerance`", UNTOUCHED_POLYGONS);
    TRY_IF(E, sam2_masks_polygons(masks, 0, 0.0f, pts, SIZE_MAX, ring, 2, &points, &rings),
           SAM2_ERR_INVALID_ARGUMENT, "`points_capacity`", UNTOUCHED_POLYGONS);
    TRY_IF(E, sam2_masks_polygons(masks, 0, 0.0f, pts, 4, ring, SIZE_MAX, &points, &rings),
           SAM2_ERR_INVALID_ARGUMENT, "`rings`", UNTOUCHED_POLYGONS);
    /* Too small: both sizes are written, nothing else. */
    TRY_IF(E, sam2_masks_polygons(masks, 0, 0.0f, pts, 1, ring, 2, &points, &rings), SAM2_ERR_BUFFER_TOO_SMALL,
           NULL, pts[0] == 7.0f && ring[0].point_count == 7 && points > 1 && rings == 1);

    E = "sam2_find_model_pair";
    char enc[TEST_PATH_MAX] = "x", dec[TEST_PATH_MAX] = "y", path[TEST_PATH_MAX];
    size_t enc_needed = 777, dec_needed = 777;
#define UNTOUCHED_PAIR (enc[0] == 'x' && dec[0] == 'y' && enc_needed == 777 && dec_needed == 777)
    TRY_IF(E, sam2_find_model_pair("\xff\xfe", enc, sizeof enc, &enc_needed, dec, sizeof dec, &dec_needed),
           SAM2_ERR_INVALID_ARGUMENT, "`path`", UNTOUCHED_PAIR);
    TRY_IF(E, sam2_find_model_pair("", enc, sizeof enc, &enc_needed, dec, sizeof dec, &dec_needed),
           SAM2_ERR_MODEL, "not a directory, a model name or a model file", UNTOUCHED_PAIR);
    TRY_IF(E, sam2_find_model_pair("/nonexistent/sam2/tiny_a", enc, sizeof enc, &enc_needed, dec, sizeof dec,
                                   &dec_needed),
           SAM2_ERR_MODEL, "not a directory", UNTOUCHED_PAIR);
    /* The scratch directory holds no pair; the models directory several; a name matches none. */
    TRY_IF(E, sam2_find_model_pair(dir, enc, sizeof enc, &enc_needed, dec, sizeof dec, &dec_needed),
           SAM2_ERR_MODEL, "holds no SAM2 encoder/decoder pair", UNTOUCHED_PAIR);
    test_model_path(path, "");
    TRY_IF(E, sam2_find_model_pair(path, enc, sizeof enc, &enc_needed, dec, sizeof dec, &dec_needed),
           SAM2_ERR_MODEL, "encoder/decoder pairs", UNTOUCHED_PAIR);
    test_model_path(path, "tiny_z");
    TRY_IF(E, sam2_find_model_pair(path, enc, sizeof enc, &enc_needed, dec, sizeof dec, &dec_needed),
           SAM2_ERR_MODEL, "no encoder/decoder pair of that name", UNTOUCHED_PAIR);
    /* A file that is no model is matched by name only: an encoder's name with no decoder. */
    scratch(path, "lonely_encoder.onnx");
    write_file(path, "x", 1);
    TRY_IF(E, sam2_find_model_pair(path, enc, sizeof enc, &enc_needed, dec, sizeof dec, &dec_needed),
           SAM2_ERR_MODEL, "no encoder/decoder pair of that name", UNTOUCHED_PAIR);
    unlink(path);
    /* Too small: both sizes are written, neither path. */
    test_model_path(path, "tiny_a");
    TRY_IF(E, sam2_find_model_pair(path, enc, 2, &enc_needed, dec, sizeof dec, &dec_needed),
           SAM2_ERR_BUFFER_TOO_SMALL, NULL, enc[0] == 'x' && dec[0] == 'y' && enc_needed > 2 && dec_needed > 2);
}

/* ---- Video tracking: sam2_tracker_* and sam2_track_result_* ---- */

static void tracker_new_fails(const char *const paths[4], const sam2_tracker_options *o,
                              sam2_status want, const char *needle) {
    sam2_tracker *out = SENTINEL_PTR;
    TRY_IF("sam2_tracker_new", sam2_tracker_new(paths[0], paths[1], paths[2], paths[3], o, &out),
           want, needle, out == SENTINEL_PTR);
}

static void prompt_fails(const void *t, uint32_t frame, const uint8_t *px, size_t len, uint32_t w,
                         uint32_t h, size_t stride, uint32_t format, const sam2_prompt *p,
                         sam2_status want, const char *needle) {
    sam2_track_result *out = SENTINEL_PTR;
    TRY_IF("sam2_tracker_add_prompt",
           sam2_tracker_add_prompt(t, frame, px, len, w, h, stride, format, 1, p, &out), want,
           needle, out == SENTINEL_PTR);
}

static void track_fails(const void *t, uint32_t frame, const uint8_t *px, size_t len, uint32_t w,
                        uint32_t h, size_t stride, uint32_t format, uint32_t direction,
                        sam2_status want, const char *needle) {
    sam2_track_result *out = SENTINEL_PTR;
    TRY_IF("sam2_tracker_track",
           sam2_tracker_track(t, frame, px, len, w, h, stride, format, direction, &out), want,
           needle, out == SENTINEL_PTR);
}

static void tracker_options_and_models(void) {
    char p[TRACK_MODULES][TEST_PATH_MAX];
    test_track_paths(p);
    const char *good[4] = {p[0], p[1], p[2], p[3]};
    sam2_tracker_options o;
#define TRACKER_BAD(field, value, needle)                                                      \
    do {                                                                                     \
        CHECK_OK(sam2_tracker_options_init(&o, sizeof o));                                   \
        o.field = value;                                                                     \
        tracker_new_fails(good, &o, SAM2_ERR_INVALID_ARGUMENT, needle);                      \
    } while (0)
    TRACKER_BAD(struct_size, 0, "struct_size");
    TRACKER_BAD(struct_size, 8, "struct_size");
    TRACKER_BAD(struct_size, (uint32_t)sizeof o + 8, "struct_size");
    TRACKER_BAD(struct_size, 0xFFFFFFFFu, "struct_size");
    TRACKER_BAD(intra_threads, 1025, "intra_threads");
    TRACKER_BAD(on_device_mismatch, SAM2_ON_MISMATCH_FAIL + 1, "on_device_mismatch");
    TRACKER_BAD(weight_sharing, SAM2_WEIGHTS_COPY + 1, "weight_sharing");
    TRACKER_BAD(graph_optimization, SAM2_OPTIMIZATION_ALL + 1, "graph_optimization");
    TRACKER_BAD(disabled_rewrites, 64, "disabled_rewrites");
    TRACKER_BAD(corrections_as_conditioning, 2, "corrections_as_conditioning");
    TRACKER_BAD(corrections_as_conditioning, 0xFFFFFFFFu, "corrections_as_conditioning");
    const uint32_t memory[] = {0, 3, 5, 1025, 2000, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof memory / sizeof memory[0]; i++) {
        TRACKER_BAD(memory_frames, memory[i], "`options.memory_frames`");
    }
    CHECK_OK(sam2_tracker_options_init(&o, sizeof o));
    sam2_provider bad_provider = {SAM2_PROVIDER_WEBGPU + 1, 0, 0, 0};
    o.providers = &bad_provider;
    o.provider_count = 1;
    tracker_new_fails(good, &o, SAM2_ERR_INVALID_ARGUMENT, "provider");
    o.provider_count = SIZE_MAX;
    tracker_new_fails(good, &o, SAM2_ERR_INVALID_ARGUMENT, "provider_count");

    /* Each module's path: missing, a directory, invalid UTF-8, an image-model file in its place. */
    const char *names[4] = {"image_encoder_path", "memory_attention_path", "image_decoder_path",
                            "memory_encoder_path"};
    for (int m = 0; m < 4; m++) {
        const char *bad[4] = {p[0], p[1], p[2], p[3]};
        bad[m] = "/nonexistent/module.onnx";
        tracker_new_fails(bad, NULL, SAM2_ERR_MODEL, "/nonexistent/module.onnx");
        bad[m] = dir;
        tracker_new_fails(bad, NULL, SAM2_ERR_IO, dir);
        bad[m] = "\xff\xfe.onnx";
        tracker_new_fails(bad, NULL, SAM2_ERR_INVALID_ARGUMENT, names[m]);
        bad[m] = m == 2 ? enc_path : dec_path;
        tracker_new_fails(bad, NULL, SAM2_ERR_MODEL, NULL);
    }
    /* Two modules swapped. */
    const char *swapped[4] = {p[1], p[0], p[2], p[3]};
    tracker_new_fails(swapped, NULL, SAM2_ERR_MODEL, NULL);
}

static void tracker_calls(void) {
    const uint8_t *px = clip_rgb;
    const uint32_t w = CLIP_WIDTH, h = CLIP_HEIGHT, rgb = SAM2_PIXEL_RGB;
    const size_t len = CLIP_LEN, row = (size_t)w * 3;
    sam2_point pt = {34, 96, SAM2_POINT_POSITIVE};
    sam2_prompt good = test_points_prompt(&pt, 1);

    /* sam2_tracker_add_prompt: handles, image sizes, frames, prompts. */
    FOR_BAD(TRACKER, b) prompt_fails(b.ptr, 0, px, len, w, h, 0, rgb, &good, b.want, "`tracker`");
    const sam2_status I = SAM2_ERR_INVALID_ARGUMENT;
    prompt_fails(tracker, 0, px, 0, w, h, 0, rgb, &good, I, "pixels");
    prompt_fails(tracker, 0, px, len - 1, w, h, 0, rgb, &good, I, "pixels");
    prompt_fails(tracker, 0, px, len, 0, h, 0, rgb, &good, I, "width");
    prompt_fails(tracker, 0, px, len, w, 0, 0, rgb, &good, I, "height");
    prompt_fails(tracker, 0, px, len, 0xFFFFFFFFu, 0xFFFFFFFFu, 0, rgb, &good, I, "width");
    prompt_fails(tracker, 0, px, len, w, h, row - 1, rgb, &good, I, "stride");
    prompt_fails(tracker, 0, px, len, w, h, SIZE_MAX, rgb, &good, I, "`stride`|`pixels`");
    prompt_fails(tracker, 0, px, len, w, h, 0, SAM2_PIXEL_GRAY + 1, &good, I, "pixel_format");
    prompt_fails(tracker, 0, px, len, w, h, 0, SAM2_PIXEL_RGBA, &good, I, "pixels");
    const uint32_t frames[] = {CLIP_FRAMES, CLIP_FRAMES + 1, 0x7FFFFFFFu, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++) {
        prompt_fails(tracker, frames[i], px, len, w, h, 0, rgb, &good, I, "`frame_index`");
    }
    const float bad_values[] = {NAN, INFINITY, -INFINITY, -1.0f, 1e30f};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        sam2_point bad = {bad_values[i], 10, SAM2_POINT_POSITIVE};
        sam2_prompt p = test_points_prompt(&bad, 1);
        prompt_fails(tracker, 0, px, len, w, h, 0, rgb, &p, I, "points");
        bad.x = 10;
        bad.y = bad_values[i];
        prompt_fails(tracker, 0, px, len, w, h, 0, rgb, &p, I, "points");
        for (int c = 0; c < 4; c++) {
            sam2_prompt bx = test_box_prompt(10, 10, 100, 100);
            bx.box[c] = bad_values[i];
            prompt_fails(tracker, 0, px, len, w, h, 0, rgb, &bx, I, "box");
        }
    }
    sam2_point outside = {(float)w + 0.5f, 10, SAM2_POINT_POSITIVE};
    sam2_prompt p = test_points_prompt(&outside, 1);
    prompt_fails(tracker, 0, px, len, w, h, 0, rgb, &p, I, "outside");
    sam2_point label = {10, 10, 2};
    p = test_points_prompt(&label, 1);
    prompt_fails(tracker, 0, px, len, w, h, 0, rgb, &p, I, "label");
    sam2_prompt bx = test_box_prompt(100, 10, 50, 100);
    prompt_fails(tracker, 0, px, len, w, h, 0, rgb, &bx, I, "box");
    sam2_prompt empty;
    memset(&empty, 0, sizeof empty);
    prompt_fails(tracker, 0, px, len, w, h, 0, rgb, &empty, I, "empty");
    p = good;
    p.point_count = 1025;
    prompt_fails(tracker, 0, px, len, w, h, 0, rgb, &p, I, "`points`");
    p.point_count = SIZE_MAX;
    prompt_fails(tracker, 0, px, len, w, h, 0, rgb, &p, I, "`points`");
    /* Mask prompts, of any length: refused before the array is read. */
    static float logits[65536];
    const size_t mask_lens[] = {0, 1, 65536, SIZE_MAX};
    for (size_t i = 0; i < sizeof mask_lens / sizeof mask_lens[0]; i++) {
        p = good;
        p.mask_input = logits;
        p.mask_input_len = mask_lens[i];
        prompt_fails(tracker, 0, px, len, w, h, 0, rgb, &p, I, "`prompt.mask_input`");
    }

    /* sam2_tracker_track: handles, sizes, frames, directions, no object yet. */
    const uint32_t fwd = SAM2_TRACK_FORWARD;
    FOR_BAD(TRACKER, b) track_fails(b.ptr, 0, px, len, w, h, 0, rgb, fwd, b.want, "`tracker`");
    track_fails(tracker, 0, px, len - 1, w, h, 0, rgb, fwd, I, "pixels");
    track_fails(tracker, 0, px, len, 0, h, 0, rgb, fwd, I, "width");
    track_fails(tracker, 0, px, len, w, h, 1, rgb, fwd, I, "stride");
    track_fails(tracker, 0, px, len, w, h, 0, 0xFFFFFFFFu, fwd, I, "pixel_format");
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++) {
        track_fails(tracker, frames[i], px, len, w, h, 0, rgb, fwd, I, "`frame_index`");
    }
    const uint32_t directions[] = {SAM2_TRACK_BACKWARD + 1, 0x80000000u, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof directions / sizeof directions[0]; i++) {
        track_fails(tracker, 1, px, len, w, h, 0, rgb, directions[i], I, "`direction`");
    }
    sam2_tracker *fresh = test_open_tracker(NULL);
    track_fails(fresh, 0, px, len, w, h, 0, rgb, fwd, I, "no object");
    sam2_tracker_free(fresh);

    /* The tracker's queries and state changes. */
    int32_t removed = 77;
    FOR_BAD(TRACKER, b) TRY_IF("sam2_tracker_remove_object", sam2_tracker_remove_object(b.ptr, 1, &removed),
                               b.want, "`tracker`", removed == 77);
    FOR_BAD(TRACKER, b) TRY("sam2_tracker_reset", sam2_tracker_reset(b.ptr), b.want, "`tracker`");
    size_t held = 777;
    FOR_BAD(TRACKER, b) TRY_IF("sam2_tracker_memory_frames", sam2_tracker_memory_frames(b.ptr, &held),
                               b.want, "`tracker`", held == 777);
    uint64_t held_bytes = 777;
    FOR_BAD(TRACKER, b) TRY_IF("sam2_tracker_memory_bytes", sam2_tracker_memory_bytes(b.ptr, &held_bytes),
                               b.want, "`tracker`", held_bytes == 777);
    uint32_t provider = 777;
    int32_t device = 777, fell_back = 777;
    uint32_t precision = 777;
    FOR_BAD(TRACKER, b) TRY_IF("sam2_tracker_precision", sam2_tracker_precision(b.ptr, &precision),
                               b.want, "`tracker`", precision == 777);
    FOR_BAD(TRACKER, b) TRY_IF("sam2_tracker_device",
                               sam2_tracker_device(b.ptr, &provider, &device, &fell_back), b.want,
                               "`tracker`", UNTOUCHED_DEVICE);
    /* No refused call above touched the tracker: its object is still there, and an unknown id
     * is not an error. */
    TRY_IF("sam2_tracker_remove_object", sam2_tracker_remove_object(tracker, 0xFFFFFFFFu, &removed),
           SAM2_OK, NULL, removed == 0);
}

static void track_results(void) {
    const sam2_status I = SAM2_ERR_INVALID_ARGUMENT;
    uint32_t frame = 777, w = 777, h = 777;
    size_t count = 777, len = 777;
    FOR_BAD(TRACK_RESULT, b) TRY_IF("sam2_track_result_count",
                                    sam2_track_result_count(b.ptr, &frame, &count, &w, &h), b.want,
                                    "`result`", frame == 777 && count == 777 && w == 777 && h == 777);
    sam2_tracked_object o;
    memset(&o, 0x77, sizeof o);
    const uint8_t *mask = SENTINEL_PTR;
    const float *logits = SENTINEL_PTR;
    const size_t indices[] = {1, 2, 1000, SIZE_MAX};
    const char *E = "sam2_track_result_object";
    FOR_BAD(TRACK_RESULT, b) TRY_IF(E, sam2_track_result_object(b.ptr, 0, &o), b.want, "`result`",
                                    o.object_id == 0x77777777u);
    for (size_t i = 0; i < 4; i++) {
        TRY_IF(E, sam2_track_result_object(track_result, indices[i], &o), I, "`index`",
               o.object_id == 0x77777777u);
    }
    E = "sam2_track_result_mask";
    FOR_BAD(TRACK_RESULT, b) TRY_IF(E, sam2_track_result_mask(b.ptr, 0, &mask, &len), b.want,
                                    "`result`", mask == SENTINEL_PTR && len == 777);
    for (size_t i = 0; i < 4; i++) {
        TRY_IF(E, sam2_track_result_mask(track_result, indices[i], &mask, &len), I, "`index`",
               mask == SENTINEL_PTR && len == 777);
    }
    E = "sam2_track_result_low_res";
    FOR_BAD(TRACK_RESULT, b) TRY_IF(E, sam2_track_result_low_res(b.ptr, 0, &logits, &len), b.want,
                                    "`result`", logits == SENTINEL_PTR && len == 777);
    for (size_t i = 0; i < 4; i++) {
        TRY_IF(E, sam2_track_result_low_res(track_result, indices[i], &logits, &len), I,
               "`index`", logits == SENTINEL_PTR && len == 777);
    }
}

static void trackers(void) {
    tracker_options_and_models();
    tracker_calls();
    track_results();
}

/* ---- _free: the wrong type and a second free are ignored ---- */

static int warnings;
static char last_warning[1024];

static void on_log(uint32_t level, const char *message, void *user_data) {
    (void)user_data;
    if (level == SAM2_LOG_WARNING) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", message);
    }
}

static int ignored_with_warning(const char *needle) {
    int ok = warnings == 1 && strstr(last_warning, needle) != NULL;
    warnings = 0;
    last_warning[0] = '\0';
    return ok;
}

static void frees(void) {
    CHECK_OK(sam2_set_log_callback(on_log, NULL, SAM2_LOG_WARNING));
    TRY_VALUE("sam2_cache_free",
              (sam2_cache_free((sam2_cache *)encoder), ignored_with_warning("sam2_encoder")),
              "`cache`");
    TRY_VALUE("sam2_encode_job_free",
              (sam2_encode_job_free((sam2_encode_job *)cache), ignored_with_warning("sam2_cache")),
              "`job`");
    /* The wrong _free for a live handle: ignored, and the handle still works. */
    TRY_VALUE("sam2_encoder_free",
              (sam2_encoder_free((sam2_encoder *)embedding), ignored_with_warning("sam2_embedding")),
              "`encoder`");
    TRY_VALUE("sam2_predictor_free",
              (sam2_predictor_free((sam2_predictor *)masks), ignored_with_warning("sam2_masks")),
              "`predictor`");
    TRY_VALUE("sam2_embedding_free",
              (sam2_embedding_free((sam2_embedding *)predictor),
               ignored_with_warning("sam2_predictor")),
              "`embedding`");
    TRY_VALUE("sam2_masks_free",
              (sam2_masks_free((sam2_masks *)encoder), ignored_with_warning("sam2_encoder")),
              "`masks`");
    TRY_VALUE("sam2_tracker_free",
              (sam2_tracker_free((sam2_tracker *)track_result),
               ignored_with_warning("sam2_track_result")),
              "`tracker`");
    TRY_VALUE("sam2_track_result_free",
              (sam2_track_result_free((sam2_track_result *)tracker),
               ignored_with_warning("sam2_tracker")),
              "`result`");
    TRY_VALUE("sam2_everything_free",
              (sam2_everything_free((sam2_everything *)masks), ignored_with_warning("sam2_masks")),
              "`everything`");
    TRY_VALUE("sam2_embedding_free",
              (sam2_embedding_free((sam2_embedding *)((char *)embedding + 1)),
               ignored_with_warning("sam2_embedding")),
              "`embedding`");
    uint32_t w = 0, h = 0;
    CHECK_OK(sam2_embedding_image_size(embedding, &w, &h));
    CHECK(w == image.width);
    size_t objects = 0, candidates = 0;
    CHECK_OK(sam2_masks_count(masks, &objects, &candidates));
    CHECK(objects == 1);
    /* One pointer for both out-params: written through raw pointers, the last write wins. */
    size_t both = 99;
    CHECK_OK(sam2_masks_count(masks, &both, &both));
    CHECK(both == candidates);
    /* A second free (the registry knows it; nothing reads freed memory, under valgrind too). */
    {
        for (int k = 0; k < KINDS; k++) {
            void *h = (void *)freed((enum kind)k);
            switch (k) {
            case ENCODER: sam2_encoder_free(h); break;
            case PREDICTOR: sam2_predictor_free(h); break;
            case EMBEDDING: sam2_embedding_free(h); break;
            case MASKS: sam2_masks_free(h); break;
            case CACHE: sam2_cache_free(h); break;
            case TRACKER: sam2_tracker_free(h); break;
            case TRACK_RESULT: sam2_track_result_free(h); break;
            case EVERYTHING: sam2_everything_free(h); break;
            default: sam2_encode_job_free(h); break;
            }
            sweep_record(FREE_NAMES[k],
                         ignored_with_warning("ignored") ? SAM2_OK : SAM2_ERR_PANIC, SAM2_OK,
                         "already freed", 1, __FILE__, __LINE__, "a second _free");
        }
    }
    CHECK_OK(sam2_set_log_callback(NULL, NULL, SAM2_LOG_WARNING));
}

/* ---- Segment everything: handles, pixels, every option, indices, buffers ---- */

static void everything_fails(const void *e, const void *p, const uint8_t *px, size_t len,
                             uint32_t w, uint32_t h, size_t stride, uint32_t format,
                             const sam2_everything_options *o, sam2_status want,
                             const char *needle) {
    sam2_everything *out = SENTINEL_PTR;
    TRY_IF("sam2_segment_everything",
           sam2_segment_everything(e, p, px, len, w, h, stride, format, o, &out), want, needle,
           out == SENTINEL_PTR);
}

static void everything_embedding_fails(const void *p, const void *emb,
                                       const sam2_everything_options *o, sam2_status want,
                                       const char *needle) {
    sam2_everything *out = SENTINEL_PTR;
    TRY_IF("sam2_segment_everything_embedding",
           sam2_segment_everything_embedding(p, emb, o, &out), want, needle, out == SENTINEL_PTR);
}

static void everythings(void) {
    const uint8_t *px = image.data;
    uint32_t w = image.width, h = image.height;
    size_t len = image_len, row = (size_t)w * 3;
    const sam2_status BAD = SAM2_ERR_INVALID_ARGUMENT;

    /* Handles. */
    FOR_BAD(ENCODER, b) everything_fails(b.ptr, predictor, px, len, w, h, 0, SAM2_PIXEL_RGB, NULL,
                                         b.want, "`encoder`");
    FOR_BAD(PREDICTOR, b) everything_fails(encoder, b.ptr, px, len, w, h, 0, SAM2_PIXEL_RGB, NULL,
                                           b.want, "`predictor`");
    FOR_BAD(PREDICTOR, b) everything_embedding_fails(b.ptr, embedding, NULL, b.want,
                                                     "`predictor`");
    FOR_BAD(EMBEDDING, b) everything_embedding_fails(predictor, b.ptr, NULL, b.want,
                                                     "`embedding`");

    /* Pixels: those of sam2_encode, checked before any option or encode. */
    everything_fails(encoder, predictor, px, 0, w, h, 0, SAM2_PIXEL_RGB, NULL, BAD, "pixels");
    everything_fails(encoder, predictor, px, len - 1, w, h, 0, SAM2_PIXEL_RGB, NULL, BAD, "pixels");
    everything_fails(encoder, predictor, px, len, 0, h, 0, SAM2_PIXEL_RGB, NULL, BAD, "width");
    everything_fails(encoder, predictor, px, len, w, 0, 0, SAM2_PIXEL_RGB, NULL, BAD, "height");
    everything_fails(encoder, predictor, px, len, 65537, h, 0, SAM2_PIXEL_RGB, NULL, BAD, "width");
    everything_fails(encoder, predictor, px, len, w, 0xFFFFFFFFu, 0, SAM2_PIXEL_RGB, NULL, BAD,
                     "height");
    everything_fails(encoder, predictor, px, len, 65536, 65536, 0, SAM2_PIXEL_RGBA, NULL, BAD,
                     "pixels");
    everything_fails(encoder, predictor, px, len, w, h, row - 1, SAM2_PIXEL_RGB, NULL, BAD,
                     "stride");
    everything_fails(encoder, predictor, px, len, w, h, SIZE_MAX, SAM2_PIXEL_RGB, NULL, BAD,
                     "`stride`|`pixels`");
    const uint32_t formats[] = {SAM2_PIXEL_GRAY + 1, 0xFFFFFFFFu};
    for (size_t i = 0; i < 2; i++)
        everything_fails(encoder, predictor, px, len, w, h, 0, formats[i], NULL, BAD,
                         "pixel_format");

    /* Every option, through both entry points (the options are checked before anything runs). */
    sam2_everything_options o;
    float inside[4] = {0.25f, 0.25f, 0.75f, 0.75f};
#define EVR_BAD(field, value, needle)                                                         \
    do {                                                                                     \
        CHECK_OK(sam2_everything_options_init(&o, sizeof o));                                \
        o.points_per_side = 2;                                                               \
        o.field = value;                                                                     \
        everything_fails(encoder, predictor, px, len, w, h, 0, SAM2_PIXEL_RGB, &o, BAD,      \
                         needle);                                                            \
        everything_embedding_fails(predictor, embedding, &o, BAD, needle);                   \
    } while (0)
    EVR_BAD(struct_size, 0, "struct_size");
    EVR_BAD(struct_size, 8, "struct_size");
    EVR_BAD(struct_size, (uint32_t)offsetof(sam2_everything_options, max_clicks) + 8,
            "struct_size");
    EVR_BAD(struct_size, (uint32_t)sizeof o + 8, "struct_size");
    EVR_BAD(struct_size, 0xFFFFFFFFu, "struct_size");
    EVR_BAD(points_per_side, 0, "points_per_side");
    EVR_BAD(points_per_side, 1025, "points_per_side");
    EVR_BAD(points_per_side, 0xFFFFFFFFu, "points_per_side");
    EVR_BAD(points_per_batch, 0, "points_per_batch");
    EVR_BAD(points_per_batch, 257, "points_per_batch");
    EVR_BAD(points_per_batch, 0xFFFFFFFFu, "points_per_batch");
    const float not_unit[] = {NAN, INFINITY, -INFINITY, -0.01f, 1.01f};
    for (size_t i = 0; i < 5; i++) {
        EVR_BAD(pred_iou_thresh, not_unit[i], "pred_iou_thresh");
        EVR_BAD(stability_score_thresh, not_unit[i], "stability_score_thresh");
        EVR_BAD(box_nms_thresh, not_unit[i], "box_nms_thresh");
        EVR_BAD(crop_nms_thresh, not_unit[i], "crop_nms_thresh");
        EVR_BAD(crop_overlap_ratio, not_unit[i], "crop_overlap_ratio");
    }
    EVR_BAD(crop_overlap_ratio, 1.0f, "crop_overlap_ratio");
    EVR_BAD(stability_score_offset, NAN, "stability_score_offset");
    EVR_BAD(stability_score_offset, INFINITY, "stability_score_offset");
    EVR_BAD(stability_score_offset, -1.0f, "stability_score_offset");
    EVR_BAD(mask_threshold, NAN, "mask_threshold");
    EVR_BAD(mask_threshold, -INFINITY, "mask_threshold");
    EVR_BAD(crop_n_layers, 5, "crop_n_layers");
    EVR_BAD(crop_n_layers, 0xFFFFFFFFu, "crop_n_layers");
    EVR_BAD(crop_n_points_downscale_factor, 0, "crop_n_points_downscale_factor");
    EVR_BAD(multimask, 2, "multimask");
    EVR_BAD(multimask, 0xFFFFFFFFu, "multimask");
    /* The budgets: zero, and below what the request needs (4 clicks, a few MiB). */
    EVR_BAD(max_clicks, 0, "max_clicks");
    EVR_BAD(max_clicks, 3, "max_clicks");
    EVR_BAD(max_memory_bytes, 0, "max_memory_bytes");
    EVR_BAD(max_memory_bytes, 1000, "max_memory_bytes");
#undef EVR_BAD
    /* The caller's points (a count without points is test_null_sweep.c's). */
#define EVR_POINTS_BAD(count, needle)                                                         \
    do {                                                                                     \
        CHECK_OK(sam2_everything_options_init(&o, sizeof o));                                \
        o.points_per_side = 0;                                                               \
        o.points = inside;                                                                   \
        o.point_count = count;                                                               \
        everything_fails(encoder, predictor, px, len, w, h, 0, SAM2_PIXEL_RGB, &o, BAD,      \
                         needle);                                                            \
        everything_embedding_fails(predictor, embedding, &o, BAD, needle);                   \
    } while (0)
    EVR_POINTS_BAD(0, "point_count");
    EVR_POINTS_BAD((size_t)1024 * 1024 + 1, "point_count");
    EVR_POINTS_BAD(SIZE_MAX, "point_count");
    const float outside[] = {NAN, INFINITY, -0.5f, 1.5f};
    for (size_t i = 0; i < 4; i++) {
        inside[2] = outside[i];
        EVR_POINTS_BAD(2, "point_grids");
        inside[2] = 0.75f;
    }
#undef EVR_POINTS_BAD
    /* Crops need encodes of their own: refused on an embedding only. */
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.points_per_side = 2;
    o.crop_n_layers = 1;
    everything_embedding_fails(predictor, embedding, &o, BAD, "crop_n_layers");

    /* The result's accessors: handles, indices, buffers. */
    size_t count = 777;
    uint32_t rw = 777, rh = 777;
    const char *E = "sam2_everything_count";
    FOR_BAD(EVERYTHING, b) TRY_IF(E, sam2_everything_count(b.ptr, &count, &rw, &rh), b.want,
                                  "`everything`", count == 777 && rw == 777 && rh == 777);
    CHECK_OK(sam2_everything_count(everything, &count, &rw, &rh));
    CHECK(count > 0);
    const size_t indices[] = {count, count + 1, 1000000, SIZE_MAX};
    sam2_everything_info info;
    memset(&info, 0x77, sizeof info);
    E = "sam2_everything_mask_info";
    FOR_BAD(EVERYTHING, b) TRY_IF(E, sam2_everything_mask_info(b.ptr, 0, &info), b.want,
                                  "`everything`", info.area == 0x7777777777777777ull);
    for (size_t i = 0; i < 4; i++)
        TRY_IF(E, sam2_everything_mask_info(everything, indices[i], &info), BAD, "`index`",
               info.area == 0x7777777777777777ull);
    size_t plane = (size_t)rw * rh;
    uint8_t *buf = malloc(plane);
    CHECK(buf != NULL);
    memset(buf, 7, plane);
    E = "sam2_everything_mask";
    FOR_BAD(EVERYTHING, b) TRY_IF(E, sam2_everything_mask(b.ptr, 0, buf, plane), b.want,
                                  "`everything`", buf[0] == 7);
    for (size_t i = 0; i < 4; i++)
        TRY_IF(E, sam2_everything_mask(everything, indices[i], buf, plane), BAD, "`index`",
               buf[0] == 7);
    const size_t small[] = {0, 1, plane - 1};
    for (size_t i = 0; i < 3; i++)
        TRY_IF(E, sam2_everything_mask(everything, 0, buf, small[i]), SAM2_ERR_BUFFER_TOO_SMALL,
               NULL, buf[0] == 7 && buf[plane - 1] == 7);
    free(buf);
    const uint32_t *counts = SENTINEL_PTR;
    size_t n = 777;
    E = "sam2_everything_rle";
    FOR_BAD(EVERYTHING, b) TRY_IF(E, sam2_everything_rle(b.ptr, 0, &counts, &n), b.want,
                                  "`everything`", counts == SENTINEL_PTR && n == 777);
    for (size_t i = 0; i < 4; i++)
        TRY_IF(E, sam2_everything_rle(everything, indices[i], &counts, &n), BAD, "`index`",
               counts == SENTINEL_PTR && n == 777);
}

/* ---- The embedding cache and its jobs ---- */

static void cache_encode_fails(const void *c, const void *e, const uint8_t *px, size_t len,
                               uint32_t w, uint32_t h, size_t stride, uint32_t format,
                               sam2_status want, const char *needle) {
    sam2_embedding *out = SENTINEL_PTR;
    uint32_t source = 77;
    TRY_IF("sam2_cache_encode",
           sam2_cache_encode(c, e, px, len, w, h, stride, format, &out, &source), want, needle,
           out == SENTINEL_PTR && source == 77);
    sam2_encode_job *j = SENTINEL_PTR;
    TRY_IF("sam2_cache_encode_async",
           sam2_cache_encode_async(c, e, px, len, w, h, stride, format, SAM2_PRIORITY_BACKGROUND,
                                   &j),
           want, needle, j == SENTINEL_PTR);
    TRY("sam2_cache_put", sam2_cache_put(c, e, px, len, w, h, stride, format, embedding), want,
        needle);
}

static void caches(void) {
    const uint8_t *px = image.data;
    uint32_t w = image.width, h = image.height;
    size_t len = image_len;

    /* Options and creation. */
    const size_t sizes[] = {0, 1, sizeof(sam2_cache_options) - 1, sizeof(sam2_cache_options) + 1,
                            SIZE_MAX};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        sam2_cache_options o;
        memset(&o, 0x5a, sizeof o);
        TRY_IF("sam2_cache_options_init", sam2_cache_options_init(&o, sizes[i]),
               SAM2_ERR_INVALID_ARGUMENT, "struct_size", o.queue_limit == 0x5a5a5a5au);
    }
    sam2_cache_options o;
    CHECK_OK(sam2_cache_options_init(&o, sizeof o));
    sam2_cache *made = SENTINEL_PTR;
    const uint32_t bad_sizes[] = {0, 1, (uint32_t)sizeof o + 8, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
        sam2_cache_options bad = o;
        bad.struct_size = bad_sizes[i];
        TRY_IF("sam2_cache_new", sam2_cache_new(&bad, &made), SAM2_ERR_INVALID_ARGUMENT,
               "struct_size", made == SENTINEL_PTR);
    }
    const uint32_t limits[] = {65537, 0xFFFFFFFFu};
    for (size_t i = 0; i < 2; i++) {
        sam2_cache_options bad = o;
        bad.queue_limit = limits[i];
        TRY_IF("sam2_cache_new", sam2_cache_new(&bad, &made), SAM2_ERR_INVALID_ARGUMENT,
               "queue_limit", made == SENTINEL_PTR);
    }

    /* Requests: every handle, the pixel arguments as sam2_encode takes them. */
    FOR_BAD(CACHE, b) cache_encode_fails(b.ptr, encoder, px, len, w, h, 0, 0, b.want, "`cache`");
    FOR_BAD(ENCODER, b) cache_encode_fails(cache, b.ptr, px, len, w, h, 0, 0, b.want, "`encoder`");
    cache_encode_fails(cache, encoder, px, len - 1, w, h, 0, 0, SAM2_ERR_INVALID_ARGUMENT,
                       "pixels");
    cache_encode_fails(cache, encoder, px, len, 0, h, 0, 0, SAM2_ERR_INVALID_ARGUMENT, "width");
    cache_encode_fails(cache, encoder, px, len, w, 0xFFFFFFFFu, 0, 0, SAM2_ERR_INVALID_ARGUMENT,
                       "height");
    cache_encode_fails(cache, encoder, px, len, w, h, 1, 0, SAM2_ERR_INVALID_ARGUMENT, "stride");
    cache_encode_fails(cache, encoder, px, len, w, h, SIZE_MAX, 0, SAM2_ERR_INVALID_ARGUMENT,
                       "`stride`|`pixels`");
    cache_encode_fails(cache, encoder, px, len, w, h, 0, SAM2_PIXEL_GRAY + 1,
                       SAM2_ERR_INVALID_ARGUMENT, "pixel_format");
    const uint32_t priorities[] = {SAM2_PRIORITY_FOREGROUND + 1, 0xFFFFFFFFu};
    for (size_t i = 0; i < 2; i++) {
        sam2_encode_job *j = SENTINEL_PTR;
        TRY_IF("sam2_cache_encode_async",
               sam2_cache_encode_async(cache, encoder, px, len, w, h, 0, 0, priorities[i], &j),
               SAM2_ERR_INVALID_ARGUMENT, "priority", j == SENTINEL_PTR);
    }
    FOR_BAD(EMBEDDING, b) {
        TRY("sam2_cache_put", sam2_cache_put(cache, encoder, px, len, w, h, 0, 0, b.ptr), b.want,
            "`embedding`");
    }
    /* An embedding of another image size. */
    TRY("sam2_cache_put", sam2_cache_put(cache, encoder, px, len, w / 2, h, 0, 0, embedding),
        SAM2_ERR_INVALID_ARGUMENT, "embedding");

    /* Maintenance and statistics. */
    FOR_BAD(CACHE, b) {
        TRY("sam2_cache_clear", sam2_cache_clear(b.ptr), b.want, "`cache`");
        size_t n = 77;
        TRY_IF("sam2_cache_cancel_all", sam2_cache_cancel_all(b.ptr, &n), b.want, "`cache`",
               n == 77);
        sam2_cache_stats st;
        memset(&st, 0x5a, sizeof st);
        st.struct_size = sizeof st;
        TRY_IF("sam2_cache_get_stats", sam2_cache_get_stats(b.ptr, &st), b.want, "`cache`",
               st.hits == 0x5a5a5a5a5a5a5a5aull);
    }
    /* A struct of an older, shorter layout: only its struct_size is read (a heap block of just
     * that size, so valgrind sees any access beyond it), and nothing is written. */
    {
        uint32_t *short_stats = malloc(sizeof(uint32_t));
        CHECK(short_stats != NULL);
        *short_stats = (uint32_t)sizeof(uint32_t);
        TRY_IF("sam2_cache_get_stats",
               sam2_cache_get_stats(cache, (sam2_cache_stats *)(void *)short_stats),
               SAM2_ERR_INVALID_ARGUMENT, "struct_size", *short_stats == sizeof(uint32_t));
        free(short_stats);
    }
    const uint32_t stat_sizes[] = {0, 1, (uint32_t)sizeof(sam2_cache_stats) + 8, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof stat_sizes / sizeof stat_sizes[0]; i++) {
        sam2_cache_stats st;
        memset(&st, 0x5a, sizeof st);
        st.struct_size = stat_sizes[i];
        TRY_IF("sam2_cache_get_stats", sam2_cache_get_stats(cache, &st), SAM2_ERR_INVALID_ARGUMENT,
               "struct_size", st.hits == 0x5a5a5a5a5a5a5a5aull);
    }

    /* Jobs. */
    FOR_BAD(JOB, b) {
        sam2_embedding *out = SENTINEL_PTR;
        TRY_IF("sam2_encode_job_wait", sam2_encode_job_wait(b.ptr, 0, &out), b.want, "`job`",
               out == SENTINEL_PTR);
        uint32_t state = 77;
        TRY_IF("sam2_encode_job_state", sam2_encode_job_state(b.ptr, &state), b.want, "`job`",
               state == 77);
        TRY("sam2_encode_job_cancel", sam2_encode_job_cancel(b.ptr), b.want, "`job`");
    }
}

int main(int argc, char **argv) {
    test_default_environment();
    if (argc != 3) {
        fprintf(stderr, "usage: %s <fake_ort.so> <fake_ort_null_api.so>\n", argv[0]);
        return 2;
    }
    const char *hostile = real_hostile_dir();
    CHECK(mkdtemp(test_scratch_template(dir, "sam2_bad_input_")) != NULL);
    test_model_path(enc_path, "tiny_a_encoder.onnx");
    test_model_path(dec_path, "tiny_a_decoder.onnx");
    image = test_load_image("shapes.ppm");
    image_len = (size_t)image.width * image.height * 3;

    runtime(argv[1], argv[2]);
    encoder = test_open_encoder("tiny_a");
    predictor = test_open_predictor(encoder, "tiny_a");
    embedding = test_encode(encoder, &image);
    sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    masks = test_predict1(predictor, embedding, &prompt);
    everything = small_everything();
    CHECK_OK(sam2_cache_new(NULL, &cache));
    CHECK_OK(sam2_cache_encode_async(cache, encoder, image.data, image_len, image.width,
                                     image.height, 0, SAM2_PIXEL_RGB, SAM2_PRIORITY_BACKGROUND,
                                     &job));
    sam2_tracker_options to;
    CHECK_OK(sam2_tracker_options_init(&to, sizeof to));
    to.num_frames = CLIP_FRAMES;
    tracker = test_open_tracker(&to);
    clip_frame(0, clip_rgb, NULL, NULL);
    {
        sam2_point pt = {34, 96, SAM2_POINT_POSITIVE};
        sam2_prompt p = test_points_prompt(&pt, 1);
        CHECK_OK(sam2_tracker_add_prompt(tracker, 0, clip_rgb, CLIP_LEN, CLIP_WIDTH, CLIP_HEIGHT,
                                         0, SAM2_PIXEL_RGB, 1, &p, &track_result));
    }

    library();
    model_files();
    real_models(hostile);
    free((void *)hostile);
    options();
    encode();
    queries();
    files();
    predict();
    results();
    mask_formats();
    everythings();
    caches();
    trackers();
    frees();

    /* After all that, the handles still work and give the same result. */
    sam2_masks *again = test_predict1(predictor, embedding, &prompt);
    size_t plane = (size_t)image.width * image.height;
    CHECK(memcmp(test_mask(again, 0, plane), test_mask(masks, 0, plane), plane) == 0);
    sam2_masks_free(again);

    /* The cache and the job still work too. */
    sam2_embedding *from_job = NULL;
    CHECK_OK(sam2_encode_job_wait(job, SAM2_WAIT_FOREVER, &from_job));
    sam2_embedding_free(from_job);
    sam2_encode_job_free(job);
    sam2_cache_free(cache);
    sam2_masks_free(masks);
    sam2_embedding_free(embedding);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
    /* The tracker still tracks its object. */
    sam2_track_result *tracked = NULL;
    CHECK_OK(sam2_tracker_track(tracker, 0, clip_rgb, CLIP_LEN, CLIP_WIDTH, CLIP_HEIGHT, 0,
                                SAM2_PIXEL_RGB, SAM2_TRACK_FORWARD, &tracked));
    sam2_track_result_free(tracked);
    sam2_track_result_free(track_result);
    sam2_tracker_free(tracker);
    sam2_everything_free(everything);
    test_image_free(&image);
    CHECK(rmdir(dir) == 0);
    return sweep_finish("test_bad_input", "bad_input.tsv");
}
