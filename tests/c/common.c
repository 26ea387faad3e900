#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
/* The Windows build of the suite (tools/ci/test-windows.sh, under Wine): the few POSIX calls it needs. */
#include <io.h>
#define access _access
#define W_OK 2
#else
#include <unistd.h>
#endif

/* ---- Checks ---- */

const char *test_last_error(void) {
    static _Thread_local char buf[16384];
    size_t needed = 0;
    sam2_status s = sam2_last_error_message(buf, sizeof buf, &needed);
    if (s != SAM2_OK) {
        snprintf(buf, sizeof buf, "(sam2_last_error_message failed: %s, needed %zu)",
                 test_status_name(s), needed);
    }
    return buf;
}

int test_last_error_contains(const char *needle) {
    const char *message = test_last_error();
    /* SAM2_TEST_VERBOSE=1 shows each message a test checks. */
    const char *verbose = getenv("SAM2_TEST_VERBOSE");
    if (verbose != NULL && verbose[0] == '1') printf("  [%s] %s\n", needle, message);
    return strstr(message, needle) != NULL;
}

void test_check_failed(const char *file, int line, const char *what) {
    fprintf(stderr, "%s:%d: CHECK failed: %s\n  last sam2 error: %s\n", file, line, what,
            test_last_error());
    fflush(stderr);
    exit(1);
}

void test_status_failed(const char *file, int line, const char *expr, sam2_status got,
                        sam2_status want) {
    fprintf(stderr, "%s:%d: %s\n  returned %s (%u), expected %s (%u)\n  last sam2 error: %s\n",
            file, line, expr, test_status_name(got), (unsigned)got, test_status_name(want),
            (unsigned)want, test_last_error());
    fflush(stderr);
    exit(1);
}

void test_message_failed(const char *file, int line, const char *needle) {
    fprintf(stderr, "%s:%d: the last error message does not mention \"%s\"\n  message: %s\n", file,
            line, needle, test_last_error());
    fflush(stderr);
    exit(1);
}

const char *test_status_name(sam2_status status) {
    switch (status) {
    case SAM2_OK: return "SAM2_OK";
    case SAM2_ERR_NULL_ARGUMENT: return "SAM2_ERR_NULL_ARGUMENT";
    case SAM2_ERR_INVALID_ARGUMENT: return "SAM2_ERR_INVALID_ARGUMENT";
    case SAM2_ERR_BUFFER_TOO_SMALL: return "SAM2_ERR_BUFFER_TOO_SMALL";
    case SAM2_ERR_RUNTIME_NOT_FOUND: return "SAM2_ERR_RUNTIME_NOT_FOUND";
    case SAM2_ERR_MODEL: return "SAM2_ERR_MODEL";
    case SAM2_ERR_IO: return "SAM2_ERR_IO";
    case SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE: return "SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE";
    case SAM2_ERR_EMBEDDING_FORMAT: return "SAM2_ERR_EMBEDDING_FORMAT";
    case SAM2_ERR_MODEL_MISMATCH: return "SAM2_ERR_MODEL_MISMATCH";
    case SAM2_ERR_ENVIRONMENT_CONFIGURATION: return "SAM2_ERR_ENVIRONMENT_CONFIGURATION";
    case SAM2_ERR_ONNXRUNTIME: return "SAM2_ERR_ONNXRUNTIME";
    case SAM2_ERR_PANIC: return "SAM2_ERR_PANIC";
    case SAM2_ERR_TIMEOUT: return "SAM2_ERR_TIMEOUT";
    case SAM2_ERR_CANCELLED: return "SAM2_ERR_CANCELLED";
    case SAM2_ERR_QUEUE_FULL: return "SAM2_ERR_QUEUE_FULL";
    case SAM2_ERR_OUT_OF_MEMORY: return "SAM2_ERR_OUT_OF_MEMORY";
    default: return "unknown";
    }
}

/* ---- Paths ---- */

#ifndef SAM2_TEST_MODELS
#define SAM2_TEST_MODELS "models"
#endif
#ifndef SAM2_TEST_TESTDATA
#define SAM2_TEST_TESTDATA "testdata"
#endif
#ifndef SAM2_TEST_ONNXRUNTIME
#define SAM2_TEST_ONNXRUNTIME ""
#endif

void test_default_environment(void) {
    setenv("SAM2_MODELS", SAM2_TEST_MODELS, 0);
    setenv("SAM2_TESTDATA", SAM2_TEST_TESTDATA, 0);
    if (SAM2_TEST_ONNXRUNTIME[0] != '\0') setenv("SAM2_ONNXRUNTIME_PATH", SAM2_TEST_ONNXRUNTIME, 0);
    setenv("ORT_DISABLE_TELEMETRY", "1", 0);
}

static char *join(char *out, const char *var, const char *fallback, const char *file) {
    const char *dir = getenv(var);
    if (dir == NULL || dir[0] == '\0') dir = fallback;
    int n = snprintf(out, TEST_PATH_MAX, "%s/%s", dir, file);
    if (n < 0 || n >= TEST_PATH_MAX) {
        fprintf(stderr, "path too long: %s/%s\n", dir, file);
        exit(1);
    }
    return out;
}

char *test_model_path(char *out, const char *file) {
    return join(out, "SAM2_MODELS", SAM2_TEST_MODELS, file);
}

char *test_data_path(char *out, const char *file) {
    return join(out, "SAM2_TESTDATA", SAM2_TEST_TESTDATA, file);
}

char *test_scratch_template(char *out, const char *name) {
#ifdef _WIN32
    const char *dir = getenv("TEMP");
    if (dir == NULL || dir[0] == '\0') dir = ".";
#else
    const char *dir = "/dev/shm";
    if (access(dir, W_OK) != 0) {
        dir = getenv("TMPDIR");
        if (dir == NULL || dir[0] == '\0') dir = "/tmp";
    }
#endif
    int n = snprintf(out, TEST_PATH_MAX, "%s/%sXXXXXX", dir, name);
    CHECK(n > 0 && n < TEST_PATH_MAX);
    return out;
}

void test_init_runtime(void) {
    CHECK_OK(sam2_runtime_init(NULL));
}

int test_under_valgrind(void) {
    const char *v = getenv("SAM2_TEST_UNDER_VALGRIND");
    return v != NULL && v[0] == '1';
}

FILE *test_report_file(const char *file) {
    const char *dir = getenv("SAM2_REPORT_DIR");
    if (dir == NULL || dir[0] == '\0') return NULL;
    char path[TEST_PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", dir, file);
    CHECK(n > 0 && n < TEST_PATH_MAX);
    FILE *f = fopen(path, "w");
    if (f == NULL) fprintf(stderr, "cannot write %s\n", path);
    return f;
}

/* ---- Images ---- */

static int read_field(FILE *f, unsigned long *value, char *magic) {
    int c = fgetc(f);
    for (;;) {
        while (c != EOF && isspace(c)) c = fgetc(f);
        if (c != '#') break;
        while (c != EOF && c != '\n') c = fgetc(f);
    }
    if (c == EOF) return -1;
    if (magic != NULL) {
        magic[0] = (char)c;
        c = fgetc(f);
        magic[1] = (char)c;
        magic[2] = '\0';
        c = fgetc(f);
        return (c != EOF && isspace(c)) ? 0 : -1;
    }
    unsigned long v = 0;
    if (!isdigit(c)) return -1;
    while (c != EOF && isdigit(c)) {
        v = v * 10 + (unsigned long)(c - '0');
        if (v > 1000000) return -1;
        c = fgetc(f);
    }
    /* Exactly one whitespace byte ends the last header field; it has been consumed. */
    if (c == EOF || !isspace(c)) return -1;
    *value = v;
    return 0;
}

int test_read_pnm(const char *path, test_image *out) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return -1;
    char magic[3];
    unsigned long width, height, maxval;
    int ok = read_field(f, NULL, magic) == 0 && read_field(f, &width, NULL) == 0 &&
             read_field(f, &height, NULL) == 0 && read_field(f, &maxval, NULL) == 0;
    uint32_t channels = 0;
    if (ok && strcmp(magic, "P6") == 0) channels = 3;
    if (ok && strcmp(magic, "P5") == 0) channels = 1;
    if (!ok || channels == 0 || maxval != 255 || width == 0 || height == 0) {
        fclose(f);
        return -1;
    }
    size_t len = (size_t)width * height * channels;
    uint8_t *data = malloc(len);
    if (data == NULL || fread(data, 1, len, f) != len) {
        free(data);
        fclose(f);
        return -1;
    }
    fclose(f);
    out->width = (uint32_t)width;
    out->height = (uint32_t)height;
    out->channels = channels;
    out->data = data;
    return 0;
}

uint8_t *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    CHECK(n >= 0);
    rewind(f);
    uint8_t *bytes = malloc((size_t)n + 1);
    CHECK(bytes != NULL);
    CHECK(fread(bytes, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return bytes;
}

test_image test_load_image(const char *file) {
    char path[TEST_PATH_MAX];
    test_image image = {0, 0, 0, NULL};
    if (test_read_pnm(test_data_path(path, file), &image) != 0) {
        fprintf(stderr, "cannot read %s (set SAM2_TESTDATA)\n", path);
        exit(1);
    }
    return image;
}

void test_image_free(test_image *image) {
    free(image->data);
    image->data = NULL;
}

uint8_t *test_convert(const test_image *rgb, uint32_t format, size_t stride, size_t *out_len) {
    size_t bpp = (format == SAM2_PIXEL_RGBA || format == SAM2_PIXEL_BGRA) ? 4
                 : format == SAM2_PIXEL_GRAY                             ? 1
                                                                         : 3;
    if (stride == 0) stride = rgb->width * bpp;
    size_t len = stride * rgb->height;
    uint8_t *out = malloc(len);
    CHECK(out != NULL);
    memset(out, 0xA5, len);
    for (uint32_t y = 0; y < rgb->height; y++) {
        for (uint32_t x = 0; x < rgb->width; x++) {
            const uint8_t *s = rgb->data + ((size_t)y * rgb->width + x) * 3;
            uint8_t *d = out + (size_t)y * stride + x * bpp;
            switch (format) {
            case SAM2_PIXEL_RGB: d[0] = s[0]; d[1] = s[1]; d[2] = s[2]; break;
            case SAM2_PIXEL_BGR: d[0] = s[2]; d[1] = s[1]; d[2] = s[0]; break;
            case SAM2_PIXEL_RGBA: d[0] = s[0]; d[1] = s[1]; d[2] = s[2]; d[3] = 0x37; break;
            case SAM2_PIXEL_BGRA: d[0] = s[2]; d[1] = s[1]; d[2] = s[0]; d[3] = 0x37; break;
            default: d[0] = (uint8_t)((s[0] * 77 + s[1] * 150 + s[2] * 29) >> 8); break;
            }
        }
    }
    *out_len = len;
    return out;
}

/* ---- Masks ---- */

double test_iou(const uint8_t *a, const uint8_t *b, size_t n) {
    size_t inter = 0, uni = 0;
    for (size_t i = 0; i < n; i++) {
        int x = a[i] != 0, y = b[i] != 0;
        inter += (size_t)(x && y);
        uni += (size_t)(x || y);
    }
    return uni == 0 ? 1.0 : (double)inter / (double)uni;
}

uint64_t test_area(const uint8_t *m, size_t n) {
    uint64_t area = 0;
    for (size_t i = 0; i < n; i++) area += m[i] != 0;
    return area;
}

void test_bounds(const uint8_t *m, uint32_t width, uint32_t height, uint32_t box[4],
                 uint64_t *area) {
    uint32_t x0 = UINT32_MAX, y0 = UINT32_MAX, x1 = 0, y1 = 0;
    uint64_t n = 0;
    for (uint32_t y = 0; y < height; y++) {
        for (uint32_t x = 0; x < width; x++) {
            if (m[(size_t)y * width + x] == 0) continue;
            n++;
            if (x < x0) x0 = x;
            if (y < y0) y0 = y;
            if (x > x1) x1 = x;
            if (y > y1) y1 = y;
        }
    }
    if (n == 0) x0 = y0 = x1 = y1 = 0;
    box[0] = x0;
    box[1] = y0;
    box[2] = x1;
    box[3] = y1;
    *area = n;
}

/* ---- Shapes: copied from testdata/shapes.json ("click" and "bbox" of each shape). ---- */

const test_shape TEST_SHAPES[SHAPE_COUNT] = {
    {"red_disc", {100, 112}, {44, 56, 155, 167}, -1},
    {"green_rect", {258, 93}, {200, 45, 315, 140}, -1},
    {"yellow_triangle", {430, 118}, {360, 29, 499, 171}, -1},
    {"twin_left", {106, 282}, {60, 236, 151, 327}, TWIN_RIGHT},
    {"twin_right", {410, 282}, {364, 236, 455, 327}, TWIN_LEFT},
};

test_truth test_load_truth(void) {
    test_truth truth;
    memset(&truth, 0, sizeof truth);
    for (int i = 0; i < SHAPE_COUNT; i++) {
        char file[256];
        snprintf(file, sizeof file, "shapes_%s.pgm", TEST_SHAPES[i].name);
        test_image pgm = test_load_image(file);
        CHECK(pgm.channels == 1);
        if (i == 0) {
            truth.width = pgm.width;
            truth.height = pgm.height;
        }
        CHECK(pgm.width == truth.width && pgm.height == truth.height);
        size_t n = (size_t)pgm.width * pgm.height;
        for (size_t k = 0; k < n; k++) pgm.data[k] = pgm.data[k] > 127;
        truth.mask[i] = pgm.data;
    }
    return truth;
}

void test_truth_free(test_truth *truth) {
    for (int i = 0; i < SHAPE_COUNT; i++) {
        free(truth->mask[i]);
        truth->mask[i] = NULL;
    }
}

uint8_t *test_click_truth(const test_truth *truth, int i) {
    size_t n = (size_t)truth->width * truth->height;
    uint8_t *m = malloc(n);
    CHECK(m != NULL);
    memcpy(m, truth->mask[i], n);
    int twin = TEST_SHAPES[i].twin;
    if (twin >= 0) {
        for (size_t k = 0; k < n; k++) m[k] |= truth->mask[twin][k];
    }
    return m;
}

/* ---- Library shortcuts ---- */

const char *const TEST_PAIRS[PAIR_COUNT] = {"tiny_a", "tiny_b", "tiny_c", "tiny_a_fp16"};

sam2_encoder *test_open_encoder(const char *pair) {
    char file[256], path[TEST_PATH_MAX];
    snprintf(file, sizeof file, "%s_encoder.onnx", pair);
    sam2_encoder *encoder = NULL;
    CHECK_OK(sam2_encoder_new(test_model_path(path, file), NULL, &encoder));
    CHECK(encoder != NULL);
    return encoder;
}

sam2_predictor *test_open_predictor(const sam2_encoder *encoder, const char *pair) {
    char file[256], path[TEST_PATH_MAX];
    snprintf(file, sizeof file, "%s_decoder.onnx", pair);
    sam2_predictor *predictor = NULL;
    CHECK_OK(sam2_predictor_new(encoder, test_model_path(path, file), NULL, &predictor));
    CHECK(predictor != NULL);
    return predictor;
}

void test_track_paths(char out[TRACK_MODULES][TEST_PATH_MAX]) {
    static const char *const files[TRACK_MODULES] = {
        "track/image_encoder.onnx", "track/memory_attention.onnx", "track/image_decoder.onnx",
        "track/memory_encoder.onnx"};
    for (int i = 0; i < TRACK_MODULES; i++) test_model_path(out[i], files[i]);
}

sam2_tracker *test_open_tracker(const sam2_tracker_options *options) {
    char p[TRACK_MODULES][TEST_PATH_MAX];
    test_track_paths(p);
    sam2_tracker *tracker = NULL;
    CHECK_OK(sam2_tracker_new(p[0], p[1], p[2], p[3], options, &tracker));
    CHECK(tracker != NULL);
    return tracker;
}

sam2_embedding *test_encode(const sam2_encoder *encoder, const test_image *rgb) {
    CHECK(rgb->channels == 3);
    sam2_embedding *embedding = NULL;
    CHECK_OK(sam2_encode(encoder, rgb->data, (size_t)rgb->width * rgb->height * 3, rgb->width,
                         rgb->height, 0, SAM2_PIXEL_RGB, &embedding));
    CHECK(embedding != NULL);
    return embedding;
}

sam2_prompt test_points_prompt(const sam2_point *points, size_t count) {
    sam2_prompt p;
    memset(&p, 0, sizeof p);
    p.points = points;
    p.point_count = count;
    return p;
}

sam2_prompt test_box_prompt(float x1, float y1, float x2, float y2) {
    sam2_prompt p;
    memset(&p, 0, sizeof p);
    p.has_box = 1;
    p.box[0] = x1;
    p.box[1] = y1;
    p.box[2] = x2;
    p.box[3] = y2;
    return p;
}

sam2_masks *test_predict1(const sam2_predictor *predictor, const sam2_embedding *embedding,
                          const sam2_prompt *prompt) {
    sam2_masks *masks = NULL;
    CHECK_OK(sam2_predict(predictor, embedding, prompt, 1, NULL, &masks));
    CHECK(masks != NULL);
    return masks;
}

const uint8_t *test_mask(const sam2_masks *masks, size_t index, size_t len) {
    const uint8_t *data = NULL;
    size_t got = 0;
    CHECK_OK(sam2_masks_mask(masks, index, &data, &got));
    CHECK(data != NULL);
    CHECK(got == len);
    return data;
}
