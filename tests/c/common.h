/*
 * Shared helpers of the C tests: CHECK macros that print file:line and the library's last error
 * message, Netpbm (PPM/PGM) reading, IoU, where the models and test data are, and the shapes of
 * testdata/shapes.ppm with their clicks and boxes.
 */
#ifndef SAM2_TEST_COMMON_H
#define SAM2_TEST_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sam2.h"
#include "sam2_test_support.h" /* test hooks: the library is built with the test-support feature */

#define TEST_PATH_MAX 4096

#ifdef _WIN32
/* The Windows build of the suite (tools/ci/test-windows.sh): the POSIX file calls the tests use. */
#include <direct.h>
#include <io.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define mkdir(path, mode) _mkdir(path)
static inline char *mkdtemp(char *template_) {
    if (_mktemp_s(template_, strlen(template_) + 1) != 0) return NULL;
    return _mkdir(template_) == 0 ? template_ : NULL;
}
/* _putenv_s changes the C library's copy and the process environment (GetEnvironmentVariable,
 * which the library reads) alike; an empty value removes the variable. */
static inline int setenv(const char *name, const char *value, int overwrite) {
    if (!overwrite && getenv(name) != NULL) return 0;
    return _putenv_s(name, value);
}
static inline int unsetenv(const char *name) {
    return _putenv_s(name, "");
}
#endif

/* Prints that one check does not run on this system, and why (never skipped silently). */
#define TEST_SKIP(program, check, why) printf("%s: %s: skipped (%s)\n", program, check, why)

/* ---- Checks: print where, what, and sam2_last_error_message; then exit(1). ---- */

void test_check_failed(const char *file, int line, const char *what);
void test_status_failed(const char *file, int line, const char *expr, sam2_status got,
                        sam2_status want);
void test_message_failed(const char *file, int line, const char *needle);

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) test_check_failed(__FILE__, __LINE__, #cond);                           \
    } while (0)

/* Calls `expr` (a sam2 function returning sam2_status) and requires `want`. */
#define CHECK_STATUS(expr, want)                                                             \
    do {                                                                                     \
        sam2_status check_got_ = (expr);                                                     \
        if (check_got_ != (sam2_status)(want))                                               \
            test_status_failed(__FILE__, __LINE__, #expr, check_got_, (sam2_status)(want));  \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, SAM2_OK)

/* Requires the calling thread's last error message to contain `needle`. */
#define CHECK_MESSAGE(needle)                                                                \
    do {                                                                                     \
        if (!test_last_error_contains(needle)) test_message_failed(__FILE__, __LINE__, needle); \
    } while (0)

/* Calls `expr`, requires `want`, and requires the message to name `needle`. */
#define CHECK_FAILS(expr, want, needle)                                                      \
    do {                                                                                     \
        CHECK_STATUS(expr, want);                                                            \
        CHECK_MESSAGE(needle);                                                               \
    } while (0)

/* The calling thread's last error message, in a thread-local buffer (truncated if huge). */
const char *test_last_error(void);
int test_last_error_contains(const char *needle);

/* Returns the status's enumerator name ("SAM2_ERR_MODEL"), or "unknown". */
const char *test_status_name(sam2_status status);

/* ---- Paths: $SAM2_MODELS and $SAM2_TESTDATA (set by CMake from tools/setup/setup.sh). ---- */

/* Sets SAM2_MODELS, SAM2_TESTDATA, SAM2_ONNXRUNTIME_PATH and ORT_DISABLE_TELEMETRY, where the
 * environment lacks them, to the values CMake found, so a test binary also runs on its own
 * (under valgrind or a debugger) as it does under ctest. Every test's main calls it first. */
void test_default_environment(void);

/* Writes "<$SAM2_MODELS>/<file>" into `out` (TEST_PATH_MAX bytes) and returns `out`. */
char *test_model_path(char *out, const char *file);
/* Writes "<$SAM2_TESTDATA>/<file>" into `out` (TEST_PATH_MAX bytes) and returns `out`. */
char *test_data_path(char *out, const char *file);
/* Writes "<scratch dir>/<name>XXXXXX" into `out` (TEST_PATH_MAX bytes), ready for mkstemp or
 * mkdtemp. The scratch dir is /dev/shm when writable (embedding files are 16 MB and saved with
 * fsync), else $TMPDIR or /tmp. */
char *test_scratch_template(char *out, const char *name);
/* Initialises ONNX Runtime the way a host would (NULL: SAM2_ONNXRUNTIME_PATH) or exits. */
void test_init_runtime(void);

/* ---- Running under valgrind (tools/ci/test-valgrind.sh sets SAM2_TEST_UNDER_VALGRIND=1) ---- */

/* 1 under valgrind: every code path still runs, with fewer repetitions (valgrind runs ONNX
 * Runtime ~50x slower), and probes that read freed memory on purpose are skipped. */
int test_under_valgrind(void);

/* Opens "$SAM2_REPORT_DIR/<file>" for writing the figures scripts/reliability.sh prints, or
 * returns NULL when SAM2_REPORT_DIR is not set. */
FILE *test_report_file(const char *file);

/* ---- Images ---- */

typedef struct test_image {
    uint32_t width;
    uint32_t height;
    uint32_t channels; /* 3 for P6, 1 for P5 */
    uint8_t *data;     /* width * height * channels bytes, tightly packed */
} test_image;

/* Reads a binary PPM (P6) or PGM (P5) with maxval 255; returns 0 on success. */
int test_read_pnm(const char *path, test_image *out);
/* Reads a whole file into a malloc'd buffer (one spare byte; `*len` may be 0), or exits. */
uint8_t *test_read_file(const char *path, size_t *len);
/* Reads a file of $SAM2_TESTDATA, or exits. */
test_image test_load_image(const char *file);
void test_image_free(test_image *image);

/* Repacks an RGB image as `format` (SAM2_PIXEL_*) with rows `stride` bytes apart (0: packed).
 * Padding bytes are filled with 0xA5. Returns a malloc'd buffer and its length. */
uint8_t *test_convert(const test_image *rgb, uint32_t format, size_t stride, size_t *out_len);

/* ---- Masks ---- */

/* IoU of two masks of n bytes (non-zero = foreground). Two empty masks give 1. */
double test_iou(const uint8_t *a, const uint8_t *b, size_t n);
/* Number of foreground pixels. */
uint64_t test_area(const uint8_t *m, size_t n);
/* Inclusive box {x_min, y_min, x_max, y_max} of a mask and its area ({0,0,0,0} and 0 if empty). */
void test_bounds(const uint8_t *m, uint32_t width, uint32_t height, uint32_t box[4],
                 uint64_t *area);

/* ---- The shapes of testdata/shapes.ppm (values copied from testdata/shapes.json). ---- */

enum { SHAPE_COUNT = 5 };

typedef struct test_shape {
    const char *name;
    float click[2];  /* x, y: a pixel well inside the shape */
    float bbox[4];   /* x1, y1, x2, y2: inclusive pixel bounds */
    int twin;        /* index of the same-coloured twin, or -1 */
} test_shape;

extern const test_shape TEST_SHAPES[SHAPE_COUNT];

/* Indices into TEST_SHAPES. */
enum { RED_DISC = 0, GREEN_RECT = 1, YELLOW_TRIANGLE = 2, TWIN_LEFT = 3, TWIN_RIGHT = 4 };

/* Ground-truth masks (0/1 bytes) of every shape, loaded from shapes_<name>.pgm. */
typedef struct test_truth {
    uint32_t width, height;
    uint8_t *mask[SHAPE_COUNT];
} test_truth;

test_truth test_load_truth(void);
void test_truth_free(test_truth *truth);
/* What a plain click in shape i selects: the shape, or the union with its twin (malloc'd). */
uint8_t *test_click_truth(const test_truth *truth, int i);

/* ---- Library shortcuts that exit on failure ---- */

/* The model pairs the tests run on: "tiny_a", "tiny_b", "tiny_c", "tiny_a_fp16". */
enum { PAIR_COUNT = 4 };
extern const char *const TEST_PAIRS[PAIR_COUNT];

sam2_encoder *test_open_encoder(const char *pair);
/* A predictor for `pair`'s decoder that accepts embeddings of `encoder` (may be NULL). */
sam2_predictor *test_open_predictor(const sam2_encoder *encoder, const char *pair);
sam2_embedding *test_encode(const sam2_encoder *encoder, const test_image *rgb);

/* The four modules of the generated tracker ($SAM2_MODELS/track/, tools/models/gen_track_models.py):
 * image_encoder, memory_attention, image_decoder, memory_encoder, in sam2_tracker_new's order. */
enum { TRACK_MODULES = 4 };
void test_track_paths(char out[TRACK_MODULES][TEST_PATH_MAX]);
/* A tracker on those modules with `options` (NULL: the defaults), or exits. */
sam2_tracker *test_open_tracker(const sam2_tracker_options *options);

/* A prompt of `count` points (and no box, no mask). */
sam2_prompt test_points_prompt(const sam2_point *points, size_t count);
sam2_prompt test_box_prompt(float x1, float y1, float x2, float y2);

/* Predicts one prompt with default options and returns the result. */
sam2_masks *test_predict1(const sam2_predictor *predictor, const sam2_embedding *embedding,
                          const sam2_prompt *prompt);
/* Mask `index` of a result (exits on failure); `len` must equal width*height. */
const uint8_t *test_mask(const sam2_masks *masks, size_t index, size_t len);

#endif /* SAM2_TEST_COMMON_H */
