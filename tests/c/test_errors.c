/*
 * Every status the pipeline can produce today, each with the message a host would show: the
 * message names the argument (or the file, or the models) at fault. On every failure the
 * out-params are left untouched (pre-filled with a sentinel and checked).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* Out-param sentinels: a failed call must not write them. */
#define SENTINEL_PTR ((void *)(uintptr_t)0x5a5a5a5aU)
static sam2_encoder *const ENCODER_SENTINEL = SENTINEL_PTR;
static sam2_predictor *const PREDICTOR_SENTINEL = SENTINEL_PTR;
static sam2_embedding *const EMBEDDING_SENTINEL = SENTINEL_PTR;
static sam2_masks *const MASKS_SENTINEL = SENTINEL_PTR;

static test_image image;
static sam2_encoder *encoder_a;
static sam2_predictor *predictor_a;
static sam2_embedding *embedding_a;

/* ---- SAM2_ERR_MODEL ---- */

static void expect_encoder_fails(const char *path, sam2_status want, const char *needle) {
    sam2_encoder *out = ENCODER_SENTINEL;
    CHECK_FAILS(sam2_encoder_new(path, NULL, &out), want, needle);
    CHECK(out == ENCODER_SENTINEL);
    CHECK_MESSAGE(path);
}

static void expect_predictor_fails(const char *path, sam2_status want, const char *needle) {
    sam2_predictor *out = PREDICTOR_SENTINEL;
    CHECK_FAILS(sam2_predictor_new(NULL, path, NULL, &out), want, needle);
    CHECK(out == PREDICTOR_SENTINEL);
    CHECK_MESSAGE(path);
}

static void model_errors(void) {
    char path[TEST_PATH_MAX];

    /* A file that does not exist. */
    test_model_path(path, "no_such_encoder.onnx");
    expect_encoder_fails(path, SAM2_ERR_MODEL, "cannot be read");
    test_model_path(path, "no_such_decoder.onnx");
    expect_predictor_fails(path, SAM2_ERR_MODEL, "cannot be read");

    /* A file that is not ONNX (the test image) and an empty file. */
    test_data_path(path, "shapes.ppm");
    expect_encoder_fails(path, SAM2_ERR_MODEL, "not a readable ONNX model");
    expect_predictor_fails(path, SAM2_ERR_MODEL, "not a readable ONNX model");
    char empty[TEST_PATH_MAX];
    int fd = mkstemp(test_scratch_template(empty, "sam2_test_empty_"));
    CHECK(fd >= 0);
    close(fd);
    expect_encoder_fails(empty, SAM2_ERR_MODEL, "empty");
    unlink(empty);

    /* Valid ONNX that is not the expected SAM2 part: the message lists the names expected. */
    test_model_path(path, "tiny_a_decoder.onnx");
    expect_encoder_fails(path, SAM2_ERR_MODEL, "not a recognised SAM2 encoder");
    CHECK_MESSAGE("high_res_feats_0");  /* samexporter's outputs */
    CHECK_MESSAGE("image_embeddings");  /* ONNX Runtime's outputs */
    CHECK_MESSAGE("iou_predictions");   /* what was found */
    test_model_path(path, "tiny_c_encoder.onnx");
    expect_predictor_fails(path, SAM2_ERR_MODEL, "not a recognised SAM2 decoder");
    CHECK_MESSAGE("point_coords");
    CHECK_MESSAGE("image_features_0");

    /* A directory: the operating system refuses to read it. */
    test_model_path(path, "");
    expect_encoder_fails(path, SAM2_ERR_IO, "reading model");
}

/* ---- SAM2_ERR_INVALID_ARGUMENT ---- */

static void encode_fails(const uint8_t *pixels, size_t len, uint32_t w, uint32_t h, size_t stride,
                         uint32_t format, const char *needle) {
    sam2_embedding *out = EMBEDDING_SENTINEL;
    CHECK_FAILS(sam2_encode(encoder_a, pixels, len, w, h, stride, format, &out),
                SAM2_ERR_INVALID_ARGUMENT, needle);
    CHECK(out == EMBEDDING_SENTINEL);
}

static void image_errors(void) {
    const uint8_t *px = image.data;
    uint32_t w = image.width, h = image.height;
    size_t len = (size_t)w * h * 3;
    encode_fails(px, len, w, h, 0, 5, "pixel_format");
    encode_fails(px, len, w, h, 0, 0xFFFFFFFFu, "pixel_format");
    encode_fails(px, len, w, h, (size_t)w * 3 - 1, SAM2_PIXEL_RGB, "stride");
    encode_fails(px, len, w, h, 1, SAM2_PIXEL_RGB, "stride");
    encode_fails(px, len - 1, w, h, 0, SAM2_PIXEL_RGB, "pixels");
    encode_fails(px, len, w, h, 0, SAM2_PIXEL_RGBA, "pixels"); /* RGB buffer read as RGBA */
    encode_fails(px, len, w, h, (size_t)w * 3 + 1, SAM2_PIXEL_RGB, "pixels");
    encode_fails(px, len, 0, h, 0, SAM2_PIXEL_RGB, "width");
    encode_fails(px, len, w, 0, 0, SAM2_PIXEL_RGB, "height");
    encode_fails(px, 0, w, h, 0, SAM2_PIXEL_RGB, "pixels");
}

static void predict_fails(const sam2_prompt *prompts, size_t count,
                          const sam2_predict_options *options, const char *needle) {
    sam2_masks *out = MASKS_SENTINEL;
    CHECK_FAILS(sam2_predict(predictor_a, embedding_a, prompts, count, options, &out),
                SAM2_ERR_INVALID_ARGUMENT, needle);
    CHECK(out == MASKS_SENTINEL);
}

static void predict_fails_on(const sam2_embedding *embedding, const sam2_prompt *prompt,
                             const char *needle) {
    sam2_masks *out = MASKS_SENTINEL;
    CHECK_FAILS(sam2_predict(predictor_a, embedding, prompt, 1, NULL, &out),
                SAM2_ERR_INVALID_ARGUMENT, needle);
    CHECK(out == MASKS_SENTINEL);
}

static void point_fails(float x, float y, int32_t label, const char *needle) {
    sam2_point pt = {x, y, label};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    predict_fails(&prompt, 1, NULL, needle);
}

static void box_fails(float x1, float y1, float x2, float y2, const char *needle) {
    sam2_prompt prompt = test_box_prompt(x1, y1, x2, y2);
    predict_fails(&prompt, 1, NULL, needle);
}

static void prompt_errors(void) {
    float w = (float)image.width, h = (float)image.height;
    /* Points outside the image, and not numbers. */
    point_fails(w + 1, 10, SAM2_POINT_POSITIVE, "points");
    CHECK_MESSAGE("outside");
    point_fails(10, h + 0.5f, SAM2_POINT_POSITIVE, "points");
    point_fails(-1, 10, SAM2_POINT_POSITIVE, "points");
    point_fails(NAN, 10, SAM2_POINT_POSITIVE, "points");
    CHECK_MESSAGE("finite");
    point_fails(10, INFINITY, SAM2_POINT_POSITIVE, "points");
    point_fails(-INFINITY, 10, SAM2_POINT_NEGATIVE, "points");
    /* Labels other than SAM2_POINT_POSITIVE (1) / SAM2_POINT_NEGATIVE (0). */
    point_fails(10, 10, 2, "label");
    point_fails(10, 10, -1, "label");

    /* Boxes: reversed, not numbers, outside. */
    box_fails(100, 50, 40, 150, "box");
    CHECK_MESSAGE("x2 < x1");
    box_fails(40, 150, 100, 50, "box");
    box_fails(NAN, 0, 10, 10, "box");
    box_fails(0, 0, INFINITY, 10, "box");
    box_fails(0, 0, w + 10, 10, "box");

    /* An empty prompt: no point, no box. */
    sam2_prompt empty;
    memset(&empty, 0, sizeof empty);
    predict_fails(&empty, 1, NULL, "prompt");
    CHECK_MESSAGE("empty");

    /* No prompt at all. */
    sam2_point pt = {10, 10, SAM2_POINT_POSITIVE};
    sam2_prompt good = test_points_prompt(&pt, 1);
    predict_fails(&good, 0, NULL, "prompt_count");

    /* One bad prompt in a batch fails the whole call. */
    sam2_prompt batch[3] = {good, good, empty};
    predict_fails(batch, 3, NULL, "prompt");

    /* mask_input of the wrong length, or holding NaN. */
    static float logits[65536];
    sam2_prompt masked = good;
    masked.mask_input = logits;
    masked.mask_input_len = 100;
    predict_fails(&masked, 1, NULL, "mask_input");
    CHECK_MESSAGE("65536");
    masked.mask_input_len = 65537;
    predict_fails(&masked, 1, NULL, "mask_input");
    logits[1234] = NAN;
    masked.mask_input_len = 65536;
    predict_fails(&masked, 1, NULL, "mask_input");
    logits[1234] = 0;

    /* Predict options: struct_size and multimask. */
    sam2_predict_options options;
    CHECK_OK(sam2_predict_options_init(&options, sizeof options));
    options.multimask = 2;
    predict_fails(&good, 1, &options, "multimask");
    CHECK_OK(sam2_predict_options_init(&options, sizeof options));
    options.struct_size = 0;
    predict_fails(&good, 1, &options, "struct_size");
    options.struct_size = sizeof options + 4;
    predict_fails(&good, 1, &options, "struct_size");
}

static void options_errors(void) {
    char enc[TEST_PATH_MAX], dec[TEST_PATH_MAX];
    test_model_path(enc, "tiny_a_encoder.onnx");
    test_model_path(dec, "tiny_a_decoder.onnx");

    sam2_encoder_options eo;
    sam2_encoder *e = ENCODER_SENTINEL;
    CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));
    eo.struct_size = 4;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_INVALID_ARGUMENT, "struct_size");
    CHECK_MESSAGE("options");
    CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));
    eo.output_target = 7;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_INVALID_ARGUMENT, "output_target");
    CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));
    eo.intra_threads = 100000;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_INVALID_ARGUMENT, "intra_threads");
    CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));
    eo.weight_sharing = 2;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_INVALID_ARGUMENT, "weight_sharing");
    CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));
    eo.graph_optimization = 3;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_INVALID_ARGUMENT, "graph_optimization");
    /* A size between two published layouts is not a version. */
    CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));
    eo.struct_size = 20;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_INVALID_ARGUMENT, "struct_size");
    CHECK_FAILS(sam2_encoder_options_init(&eo, 20), SAM2_ERR_INVALID_ARGUMENT, "struct_size");
    CHECK(e == ENCODER_SENTINEL);

    sam2_predictor_options po;
    sam2_predictor *p = PREDICTOR_SENTINEL;
    CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
    po.struct_size = sizeof po * 2;
    CHECK_FAILS(sam2_predictor_new(NULL, dec, &po, &p), SAM2_ERR_INVALID_ARGUMENT, "struct_size");
    CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
    po.intra_threads = 100000;
    CHECK_FAILS(sam2_predictor_new(NULL, dec, &po, &p), SAM2_ERR_INVALID_ARGUMENT,
                "intra_threads");
    CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
    po.pool_size = 65;
    CHECK_FAILS(sam2_predictor_new(NULL, dec, &po, &p), SAM2_ERR_INVALID_ARGUMENT, "pool_size");
    CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
    po.weight_sharing = 9;
    CHECK_FAILS(sam2_predictor_new(NULL, dec, &po, &p), SAM2_ERR_INVALID_ARGUMENT,
                "weight_sharing");
    CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
    po.encoder_fingerprint = "not a fingerprint";
    CHECK_FAILS(sam2_predictor_new(NULL, dec, &po, &p), SAM2_ERR_INVALID_ARGUMENT,
                "encoder_fingerprint");
    CHECK_MESSAGE("not a fingerprint");
    /* A fingerprint that contradicts the encoder given alongside it. */
    po.encoder_fingerprint = "sam2fp1-0123456789abcdef";
    CHECK_FAILS(sam2_predictor_new(encoder_a, dec, &po, &p), SAM2_ERR_INVALID_ARGUMENT,
                "encoder_fingerprint");
    CHECK_MESSAGE("contradicts");
    CHECK(p == PREDICTOR_SENTINEL);

    /* Log level above SAM2_LOG_ERROR. */
    CHECK_FAILS(sam2_set_log_callback(NULL, NULL, SAM2_LOG_ERROR + 1), SAM2_ERR_INVALID_ARGUMENT,
                "min_level");

    /* An empty runtime path (NULL means "search"). */
    CHECK_FAILS(sam2_runtime_init(""), SAM2_ERR_INVALID_ARGUMENT, "onnxruntime_path");
}

static void result_errors(void) {
    sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    sam2_masks *masks = test_predict1(predictor_a, embedding_a, &prompt);
    const uint8_t *data = SENTINEL_PTR;
    size_t len = 777;
    CHECK_FAILS(sam2_masks_mask(masks, 1, &data, &len), SAM2_ERR_INVALID_ARGUMENT, "index");
    CHECK(data == SENTINEL_PTR && len == 777);
    CHECK_FAILS(sam2_masks_mask(masks, (size_t)-1, &data, &len), SAM2_ERR_INVALID_ARGUMENT,
                "index");
    float score = 42.0f;
    CHECK_FAILS(sam2_masks_score(masks, 1, &score), SAM2_ERR_INVALID_ARGUMENT, "index");
    CHECK(score == 42.0f);
    uint32_t box[4] = {7, 7, 7, 7};
    uint64_t area = 777;
    CHECK_FAILS(sam2_masks_box(masks, 1, box, &area), SAM2_ERR_INVALID_ARGUMENT, "index");
    CHECK(box[0] == 7 && box[1] == 7 && box[2] == 7 && box[3] == 7 && area == 777);
    const float *logits = SENTINEL_PTR;
    uint32_t side = 777;
    CHECK_FAILS(sam2_masks_low_res(masks, 1, &logits, &len, &side), SAM2_ERR_INVALID_ARGUMENT,
                "index");
    CHECK(logits == SENTINEL_PTR && len == 777 && side == 777);
    sam2_masks_free(masks);
}

/* ---- SAM2_ERR_MODEL_MISMATCH ---- */

static void fingerprint_of(const sam2_encoder *encoder, char out[64]) {
    size_t needed = 0;
    CHECK_OK(sam2_encoder_fingerprint(encoder, out, 64, &needed));
    CHECK(needed == strlen(out) + 1);
    CHECK(strncmp(out, "sam2fp1-", 8) == 0 && strlen(out) == 8 + 16);
}

static void mismatch_errors(void) {
    sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    sam2_masks *out = MASKS_SENTINEL;

    /* tiny_a's embedding to a tiny_b predictor bound to the tiny_b encoder: same layout, other
     * model. The message names both fingerprints. */
    sam2_encoder *encoder_b = test_open_encoder("tiny_b");
    sam2_predictor *predictor_b = test_open_predictor(encoder_b, "tiny_b");
    char fp_a[64], fp_b[64];
    fingerprint_of(encoder_a, fp_a);
    fingerprint_of(encoder_b, fp_b);
    CHECK(strcmp(fp_a, fp_b) != 0);
    CHECK_FAILS(sam2_predict(predictor_b, embedding_a, &prompt, 1, NULL, &out),
                SAM2_ERR_MODEL_MISMATCH, fp_a);
    CHECK_MESSAGE(fp_b);
    CHECK(out == MASKS_SENTINEL);

    /* The same, with the fingerprint given as an option instead of an encoder. */
    sam2_predictor_options po;
    CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
    po.encoder_fingerprint = fp_b;
    char dec[TEST_PATH_MAX];
    sam2_predictor *predictor_fp = NULL;
    CHECK_OK(sam2_predictor_new(NULL, test_model_path(dec, "tiny_a_decoder.onnx"), &po,
                                &predictor_fp));
    CHECK_FAILS(sam2_predict(predictor_fp, embedding_a, &prompt, 1, NULL, &out),
                SAM2_ERR_MODEL_MISMATCH, fp_a);
    CHECK(out == MASKS_SENTINEL);
    sam2_predictor_free(predictor_fp);

    /* A samexporter embedding to an ONNX Runtime decoder, fingerprint unchecked. */
    sam2_predictor *predictor_c = test_open_predictor(NULL, "tiny_c");
    CHECK_FAILS(sam2_predict(predictor_c, embedding_a, &prompt, 1, NULL, &out),
                SAM2_ERR_MODEL_MISMATCH, "samexporter");
    CHECK_MESSAGE("ONNX Runtime export");
    CHECK(out == MASKS_SENTINEL);

    /* And the reverse: an ONNX Runtime embedding to a samexporter decoder. */
    sam2_encoder *encoder_c = test_open_encoder("tiny_c");
    sam2_embedding *embedding_c = test_encode(encoder_c, &image);
    sam2_predictor *predictor_a_free = test_open_predictor(NULL, "tiny_a");
    CHECK_FAILS(sam2_predict(predictor_a_free, embedding_c, &prompt, 1, NULL, &out),
                SAM2_ERR_MODEL_MISMATCH, "onnxruntime");
    CHECK(out == MASKS_SENTINEL);

    sam2_predictor_free(predictor_a_free);
    sam2_embedding_free(embedding_c);
    sam2_encoder_free(encoder_c);
    sam2_predictor_free(predictor_c);
    sam2_predictor_free(predictor_b);
    sam2_encoder_free(encoder_b);
}

/* ---- SAM2_ERR_ENVIRONMENT_CONFIGURATION ---- */

static void environment_errors(void) {
    /* ONNX Runtime is loaded; another file cannot replace it. */
    const char *other = "/nonexistent/other/libonnxruntime.so";
    CHECK_FAILS(sam2_runtime_init(other), SAM2_ERR_ENVIRONMENT_CONFIGURATION, other);
    CHECK_MESSAGE(getenv("SAM2_ONNXRUNTIME_PATH"));
    CHECK(strcmp(sam2_runtime_version(), "1.31.1") == 0);
}

/* ---- Embedding files: SAM2_ERR_IO, _EMBEDDING_NOT_SERIALIZABLE, _EMBEDDING_FORMAT ---- */

static int file_exists(const char *path) {
    return access(path, F_OK) == 0;
}

/* A fresh path in a fresh scratch directory (the caller removes both). */
static void scratch_path(char dir[TEST_PATH_MAX], char path[TEST_PATH_MAX]) {
    CHECK(mkdtemp(test_scratch_template(dir, "sam2_test_errors_")) != NULL);
    CHECK(snprintf(path, TEST_PATH_MAX, "%s/embedding.sam2", dir) < TEST_PATH_MAX);
}

static void load_fails(const char *path, const sam2_predictor *predictor, uint32_t placement,
                       sam2_status want, const char *needle) {
    sam2_embedding *out = EMBEDDING_SENTINEL;
    CHECK_FAILS(sam2_embedding_load(path, predictor, placement, &out), want, needle);
    CHECK(out == EMBEDDING_SENTINEL);
}

static void file_errors(void) {
    char dir[TEST_PATH_MAX], path[TEST_PATH_MAX];
    scratch_path(dir, path);

    /* OS failures name the path. */
    const char *nowhere = "/nonexistent/dir/embedding.sam2";
    CHECK_FAILS(sam2_embedding_save(embedding_a, nowhere), SAM2_ERR_IO, nowhere);
    CHECK_FAILS(sam2_embedding_save(embedding_a, dir), SAM2_ERR_IO, dir); /* a directory */
    load_fails(path, NULL, SAM2_PLACE_HOST, SAM2_ERR_IO, path);          /* no such file */
    CHECK_FAILS(sam2_embedding_save(embedding_a, ""), SAM2_ERR_INVALID_ARGUMENT, "path");

    /* A device embedding cannot be saved: refused before anything is written. */
    sam2_embedding *device = NULL;
    CHECK_OK(sam2_test_embedding_simulate_device(embedding_a, "Cuda", 1, &device));
    CHECK_FAILS(sam2_embedding_save(device, path), SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE, "Cuda");
    CHECK_MESSAGE("sam2_embedding_to_host");
    CHECK(!file_exists(path));
    /* ...nor predicted on by a CPU predictor, nor copied to the host without a CUDA runtime. */
    sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    predict_fails_on(device, &prompt, "embedding");
    CHECK_MESSAGE("Cuda");
    sam2_embedding *host = EMBEDDING_SENTINEL;
    CHECK_FAILS(sam2_embedding_to_host(device, &host), SAM2_ERR_ENVIRONMENT_CONFIGURATION, "Cuda");
    CHECK(host == EMBEDDING_SENTINEL);
    sam2_embedding_free(device);

    /* Not an embedding file, truncated, and corrupted. */
    char other[TEST_PATH_MAX];
    load_fails(test_data_path(other, "shapes.ppm"), NULL, SAM2_PLACE_HOST,
               SAM2_ERR_EMBEDDING_FORMAT, "embedding file");
    CHECK_OK(sam2_embedding_save(embedding_a, path));
    size_t file_len = 0;
    uint8_t *bytes = test_read_file(path, &file_len);
    CHECK(file_len > 1000);
    long len = (long)file_len;
    FILE *f = NULL;

    char bad[TEST_PATH_MAX + 16];
    snprintf(bad, sizeof bad, "%s/bad.sam2", dir);
    const long cuts[] = {0, 7, 8, 100, len / 2, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        f = fopen(bad, "wb");
        CHECK(f != NULL);
        CHECK(fwrite(bytes, 1, (size_t)cuts[i], f) == (size_t)cuts[i]);
        fclose(f);
        load_fails(bad, NULL, SAM2_PLACE_HOST, SAM2_ERR_EMBEDDING_FORMAT, "embedding file");
    }
    /* One payload byte changed: the CRC catches it. */
    bytes[len - 1000] ^= 0x40;
    f = fopen(bad, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(bytes, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    load_fails(bad, NULL, SAM2_PLACE_HOST, SAM2_ERR_EMBEDDING_FORMAT, "embedding file");
    free(bytes);
    unlink(bad);

    /* Placement. */
    load_fails(path, NULL, 7, SAM2_ERR_INVALID_ARGUMENT, "placement");
    load_fails(path, NULL, SAM2_PLACE_DEVICE, SAM2_ERR_INVALID_ARGUMENT, "placement");

    unlink(path);
    rmdir(dir);
}

/* ---- Devices: SAM2_ERR_ENVIRONMENT_CONFIGURATION and bad provider requests ---- */

static void device_errors(void) {
    char enc[TEST_PATH_MAX], dec[TEST_PATH_MAX];
    test_model_path(enc, "tiny_a_encoder.onnx");
    test_model_path(dec, "tiny_a_decoder.onnx");

    /* A GPU provider this ONNX Runtime (a CPU-only build) lacks, with the FAIL policy. */
    sam2_provider cuda = {SAM2_PROVIDER_CUDA, 0, 0, SAM2_ARENA_NEXT_POWER_OF_TWO};
    sam2_encoder_options eo;
    CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));
    eo.providers = &cuda;
    eo.provider_count = 1;
    eo.on_device_mismatch = SAM2_ON_MISMATCH_FAIL;
    sam2_encoder *e = ENCODER_SENTINEL;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_ENVIRONMENT_CONFIGURATION,
                "CUDAExecutionProvider");
    CHECK(e == ENCODER_SENTINEL);
    sam2_predictor_options po;
    CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
    po.providers = &cuda;
    po.provider_count = 1;
    po.on_device_mismatch = SAM2_ON_MISMATCH_FAIL;
    sam2_predictor *p = PREDICTOR_SENTINEL;
    CHECK_FAILS(sam2_predictor_new(NULL, dec, &po, &p), SAM2_ERR_ENVIRONMENT_CONFIGURATION,
                "CUDAExecutionProvider");
    CHECK(p == PREDICTOR_SENTINEL);

    /* Malformed requests. */
    CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));
    sam2_provider req = {SAM2_PROVIDER_CPU, 0, 0, SAM2_ARENA_NEXT_POWER_OF_TWO};
    eo.providers = &req;
    eo.provider_count = 1;
    req.provider = 99;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_INVALID_ARGUMENT, "provider");
    req.provider = SAM2_PROVIDER_CUDA;
    req.device_id = -1;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_INVALID_ARGUMENT, "device_id");
    req.device_id = 0;
    req.arena_extend_strategy = 9;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_INVALID_ARGUMENT,
                "arena_extend_strategy");
    req.arena_extend_strategy = SAM2_ARENA_NEXT_POWER_OF_TWO;
    eo.on_device_mismatch = 2;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_INVALID_ARGUMENT, "on_device_mismatch");
    eo.on_device_mismatch = SAM2_ON_MISMATCH_FALLBACK;
    sam2_provider many[17];
    for (int i = 0; i < 17; i++) many[i] = (sam2_provider){SAM2_PROVIDER_CPU, 0, 0, 0};
    eo.providers = many;
    eo.provider_count = 17;
    CHECK_FAILS(sam2_encoder_new(enc, &eo, &e), SAM2_ERR_INVALID_ARGUMENT, "provider_count");
    CHECK(e == ENCODER_SENTINEL);
    po.on_device_mismatch = 5;
    CHECK_FAILS(sam2_predictor_new(NULL, dec, &po, &p), SAM2_ERR_INVALID_ARGUMENT,
                "on_device_mismatch");
    CHECK(p == PREDICTOR_SENTINEL);

    /* A fingerprint from a different encoder on load. */
    char dir[TEST_PATH_MAX], path[TEST_PATH_MAX];
    scratch_path(dir, path);
    CHECK_OK(sam2_embedding_save(embedding_a, path));
    sam2_encoder *encoder_b = test_open_encoder("tiny_b");
    sam2_predictor *predictor_b = test_open_predictor(encoder_b, "tiny_b");
    load_fails(path, predictor_b, SAM2_PLACE_HOST, SAM2_ERR_MODEL_MISMATCH, path);
    char fp_a[32];
    CHECK_OK(sam2_encoder_fingerprint(encoder_a, fp_a, sizeof fp_a, NULL));
    CHECK_MESSAGE(fp_a);
    load_fails(path, predictor_b, SAM2_PLACE_DEVICE, SAM2_ERR_MODEL_MISMATCH, path);
    sam2_predictor_free(predictor_b);
    sam2_encoder_free(encoder_b);
    unlink(path);
    rmdir(dir);
}

/* ---- SAM2_ERR_BUFFER_TOO_SMALL ---- */

static void buffer_errors(void) {
    /* Make a known last error. */
    sam2_encoder *e = ENCODER_SENTINEL;
    CHECK_STATUS(sam2_encoder_new("/nonexistent/for-the-buffer-test.onnx", NULL, &e),
                 SAM2_ERR_MODEL);
    char full[4096];
    size_t full_needed = 0;
    CHECK_OK(sam2_last_error_message(full, sizeof full, &full_needed));
    CHECK(full_needed == strlen(full) + 1 && full_needed > 2);
    CHECK(strstr(full, "for-the-buffer-test") != NULL);

    /* A 1-byte buffer: too small, the size needed is reported, the buffer is untouched. */
    char one = 'Z';
    size_t needed = 0;
    CHECK_STATUS(sam2_last_error_message(&one, 1, &needed), SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(needed == full_needed);
    CHECK(one == 'Z');
    /* One byte short, and a NULL buffer: the same. */
    char *short_buf = malloc(full_needed);
    CHECK(short_buf != NULL);
    memset(short_buf, 'Z', full_needed);
    needed = 0;
    CHECK_STATUS(sam2_last_error_message(short_buf, full_needed - 1, &needed),
                 SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(needed == full_needed);
    for (size_t i = 0; i < full_needed; i++) CHECK(short_buf[i] == 'Z');
    needed = 0;
    CHECK_STATUS(sam2_last_error_message(NULL, 0, &needed), SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(needed == full_needed);
    /* Exactly the size needed works; the message was not replaced by the failures above. */
    CHECK_OK(sam2_last_error_message(short_buf, full_needed, NULL));
    CHECK(strcmp(short_buf, full) == 0);
    free(short_buf);

    /* Fingerprints use the same convention; asking for a size leaves the last error as it was. */
    char fp[8];
    memset(fp, 'Z', sizeof fp);
    needed = 0;
    CHECK_STATUS(sam2_encoder_fingerprint(encoder_a, fp, sizeof fp, &needed),
                 SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK_MESSAGE("for-the-buffer-test.onnx");
    CHECK(needed == 8 + 16 + 1);
    CHECK(fp[0] == 'Z' && fp[7] == 'Z');
    needed = 0;
    CHECK_STATUS(sam2_embedding_fingerprint(embedding_a, fp, sizeof fp, &needed),
                 SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(needed == 8 + 16 + 1);
    CHECK(fp[0] == 'Z');
    char fp_full[25];
    CHECK_OK(sam2_embedding_fingerprint(embedding_a, fp_full, sizeof fp_full, NULL));
    CHECK(strlen(fp_full) == 24);
}

/* ---- sam2_status_str ---- */

static void status_strings(void) {
    for (uint32_t s = SAM2_OK; s <= SAM2_ERR_OUT_OF_MEMORY; s++) {
        const char *text = sam2_status_str(s);
        const char *name = test_status_name((sam2_status)s);
        CHECK(text != NULL);
        /* "SAM2_ERR_MODEL: ..." */
        size_t n = strlen(name);
        if (strncmp(text, name, n) != 0 || text[n] != ':' || strlen(text) < n + 4) {
            fprintf(stderr, "sam2_status_str(%u) = \"%s\", expected \"%s: ...\"\n", s, text,
                    name);
            exit(1);
        }
        CHECK(text == sam2_status_str(s)); /* static */
    }
    const uint32_t unknown[] = {SAM2_ERR_OUT_OF_MEMORY + 1, 100, 0x7FFFFFFFu, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *text = sam2_status_str(unknown[i]);
        CHECK(text != NULL);
        CHECK(strstr(text, "unknown") != NULL);
    }
}

int main(void) {
    test_default_environment();
    test_init_runtime();
    image = test_load_image("shapes.ppm");
    encoder_a = test_open_encoder("tiny_a");
    predictor_a = test_open_predictor(encoder_a, "tiny_a");
    embedding_a = test_encode(encoder_a, &image);

    model_errors();
    image_errors();
    prompt_errors();
    options_errors();
    result_errors();
    mismatch_errors();
    environment_errors();
    file_errors();
    device_errors();
    buffer_errors();
    status_strings();

    /* After all these failures the handles still work. */
    sam2_point pt = {TEST_SHAPES[1].click[0], TEST_SHAPES[1].click[1], SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    sam2_masks *masks = test_predict1(predictor_a, embedding_a, &prompt);
    sam2_masks_free(masks);

    sam2_embedding_free(embedding_a);
    sam2_predictor_free(predictor_a);
    sam2_encoder_free(encoder_a);
    test_image_free(&image);
    printf("test_errors: ok\n");
    return 0;
}
