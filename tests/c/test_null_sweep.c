/*
 * NULL sweep: every exported function is called with NULL in each of its pointer arguments in
 * turn (handles, out-params, strings, buffers, the arrays inside options and prompts). Each call
 * returns SAM2_ERR_NULL_ARGUMENT with a message naming that argument and leaves the other
 * out-params untouched, or does what the header documents for that NULL (_free(NULL) is a no-op,
 * NULL options are the defaults, a NULL buffer asks for the size needed, a NULL optional out-param
 * is skipped, ...), and nothing crashes.
 *
 * This program owns every NULL; test_bad_input.c owns every other bad value. Inputs are counted
 * per entry point (sweep.h); with SAM2_REPORT_DIR set the table goes to null_sweep.tsv, which
 * scripts/reliability.sh adds to test_bad_input's.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "sweep.h"
#include "track_clip.h"

#define SENTINEL_PTR ((void *)(uintptr_t)0x5a5a5a5aU)
#define NULL_ARG SAM2_ERR_NULL_ARGUMENT

static test_image image;
static size_t image_len;
static char encoder_path[TEST_PATH_MAX], decoder_path[TEST_PATH_MAX];

/* ---- Runtime, log callback, last error, options_init, _free ---- */

static int warnings;

static void on_log(uint32_t level, const char *message, void *user_data) {
    (void)message;
    (void)user_data;
    if (level == SAM2_LOG_WARNING) warnings++;
}

static void library(void) {
    /* NULL runtime path: discovery (SAM2_ONNXRUNTIME_PATH). */
    TRY("sam2_runtime_init", sam2_runtime_init(NULL), SAM2_OK, NULL);
    /* NULL callback removes it; NULL user_data is passed back as is. */
    TRY("sam2_set_log_callback", sam2_set_log_callback(NULL, NULL, SAM2_LOG_DEBUG), SAM2_OK, NULL);

    /* sam2_last_error_message: a NULL buffer is "too small" with the size needed; a NULL
     * `needed` is allowed. Neither changes the message. */
    const char *E = "sam2_last_error_message";
    CHECK_STATUS(sam2_encoder_new(NULL, NULL, NULL), NULL_ARG);
    size_t needed = 0;
    TRY_IF(E, sam2_last_error_message(NULL, 0, &needed), SAM2_ERR_BUFFER_TOO_SMALL, "`model_path`",
           needed > 1);
    size_t again = 0;
    TRY_IF(E, sam2_last_error_message(NULL, 100, &again), SAM2_ERR_BUFFER_TOO_SMALL,
           "`model_path`", again == needed);
    TRY(E, sam2_last_error_message(NULL, 0, NULL), SAM2_ERR_BUFFER_TOO_SMALL, "`model_path`");
    TRY(E, sam2_last_error_message(NULL, 4096, NULL), SAM2_ERR_BUFFER_TOO_SMALL, "`model_path`");
    char buf[256];
    TRY_IF(E, sam2_last_error_message(buf, sizeof buf, NULL), SAM2_OK, NULL,
           strlen(buf) + 1 == needed && strstr(buf, "model_path") != NULL);

    TRY("sam2_encoder_options_init", sam2_encoder_options_init(NULL, sizeof(sam2_encoder_options)),
        NULL_ARG, "`options`");
    TRY("sam2_predictor_options_init",
        sam2_predictor_options_init(NULL, sizeof(sam2_predictor_options)), NULL_ARG, "`options`");
    TRY("sam2_predict_options_init", sam2_predict_options_init(NULL, sizeof(sam2_predict_options)),
        NULL_ARG, "`options`");
    TRY("sam2_cache_options_init", sam2_cache_options_init(NULL, sizeof(sam2_cache_options)),
        NULL_ARG, "`options`");
    TRY("sam2_tracker_options_init",
        sam2_tracker_options_init(NULL, sizeof(sam2_tracker_options)), NULL_ARG, "`options`");
}

static void frees(void) {
    /* NULL is a no-op, without the warning a bad handle gets. */
    CHECK_OK(sam2_set_log_callback(on_log, NULL, SAM2_LOG_WARNING));
    warnings = 0;
    TRY_VALUE("sam2_encoder_free", (sam2_encoder_free(NULL), warnings == 0), NULL);
    TRY_VALUE("sam2_predictor_free", (sam2_predictor_free(NULL), warnings == 0), NULL);
    TRY_VALUE("sam2_embedding_free", (sam2_embedding_free(NULL), warnings == 0), NULL);
    TRY_VALUE("sam2_masks_free", (sam2_masks_free(NULL), warnings == 0), NULL);
    TRY_VALUE("sam2_cache_free", (sam2_cache_free(NULL), warnings == 0), NULL);
    TRY_VALUE("sam2_encode_job_free", (sam2_encode_job_free(NULL), warnings == 0), NULL);
    TRY_VALUE("sam2_tracker_free", (sam2_tracker_free(NULL), warnings == 0), NULL);
    TRY_VALUE("sam2_track_result_free", (sam2_track_result_free(NULL), warnings == 0), NULL);
    TRY_VALUE("sam2_everything_free", (sam2_everything_free(NULL), warnings == 0), NULL);
    CHECK_OK(sam2_set_log_callback(NULL, NULL, SAM2_LOG_WARNING));
}

/* ---- Encoders ---- */

static sam2_encoder *encoder_new(void) {
    const char *E = "sam2_encoder_new";
    sam2_encoder *out = SENTINEL_PTR;
    sam2_encoder_options options;
    CHECK_OK(sam2_encoder_options_init(&options, sizeof options));
    TRY_IF(E, sam2_encoder_new(NULL, &options, &out), NULL_ARG, "`model_path`",
           out == SENTINEL_PTR);
    TRY(E, sam2_encoder_new(encoder_path, &options, NULL), NULL_ARG, "`out`");
    /* A NULL provider array with a count. */
    options.provider_count = 1;
    TRY_IF(E, sam2_encoder_new(encoder_path, &options, &out), NULL_ARG, "`options.providers`",
           out == SENTINEL_PTR);
    /* NULL options: the defaults. */
    out = NULL;
    TRY_IF(E, sam2_encoder_new(encoder_path, NULL, &out), SAM2_OK, NULL, out != NULL);
    CHECK(out != NULL);
    return out;
}

/* A (buf, len, needed) string query: NULL handle, NULL buffer (too small, with the size), NULL
 * `needed` (allowed), both NULL. `size` is the size the answer needs, or 0 when it varies. */
#define STRING_QUERY(entry, fn, handle, arg, size)                                            \
    do {                                                                                     \
        char buf_[128];                                                                      \
        size_t needed_ = 999;                                                                \
        TRY_IF(entry, fn(NULL, buf_, sizeof buf_, &needed_), NULL_ARG, "`" arg "`",          \
               needed_ == 999);                                                              \
        TRY_IF(entry, fn(handle, NULL, 0, &needed_), SAM2_ERR_BUFFER_TOO_SMALL, NULL,        \
               (size) == 0 ? needed_ > 1 : needed_ == (size));                               \
        TRY(entry, fn(handle, NULL, sizeof buf_, &needed_), SAM2_ERR_BUFFER_TOO_SMALL, NULL); \
        TRY(entry, fn(handle, NULL, 0, NULL), SAM2_ERR_BUFFER_TOO_SMALL, NULL);              \
        TRY_IF(entry, fn(handle, buf_, sizeof buf_, NULL), SAM2_OK, NULL,                    \
               strlen(buf_) + 1 == needed_);                                                 \
    } while (0)

static void encoder_calls(const sam2_encoder *encoder) {
    const char *E = "sam2_encode";
    uint32_t w = image.width, h = image.height;
    sam2_embedding *out = SENTINEL_PTR;
    TRY_IF(E, sam2_encode(NULL, image.data, image_len, w, h, 0, SAM2_PIXEL_RGB, &out), NULL_ARG,
           "`encoder`", out == SENTINEL_PTR);
    TRY_IF(E, sam2_encode(encoder, NULL, image_len, w, h, 0, SAM2_PIXEL_RGB, &out), NULL_ARG,
           "`pixels`", out == SENTINEL_PTR);
    TRY_IF(E, sam2_encode(encoder, NULL, 0, w, h, 0, SAM2_PIXEL_RGB, &out), NULL_ARG, "`pixels`",
           out == SENTINEL_PTR);
    TRY(E, sam2_encode(encoder, image.data, image_len, w, h, 0, SAM2_PIXEL_RGB, NULL), NULL_ARG,
        "`out`");

    STRING_QUERY("sam2_encoder_fingerprint", sam2_encoder_fingerprint, encoder, "encoder", 25);
    STRING_QUERY("sam2_encoder_providers", sam2_encoder_providers, encoder, "encoder",
                 strlen("CPUExecutionProvider") + 1);

    E = "sam2_encoder_precision";
    uint32_t precision = 777;
    TRY_IF(E, sam2_encoder_precision(NULL, &precision), NULL_ARG, "`encoder`", precision == 777);
    TRY(E, sam2_encoder_precision(encoder, NULL), NULL_ARG, "`out_precision`");

    E = "sam2_encoder_device";
    uint32_t provider = 777;
    int32_t device = 777, fell_back = 777;
#define UNTOUCHED_DEVICE (provider == 777 && device == 777 && fell_back == 777)
    TRY_IF(E, sam2_encoder_device(NULL, &provider, &device, &fell_back), NULL_ARG, "`encoder`",
           UNTOUCHED_DEVICE);
    TRY_IF(E, sam2_encoder_device(encoder, NULL, &device, &fell_back), NULL_ARG,
           "`out_provider`", UNTOUCHED_DEVICE);
    TRY_IF(E, sam2_encoder_device(encoder, &provider, NULL, &fell_back), NULL_ARG,
           "`out_device_id`", UNTOUCHED_DEVICE);
    TRY_IF(E, sam2_encoder_device(encoder, &provider, &device, NULL), NULL_ARG, "`out_fell_back`",
           UNTOUCHED_DEVICE);
}

/* ---- Embeddings and their files ---- */

static void embedding_calls(const sam2_embedding *embedding) {
    TRY_VALUE("sam2_embedding_is_serializable", sam2_embedding_is_serializable(NULL) == 0, NULL);
    TRY_VALUE("sam2_embedding_allocator_name", sam2_embedding_allocator_name(NULL) == NULL, NULL);

    const char *E = "sam2_embedding_device_id";
    int32_t device = 777;
    TRY_IF(E, sam2_embedding_device_id(NULL, &device), NULL_ARG, "`embedding`", device == 777);
    TRY(E, sam2_embedding_device_id(embedding, NULL), NULL_ARG, "`out_device_id`");

    E = "sam2_embedding_precision";
    uint32_t precision = 777;
    TRY_IF(E, sam2_embedding_precision(NULL, &precision), NULL_ARG, "`embedding`",
           precision == 777);
    TRY(E, sam2_embedding_precision(embedding, NULL), NULL_ARG, "`out_precision`");

    E = "sam2_embedding_image_size";
    uint32_t w = 777, h = 777;
    TRY_IF(E, sam2_embedding_image_size(NULL, &w, &h), NULL_ARG, "`embedding`",
           w == 777 && h == 777);
    TRY_IF(E, sam2_embedding_image_size(embedding, NULL, &h), NULL_ARG, "`out_width`", h == 777);
    TRY_IF(E, sam2_embedding_image_size(embedding, &w, NULL), NULL_ARG, "`out_height`", w == 777);

    STRING_QUERY("sam2_embedding_fingerprint", sam2_embedding_fingerprint, embedding, "embedding",
                 25);

    /* Files. The path of a save that fails must not exist afterwards. */
    char path[TEST_PATH_MAX];
    int fd = mkstemp(test_scratch_template(path, "sam2_null_sweep_"));
    CHECK(fd >= 0);
    close(fd);
    unlink(path);
    E = "sam2_embedding_save";
    TRY_IF(E, sam2_embedding_save(NULL, path), NULL_ARG, "`embedding`", access(path, F_OK) != 0);
    TRY(E, sam2_embedding_save(embedding, NULL), NULL_ARG, "`path`");
    CHECK_OK(sam2_embedding_save(embedding, path));
    E = "sam2_embedding_load";
    sam2_embedding *out = SENTINEL_PTR;
    TRY_IF(E, sam2_embedding_load(NULL, NULL, SAM2_PLACE_HOST, &out), NULL_ARG, "`path`",
           out == SENTINEL_PTR);
    TRY(E, sam2_embedding_load(path, NULL, SAM2_PLACE_HOST, NULL), NULL_ARG, "`out`");
    /* A NULL predictor is documented: no fingerprint check, host placement. */
    out = NULL;
    TRY_IF(E, sam2_embedding_load(path, NULL, SAM2_PLACE_HOST, &out), SAM2_OK, NULL, out != NULL);
    sam2_embedding_free(out);
    unlink(path);

    E = "sam2_embedding_to_host";
    out = SENTINEL_PTR;
    TRY_IF(E, sam2_embedding_to_host(NULL, &out), NULL_ARG, "`embedding`", out == SENTINEL_PTR);
    TRY(E, sam2_embedding_to_host(embedding, NULL), NULL_ARG, "`out`");

    E = "sam2_test_embedding_simulate_device";
    TRY_IF(E, sam2_test_embedding_simulate_device(NULL, "Cuda", 0, &out), NULL_ARG,
           "`host_embedding`", out == SENTINEL_PTR);
    TRY_IF(E, sam2_test_embedding_simulate_device(embedding, NULL, 0, &out), NULL_ARG,
           "`allocator_name`", out == SENTINEL_PTR);
    TRY(E, sam2_test_embedding_simulate_device(embedding, "Cuda", 0, NULL), NULL_ARG, "`out`");
}

/* ---- Predictors ---- */

static sam2_predictor *predictor_new(const sam2_encoder *encoder) {
    const char *E = "sam2_predictor_new";
    sam2_predictor *out = SENTINEL_PTR;
    sam2_predictor_options options;
    CHECK_OK(sam2_predictor_options_init(&options, sizeof options));
    TRY_IF(E, sam2_predictor_new(encoder, NULL, &options, &out), NULL_ARG, "`decoder_path`",
           out == SENTINEL_PTR);
    TRY(E, sam2_predictor_new(encoder, decoder_path, &options, NULL), NULL_ARG, "`out`");
    options.provider_count = 2;
    TRY_IF(E, sam2_predictor_new(NULL, decoder_path, &options, &out), NULL_ARG,
           "`options.providers`", out == SENTINEL_PTR);
    /* A NULL encoder and NULL options are documented: no fingerprint check, the defaults. */
    out = NULL;
    TRY_IF(E, sam2_predictor_new(NULL, decoder_path, NULL, &out), SAM2_OK, NULL,
           out != NULL && out != SENTINEL_PTR);
    sam2_predictor_free(out);
    out = NULL;
    TRY_IF(E, sam2_predictor_new(encoder, decoder_path, NULL, &out), SAM2_OK, NULL, out != NULL);
    CHECK(out != NULL);
    return out;
}

static void predictor_queries(const sam2_predictor *predictor) {
    const char *E = "sam2_predictor_device";
    uint32_t provider = 777;
    int32_t device = 777, fell_back = 777;
    TRY_IF(E, sam2_predictor_device(NULL, &provider, &device, &fell_back), NULL_ARG,
           "`predictor`", UNTOUCHED_DEVICE);
    TRY_IF(E, sam2_predictor_device(predictor, NULL, &device, &fell_back), NULL_ARG,
           "`out_provider`", UNTOUCHED_DEVICE);
    TRY_IF(E, sam2_predictor_device(predictor, &provider, NULL, &fell_back), NULL_ARG,
           "`out_device_id`", UNTOUCHED_DEVICE);
    TRY_IF(E, sam2_predictor_device(predictor, &provider, &device, NULL), NULL_ARG,
           "`out_fell_back`", UNTOUCHED_DEVICE);
    STRING_QUERY("sam2_predictor_providers", sam2_predictor_providers, predictor, "predictor", 0);
}

static sam2_masks *predict_calls(const sam2_predictor *predictor,
                                 const sam2_embedding *embedding) {
    const char *E = "sam2_predict";
    sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    sam2_predict_options options;
    CHECK_OK(sam2_predict_options_init(&options, sizeof options));
    sam2_masks *out = SENTINEL_PTR;
#define PREDICT_NULL(p, e, prompts, n, arg)                                                    \
    TRY_IF(E, sam2_predict(p, e, prompts, n, &options, &out), NULL_ARG, arg,                 \
           out == SENTINEL_PTR)
    PREDICT_NULL(NULL, embedding, &prompt, 1, "`predictor`");
    PREDICT_NULL(predictor, NULL, &prompt, 1, "`embedding`");
    PREDICT_NULL(predictor, embedding, NULL, 1, "`prompts`");
    PREDICT_NULL(predictor, embedding, NULL, 0, "`prompts`");
    TRY(E, sam2_predict(predictor, embedding, &prompt, 1, &options, NULL), NULL_ARG, "`out`");
    /* NULL arrays inside a prompt: points with a count, mask_input with a length. */
    sam2_prompt bad = prompt;
    bad.points = NULL;
    PREDICT_NULL(predictor, embedding, &bad, 1, "`prompt.points`");
    bad = prompt;
    bad.mask_input = NULL;
    bad.mask_input_len = 65536;
    PREDICT_NULL(predictor, embedding, &bad, 1, "`prompt.mask_input`");
    /* NULL points with a count of 0 is a box-only prompt. */
    sam2_prompt box_only = test_box_prompt(40, 50, 160, 170);
    CHECK(box_only.points == NULL);
    sam2_masks *ok = NULL;
    TRY_IF(E, sam2_predict(predictor, embedding, &box_only, 1, &options, &ok), SAM2_OK, NULL,
           ok != NULL);
    sam2_masks_free(ok);
    /* NULL options: the defaults. */
    out = NULL;
    TRY_IF(E, sam2_predict(predictor, embedding, &prompt, 1, NULL, &out), SAM2_OK, NULL,
           out != NULL);
    CHECK(out != NULL);
    return out;
}

static void masks_calls(const sam2_masks *masks) {
    const char *E = "sam2_masks_count";
    size_t objects = 777, candidates = 777;
    TRY_IF(E, sam2_masks_count(NULL, &objects, &candidates), NULL_ARG, "`masks`",
           objects == 777 && candidates == 777);
    TRY_IF(E, sam2_masks_count(masks, NULL, &candidates), NULL_ARG, "`out_objects`",
           candidates == 777);
    TRY_IF(E, sam2_masks_count(masks, &objects, NULL), NULL_ARG, "`out_candidates`",
           objects == 777);

    E = "sam2_masks_size";
    uint32_t w = 777, h = 777;
    TRY_IF(E, sam2_masks_size(NULL, &w, &h), NULL_ARG, "`masks`", w == 777 && h == 777);
    TRY_IF(E, sam2_masks_size(masks, NULL, &h), NULL_ARG, "`out_width`", h == 777);
    TRY_IF(E, sam2_masks_size(masks, &w, NULL), NULL_ARG, "`out_height`", w == 777);

    E = "sam2_masks_mask";
    const uint8_t *data = SENTINEL_PTR;
    size_t len = 777;
    TRY_IF(E, sam2_masks_mask(NULL, 0, &data, &len), NULL_ARG, "`masks`",
           data == SENTINEL_PTR && len == 777);
    TRY_IF(E, sam2_masks_mask(masks, 0, NULL, &len), NULL_ARG, "`out_data`", len == 777);
    TRY_IF(E, sam2_masks_mask(masks, 0, &data, NULL), NULL_ARG, "`out_len`", data == SENTINEL_PTR);

    E = "sam2_masks_score";
    float score = 777.0f;
    TRY_IF(E, sam2_masks_score(NULL, 0, &score), NULL_ARG, "`masks`", score == 777.0f);
    TRY(E, sam2_masks_score(masks, 0, NULL), NULL_ARG, "`out_score`");
    /* A NULL handle is reported before an out-of-range index. */
    TRY_IF(E, sam2_masks_score(NULL, 12345, &score), NULL_ARG, "`masks`", score == 777.0f);

    E = "sam2_masks_box";
    uint32_t box[4] = {777, 777, 777, 777};
    uint64_t area = 777;
    TRY_IF(E, sam2_masks_box(NULL, 0, box, &area), NULL_ARG, "`masks`",
           box[0] == 777 && box[3] == 777 && area == 777);
    TRY_IF(E, sam2_masks_box(masks, 0, NULL, &area), NULL_ARG, "`out_box`", area == 777);
    TRY_IF(E, sam2_masks_box(masks, 0, box, NULL), NULL_ARG, "`out_area`",
           box[0] == 777 && box[3] == 777);

    E = "sam2_masks_low_res";
    const float *logits = SENTINEL_PTR;
    uint32_t side = 777;
    len = 777;
#define UNTOUCHED_LOW_RES (logits == SENTINEL_PTR && len == 777 && side == 777)
    TRY_IF(E, sam2_masks_low_res(NULL, 0, &logits, &len, &side), NULL_ARG, "`masks`",
           UNTOUCHED_LOW_RES);
    TRY_IF(E, sam2_masks_low_res(masks, 0, NULL, &len, &side), NULL_ARG, "`out_data`",
           UNTOUCHED_LOW_RES);
    TRY_IF(E, sam2_masks_low_res(masks, 0, &logits, NULL, &side), NULL_ARG, "`out_len`",
           UNTOUCHED_LOW_RES);
    TRY_IF(E, sam2_masks_low_res(masks, 0, &logits, &len, NULL), NULL_ARG, "`out_side`",
           UNTOUCHED_LOW_RES);
}

/* ---- Mask formats and model pairs ---- */

static void mask_format_calls(const sam2_masks *masks) {
    uint8_t buf[4] = {7, 7, 7, 7};
    uint32_t box[4] = {777, 777, 777, 777}, counts[4] = {777, 777, 777, 777};
    size_t needed = 777, points = 777, rings = 777;
    float pts[8] = {777.0f};
    sam2_ring ring[2] = {{777, 777}, {777, 777}};

    const char *E = "sam2_masks_copy_mask";
    TRY_IF(E, sam2_masks_copy_mask(NULL, 0, buf, sizeof buf), NULL_ARG, "`masks`", buf[0] == 7);
    TRY(E, sam2_masks_copy_mask(masks, 0, NULL, 4), NULL_ARG, "`buffer`");

    E = "sam2_masks_crop";
#define UNTOUCHED_CROP (buf[0] == 7 && box[0] == 777 && needed == 777)
    TRY_IF(E, sam2_masks_crop(NULL, 0, buf, sizeof buf, box, &needed), NULL_ARG, "`masks`", UNTOUCHED_CROP);
    TRY_IF(E, sam2_masks_crop(masks, 0, NULL, 4, box, &needed), NULL_ARG, "`buffer`", UNTOUCHED_CROP);
    TRY_IF(E, sam2_masks_crop(masks, 0, buf, sizeof buf, NULL, &needed), NULL_ARG, "`out_box`", UNTOUCHED_CROP);
    TRY_IF(E, sam2_masks_crop(masks, 0, buf, sizeof buf, box, NULL), NULL_ARG, "`out_needed`", UNTOUCHED_CROP);

    E = "sam2_masks_rle";
    TRY_IF(E, sam2_masks_rle(NULL, 0, counts, 4, &needed), NULL_ARG, "`masks`", counts[0] == 777 && needed == 777);
    TRY_IF(E, sam2_masks_rle(masks, 0, NULL, 4, &needed), NULL_ARG, "`counts`", needed == 777);
    TRY_IF(E, sam2_masks_rle(masks, 0, counts, 4, NULL), NULL_ARG, "`out_count`", counts[0] == 777);

    E = "sam2_masks_rle_string";
    char text[4] = "abc";
    TRY_IF(E, sam2_masks_rle_string(NULL, 0, text, sizeof text, &needed), NULL_ARG, "`masks`",
           text[0] == 'a' && needed == 777);
    /* NULL `buf` is a size query, NULL `out_needed` is allowed (as for every string out). */
    TRY(E, sam2_masks_rle_string(masks, 0, NULL, 0, NULL), SAM2_ERR_BUFFER_TOO_SMALL, NULL);

    E = "sam2_masks_polygons";
#define UNTOUCHED_POLY (pts[0] == 777.0f && ring[0].point_count == 777 && points == 777 && rings == 777)
    TRY_IF(E, sam2_masks_polygons(NULL, 0, 0.0f, pts, 4, ring, 2, &points, &rings), NULL_ARG, "`masks`",
           UNTOUCHED_POLY);
    TRY_IF(E, sam2_masks_polygons(masks, 0, 0.0f, NULL, 4, ring, 2, &points, &rings), NULL_ARG, "`points`",
           UNTOUCHED_POLY);
    TRY_IF(E, sam2_masks_polygons(masks, 0, 0.0f, pts, 4, NULL, 2, &points, &rings), NULL_ARG, "`rings`",
           UNTOUCHED_POLY);
    TRY_IF(E, sam2_masks_polygons(masks, 0, 0.0f, pts, 4, ring, 2, NULL, &rings), NULL_ARG, "`out_points`",
           UNTOUCHED_POLY);
    TRY_IF(E, sam2_masks_polygons(masks, 0, 0.0f, pts, 4, ring, 2, &points, NULL), NULL_ARG, "`out_rings`",
           UNTOUCHED_POLY);

    E = "sam2_find_model_pair";
    char enc[16] = "x", dec[16] = "y";
    TRY_IF(E, sam2_find_model_pair(NULL, enc, sizeof enc, &needed, dec, sizeof dec, &points), NULL_ARG,
           "`path`", enc[0] == 'x' && dec[0] == 'y' && needed == 777 && points == 777);
}

/* ---- Segment everything ---- */

/* The eight segment-everything entry points: NULL in each pointer argument, and the NULLs the
 * header documents (NULL options are the defaults, a NULL progress callback is none). Returns a
 * result for the accessors. */
static sam2_everything *everything_calls(const sam2_encoder *encoder,
                                         const sam2_predictor *predictor,
                                         const sam2_embedding *embedding) {
    const char *E = "sam2_everything_options_init";
    TRY(E, sam2_everything_options_init(NULL, sizeof(sam2_everything_options)), NULL_ARG,
        "`options`");
    sam2_everything_options o;
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.points_per_side = 2;
    uint32_t w = image.width, h = image.height;
    const uint8_t *px = image.data;
    size_t len = image_len;

    E = "sam2_segment_everything";
    sam2_everything *out = SENTINEL_PTR;
    TRY_IF(E, sam2_segment_everything(NULL, predictor, px, len, w, h, 0, SAM2_PIXEL_RGB, &o, &out),
           NULL_ARG, "`encoder`", out == SENTINEL_PTR);
    TRY_IF(E, sam2_segment_everything(encoder, NULL, px, len, w, h, 0, SAM2_PIXEL_RGB, &o, &out),
           NULL_ARG, "`predictor`", out == SENTINEL_PTR);
    TRY_IF(E, sam2_segment_everything(encoder, predictor, NULL, len, w, h, 0, SAM2_PIXEL_RGB, &o,
                                      &out),
           NULL_ARG, "`pixels`", out == SENTINEL_PTR);
    TRY(E, sam2_segment_everything(encoder, predictor, px, len, w, h, 0, SAM2_PIXEL_RGB, &o, NULL),
        NULL_ARG, "`out`");
    /* A NULL point array with a count. */
    o.points_per_side = 0;
    o.point_count = 3;
    TRY_IF(E, sam2_segment_everything(encoder, predictor, px, len, w, h, 0, SAM2_PIXEL_RGB, &o,
                                      &out),
           NULL_ARG, "`options.points`", out == SENTINEL_PTR);
    /* NULL options: SAM2's defaults (a 32 x 32 grid: 1024 clicks, about 13 s, too long under
     * valgrind). */
    if (!test_under_valgrind()) {
        out = NULL;
        TRY_IF(E, sam2_segment_everything(encoder, predictor, px, len, w, h, 0, SAM2_PIXEL_RGB,
                                          NULL, &out),
               SAM2_OK, NULL, out != NULL);
        sam2_everything_free(out);
    }

    E = "sam2_segment_everything_embedding";
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.points_per_side = 2;
    out = SENTINEL_PTR;
    TRY_IF(E, sam2_segment_everything_embedding(NULL, embedding, &o, &out), NULL_ARG,
           "`predictor`", out == SENTINEL_PTR);
    TRY_IF(E, sam2_segment_everything_embedding(predictor, NULL, &o, &out), NULL_ARG,
           "`embedding`", out == SENTINEL_PTR);
    TRY(E, sam2_segment_everything_embedding(predictor, embedding, &o, NULL), NULL_ARG, "`out`");
    o.points_per_side = 0;
    o.point_count = 1;
    TRY_IF(E, sam2_segment_everything_embedding(predictor, embedding, &o, &out), NULL_ARG,
           "`options.points`", out == SENTINEL_PTR);
    /* A NULL progress callback (the default) with a user pointer: no callback, and it runs. */
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.points_per_side = 4;
    o.progress = NULL;
    o.progress_user = SENTINEL_PTR;
    out = NULL;
    TRY_IF(E, sam2_segment_everything_embedding(predictor, embedding, &o, &out), SAM2_OK, NULL,
           out != NULL);
    sam2_everything *result = out;
    CHECK(result != NULL);

    E = "sam2_everything_count";
    size_t count = 777;
    uint32_t rw = 777, rh = 777;
#define UNTOUCHED_EVR_COUNT (count == 777 && rw == 777 && rh == 777)
    TRY_IF(E, sam2_everything_count(NULL, &count, &rw, &rh), NULL_ARG, "`everything`",
           UNTOUCHED_EVR_COUNT);
    TRY_IF(E, sam2_everything_count(result, NULL, &rw, &rh), NULL_ARG, "`out_count`",
           UNTOUCHED_EVR_COUNT);
    TRY_IF(E, sam2_everything_count(result, &count, NULL, &rh), NULL_ARG, "`out_width`",
           UNTOUCHED_EVR_COUNT);
    TRY_IF(E, sam2_everything_count(result, &count, &rw, NULL), NULL_ARG, "`out_height`",
           UNTOUCHED_EVR_COUNT);
    CHECK_OK(sam2_everything_count(result, &count, &rw, &rh));
    CHECK(count > 0);

    E = "sam2_everything_mask_info";
    sam2_everything_info info;
    memset(&info, 0x77, sizeof info);
    TRY_IF(E, sam2_everything_mask_info(NULL, 0, &info), NULL_ARG, "`everything`",
           info.area == 0x7777777777777777ull);
    TRY(E, sam2_everything_mask_info(result, 0, NULL), NULL_ARG, "`out_info`");

    E = "sam2_everything_mask";
    size_t plane = (size_t)rw * rh;
    uint8_t *buf = malloc(plane);
    CHECK(buf != NULL);
    memset(buf, 7, plane);
    TRY_IF(E, sam2_everything_mask(NULL, 0, buf, plane), NULL_ARG, "`everything`", buf[0] == 7);
    TRY(E, sam2_everything_mask(result, 0, NULL, plane), NULL_ARG, "`buf`");
    TRY(E, sam2_everything_mask(result, 0, NULL, 0), NULL_ARG, "`buf`");
    free(buf);

    E = "sam2_everything_rle";
    const uint32_t *counts = SENTINEL_PTR;
    size_t n = 777;
    TRY_IF(E, sam2_everything_rle(NULL, 0, &counts, &n), NULL_ARG, "`everything`",
           counts == SENTINEL_PTR && n == 777);
    TRY_IF(E, sam2_everything_rle(result, 0, NULL, &n), NULL_ARG, "`out_counts`", n == 777);
    TRY_IF(E, sam2_everything_rle(result, 0, &counts, NULL), NULL_ARG, "`out_count`",
           counts == SENTINEL_PTR);
    return result;
}

/* ---- The embedding cache and its jobs ---- */

static void cache_calls(const sam2_encoder *encoder, const sam2_embedding *embedding) {
    const uint8_t *px = image.data;
    uint32_t w = image.width, h = image.height;
    size_t len = image_len;

    const char *E = "sam2_cache_new";
    sam2_cache_options o;
    CHECK_OK(sam2_cache_options_init(&o, sizeof o));
    TRY(E, sam2_cache_new(&o, NULL), NULL_ARG, "`out`");
    /* NULL options: the defaults. */
    sam2_cache *cache = NULL;
    TRY_IF(E, sam2_cache_new(NULL, &cache), SAM2_OK, NULL, cache != NULL);
    CHECK(cache != NULL);

    E = "sam2_cache_encode";
    sam2_embedding *out = SENTINEL_PTR;
    uint32_t source = 77;
#define UNTOUCHED_CACHE_OUT (out == SENTINEL_PTR && source == 77)
    TRY_IF(E, sam2_cache_encode(NULL, encoder, px, len, w, h, 0, 0, &out, &source), NULL_ARG,
           "`cache`", UNTOUCHED_CACHE_OUT);
    TRY_IF(E, sam2_cache_encode(cache, NULL, px, len, w, h, 0, 0, &out, &source), NULL_ARG,
           "`encoder`", UNTOUCHED_CACHE_OUT);
    TRY_IF(E, sam2_cache_encode(cache, encoder, NULL, len, w, h, 0, 0, &out, &source), NULL_ARG,
           "`pixels`", UNTOUCHED_CACHE_OUT);
    TRY_IF(E, sam2_cache_encode(cache, encoder, px, len, w, h, 0, 0, NULL, &source), NULL_ARG,
           "`out`", source == 77);
    /* A NULL `out_source` is allowed. */
    out = NULL;
    TRY_IF(E, sam2_cache_encode(cache, encoder, px, len, w, h, 0, 0, &out, NULL), SAM2_OK, NULL,
           out != NULL);
    sam2_embedding_free(out);

    E = "sam2_cache_encode_async";
    sam2_encode_job *job = SENTINEL_PTR;
    const uint32_t bg = SAM2_PRIORITY_BACKGROUND;
    TRY_IF(E, sam2_cache_encode_async(NULL, encoder, px, len, w, h, 0, 0, bg, &job), NULL_ARG,
           "`cache`", job == SENTINEL_PTR);
    TRY_IF(E, sam2_cache_encode_async(cache, NULL, px, len, w, h, 0, 0, bg, &job), NULL_ARG,
           "`encoder`", job == SENTINEL_PTR);
    TRY_IF(E, sam2_cache_encode_async(cache, encoder, NULL, len, w, h, 0, 0, bg, &job), NULL_ARG,
           "`pixels`", job == SENTINEL_PTR);
    TRY(E, sam2_cache_encode_async(cache, encoder, px, len, w, h, 0, 0, bg, NULL), NULL_ARG,
        "`out`");

    E = "sam2_cache_put";
    TRY(E, sam2_cache_put(NULL, encoder, px, len, w, h, 0, 0, embedding), NULL_ARG, "`cache`");
    TRY(E, sam2_cache_put(cache, NULL, px, len, w, h, 0, 0, embedding), NULL_ARG, "`encoder`");
    TRY(E, sam2_cache_put(cache, encoder, NULL, len, w, h, 0, 0, embedding), NULL_ARG,
        "`pixels`");
    TRY(E, sam2_cache_put(cache, encoder, px, len, w, h, 0, 0, NULL), NULL_ARG, "`embedding`");

    TRY("sam2_cache_clear", sam2_cache_clear(NULL), NULL_ARG, "`cache`");
    size_t cancelled = 77;
    TRY_IF("sam2_cache_cancel_all", sam2_cache_cancel_all(NULL, &cancelled), NULL_ARG, "`cache`",
           cancelled == 77);
    /* A NULL `out_cancelled` is allowed. */
    TRY("sam2_cache_cancel_all", sam2_cache_cancel_all(cache, NULL), SAM2_OK, NULL);
    sam2_cache_stats stats;
    memset(&stats, 0x5a, sizeof stats);
    stats.struct_size = sizeof stats;
    TRY_IF("sam2_cache_get_stats", sam2_cache_get_stats(NULL, &stats), NULL_ARG, "`cache`",
           stats.hits == 0x5a5a5a5a5a5a5a5aull);
    TRY("sam2_cache_get_stats", sam2_cache_get_stats(cache, NULL), NULL_ARG, "`out`");

    /* Jobs: one real job, then NULL in each argument. */
    job = NULL;
    CHECK_OK(sam2_cache_encode_async(cache, encoder, px, len, w, h, 0, 0,
                                     SAM2_PRIORITY_FOREGROUND, &job));
    E = "sam2_encode_job_wait";
    out = SENTINEL_PTR;
    TRY_IF(E, sam2_encode_job_wait(NULL, 0, &out), NULL_ARG, "`job`", out == SENTINEL_PTR);
    TRY(E, sam2_encode_job_wait(job, 0, NULL), NULL_ARG, "`out`");
    E = "sam2_encode_job_state";
    uint32_t state = 77;
    TRY_IF(E, sam2_encode_job_state(NULL, &state), NULL_ARG, "`job`", state == 77);
    TRY(E, sam2_encode_job_state(job, NULL), NULL_ARG, "`out_state`");
    TRY("sam2_encode_job_cancel", sam2_encode_job_cancel(NULL), NULL_ARG, "`job`");
    out = NULL;
    CHECK_OK(sam2_encode_job_wait(job, SAM2_WAIT_FOREVER, &out));
    sam2_embedding_free(out);
    sam2_encode_job_free(job);
    sam2_cache_free(cache);
}

/* ---- Video tracking ---- */

static sam2_tracker *tracker_new(void) {
    const char *E = "sam2_tracker_new";
    char p[TRACK_MODULES][TEST_PATH_MAX];
    test_track_paths(p);
    const char *names[TRACK_MODULES] = {"`image_encoder_path`", "`memory_attention_path`",
                                        "`image_decoder_path`", "`memory_encoder_path`"};
    sam2_tracker *out = SENTINEL_PTR;
    for (int m = 0; m < TRACK_MODULES; m++) {
        const char *paths[TRACK_MODULES] = {p[0], p[1], p[2], p[3]};
        paths[m] = NULL;
        TRY_IF(E, sam2_tracker_new(paths[0], paths[1], paths[2], paths[3], NULL, &out), NULL_ARG,
               names[m], out == SENTINEL_PTR);
    }
    TRY(E, sam2_tracker_new(p[0], p[1], p[2], p[3], NULL, NULL), NULL_ARG, "`out`");
    sam2_tracker_options options;
    CHECK_OK(sam2_tracker_options_init(&options, sizeof options));
    options.provider_count = 1;
    TRY_IF(E, sam2_tracker_new(p[0], p[1], p[2], p[3], &options, &out), NULL_ARG,
           "`options.providers`", out == SENTINEL_PTR);
    /* NULL options: the defaults. */
    out = NULL;
    TRY_IF(E, sam2_tracker_new(p[0], p[1], p[2], p[3], NULL, &out), SAM2_OK, NULL, out != NULL);
    CHECK(out != NULL);
    return out;
}

static sam2_track_result *tracker_calls(sam2_tracker *tracker) {
    enum { LEN = CLIP_WIDTH * CLIP_HEIGHT * 3 };
    static uint8_t px[LEN];
    clip_frame(0, px, NULL, NULL);
    const uint32_t w = CLIP_WIDTH, h = CLIP_HEIGHT, rgb = SAM2_PIXEL_RGB;
    sam2_point pt = {34, 96, SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    sam2_track_result *out = SENTINEL_PTR;

    const char *E = "sam2_tracker_add_prompt";
#define ADD_NULL(t, pixels, n, pr, arg)                                                        \
    TRY_IF(E, sam2_tracker_add_prompt(t, 0, pixels, n, w, h, 0, rgb, 1, pr, &out), NULL_ARG,   \
           arg, out == SENTINEL_PTR)
    ADD_NULL(NULL, px, LEN, &prompt, "`tracker`");
    ADD_NULL(tracker, NULL, LEN, &prompt, "`pixels`");
    ADD_NULL(tracker, NULL, 0, &prompt, "`pixels`");
    ADD_NULL(tracker, px, LEN, NULL, "`prompt`");
    TRY(E, sam2_tracker_add_prompt(tracker, 0, px, LEN, w, h, 0, rgb, 1, &prompt, NULL), NULL_ARG,
        "`out`");
    sam2_prompt bad = prompt;
    bad.points = NULL;
    ADD_NULL(tracker, px, LEN, &bad, "`prompt.points`");
    /* A NULL mask_input with a length: a tracker takes no mask prompt. */
    bad = prompt;
    bad.mask_input_len = 65536;
    ADD_NULL(tracker, px, LEN, &bad, "`prompt.mask_input`");
    /* NULL points with a count of 0 is a box-only prompt. */
    sam2_prompt box_only = test_box_prompt(240, 10, 300, 70);
    CHECK(box_only.points == NULL);
    sam2_track_result *ok = NULL;
    TRY_IF(E, sam2_tracker_add_prompt(tracker, 0, px, LEN, w, h, 0, rgb, 2, &box_only, &ok),
           SAM2_OK, NULL, ok != NULL);
    sam2_track_result_free(ok);

    E = "sam2_tracker_track";
#define TRACK_NULL(t, pixels, n, arg)                                                          \
    TRY_IF(E, sam2_tracker_track(t, 0, pixels, n, w, h, 0, rgb, SAM2_TRACK_FORWARD, &out),    \
           NULL_ARG, arg, out == SENTINEL_PTR)
    TRACK_NULL(NULL, px, LEN, "`tracker`");
    TRACK_NULL(tracker, NULL, LEN, "`pixels`");
    TRACK_NULL(tracker, NULL, 0, "`pixels`");
    TRY(E, sam2_tracker_track(tracker, 0, px, LEN, w, h, 0, rgb, SAM2_TRACK_FORWARD, NULL),
        NULL_ARG, "`out`");

    E = "sam2_tracker_remove_object";
    int32_t removed = 77;
    TRY_IF(E, sam2_tracker_remove_object(NULL, 1, &removed), NULL_ARG, "`tracker`", removed == 77);
    /* A NULL `out_removed` is allowed (and the object stays: the id is unknown). */
    TRY(E, sam2_tracker_remove_object(tracker, 999, NULL), SAM2_OK, NULL);
    TRY("sam2_tracker_reset", sam2_tracker_reset(NULL), NULL_ARG, "`tracker`");
    E = "sam2_tracker_memory_frames";
    size_t frames = 777;
    TRY_IF(E, sam2_tracker_memory_frames(NULL, &frames), NULL_ARG, "`tracker`", frames == 777);
    TRY(E, sam2_tracker_memory_frames(tracker, NULL), NULL_ARG, "`out_frames`");
    E = "sam2_tracker_memory_bytes";
    uint64_t bytes = 777;
    TRY_IF(E, sam2_tracker_memory_bytes(NULL, &bytes), NULL_ARG, "`tracker`", bytes == 777);
    TRY(E, sam2_tracker_memory_bytes(tracker, NULL), NULL_ARG, "`out_bytes`");

    E = "sam2_tracker_precision";
    uint32_t precision = 777;
    TRY_IF(E, sam2_tracker_precision(NULL, &precision), NULL_ARG, "`tracker`", precision == 777);
    TRY(E, sam2_tracker_precision(tracker, NULL), NULL_ARG, "`out_precision`");

    E = "sam2_tracker_device";
    uint32_t provider = 777;
    int32_t device = 777, fell_back = 777;
    TRY_IF(E, sam2_tracker_device(NULL, &provider, &device, &fell_back), NULL_ARG, "`tracker`",
           UNTOUCHED_DEVICE);
    TRY_IF(E, sam2_tracker_device(tracker, NULL, &device, &fell_back), NULL_ARG,
           "`out_provider`", UNTOUCHED_DEVICE);
    TRY_IF(E, sam2_tracker_device(tracker, &provider, NULL, &fell_back), NULL_ARG,
           "`out_device_id`", UNTOUCHED_DEVICE);
    TRY_IF(E, sam2_tracker_device(tracker, &provider, &device, NULL), NULL_ARG, "`out_fell_back`",
           UNTOUCHED_DEVICE);

    sam2_track_result *result = NULL;
    CHECK_OK(sam2_tracker_track(tracker, 0, px, LEN, w, h, 0, rgb, SAM2_TRACK_FORWARD, &result));
    return result;
}

static void track_result_calls(const sam2_track_result *result) {
    const char *E = "sam2_track_result_count";
    uint32_t frame = 777, w = 777, h = 777;
    size_t count = 777;
#define UNTOUCHED_COUNT (frame == 777 && count == 777 && w == 777 && h == 777)
    TRY_IF(E, sam2_track_result_count(NULL, &frame, &count, &w, &h), NULL_ARG, "`result`",
           UNTOUCHED_COUNT);
    TRY_IF(E, sam2_track_result_count(result, NULL, &count, &w, &h), NULL_ARG, "`out_frame_index`",
           UNTOUCHED_COUNT);
    TRY_IF(E, sam2_track_result_count(result, &frame, NULL, &w, &h), NULL_ARG, "`out_count`",
           UNTOUCHED_COUNT);
    TRY_IF(E, sam2_track_result_count(result, &frame, &count, NULL, &h), NULL_ARG, "`out_width`",
           UNTOUCHED_COUNT);
    TRY_IF(E, sam2_track_result_count(result, &frame, &count, &w, NULL), NULL_ARG, "`out_height`",
           UNTOUCHED_COUNT);

    E = "sam2_track_result_object";
    sam2_tracked_object o;
    memset(&o, 0x77, sizeof o);
    TRY_IF(E, sam2_track_result_object(NULL, 0, &o), NULL_ARG, "`result`", o.object_id == 0x77777777u);
    TRY(E, sam2_track_result_object(result, 0, NULL), NULL_ARG, "`out_object`");
    /* A NULL handle is reported before an out-of-range index. */
    TRY_IF(E, sam2_track_result_object(NULL, 12345, &o), NULL_ARG, "`result`",
           o.object_id == 0x77777777u);

    E = "sam2_track_result_mask";
    const uint8_t *mask = SENTINEL_PTR;
    size_t len = 777;
    TRY_IF(E, sam2_track_result_mask(NULL, 0, &mask, &len), NULL_ARG, "`result`",
           mask == SENTINEL_PTR && len == 777);
    TRY_IF(E, sam2_track_result_mask(result, 0, NULL, &len), NULL_ARG, "`out_mask`", len == 777);
    TRY_IF(E, sam2_track_result_mask(result, 0, &mask, NULL), NULL_ARG, "`out_len`",
           mask == SENTINEL_PTR);

    E = "sam2_track_result_low_res";
    const float *logits = SENTINEL_PTR;
    TRY_IF(E, sam2_track_result_low_res(NULL, 0, &logits, &len), NULL_ARG, "`result`",
           logits == SENTINEL_PTR && len == 777);
    TRY_IF(E, sam2_track_result_low_res(result, 0, NULL, &len), NULL_ARG, "`out_logits`",
           len == 777);
    TRY_IF(E, sam2_track_result_low_res(result, 0, &logits, NULL), NULL_ARG, "`out_len`",
           logits == SENTINEL_PTR);
}

int main(void) {
    test_default_environment();
    test_model_path(encoder_path, "tiny_a_encoder.onnx");
    test_model_path(decoder_path, "tiny_a_decoder.onnx");
    image = test_load_image("shapes.ppm");
    image_len = (size_t)image.width * image.height * 3;

    library();
    frees();
    sam2_encoder *encoder = encoder_new();
    encoder_calls(encoder);
    sam2_embedding *embedding = test_encode(encoder, &image);
    embedding_calls(embedding);
    sam2_predictor *predictor = predictor_new(encoder);
    predictor_queries(predictor);
    sam2_masks *masks = predict_calls(predictor, embedding);
    masks_calls(masks);
    mask_format_calls(masks);
    sam2_everything *everything = everything_calls(encoder, predictor, embedding);
    sam2_everything_free(everything);
    cache_calls(encoder, embedding);
    sam2_tracker *tracker = tracker_new();
    sam2_track_result *tracked = tracker_calls(tracker);
    track_result_calls(tracked);
    sam2_track_result_free(tracked);
    sam2_tracker_free(tracker);

    sam2_masks_free(masks);
    sam2_predictor_free(predictor);
    sam2_embedding_free(embedding);
    sam2_encoder_free(encoder);
    test_image_free(&image);
    return sweep_finish("test_null_sweep", "null_sweep.tsv");
}
