/*
 * NULL sweep: every exported function, called with NULL for each pointer argument in turn, returns
 * SAM2_ERR_NULL_ARGUMENT naming that argument, or does what the header documents for NULL
 * (_free(NULL) is a no-op, sam2_embedding_is_serializable(NULL) is 0, ...), and never crashes.
 * The other out-params are left untouched.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define SENTINEL_PTR ((void *)(uintptr_t)0x5a5a5a5aU)

/* Requires SAM2_ERR_NULL_ARGUMENT and a message of the form "argument `name` must not be NULL". */
#define CHECK_NULL(expr, name)                                                               \
    do {                                                                                     \
        CHECK_STATUS(expr, SAM2_ERR_NULL_ARGUMENT);                                          \
        CHECK_MESSAGE("`" name "`");                                                         \
        CHECK_MESSAGE("NULL");                                                               \
    } while (0)

static char encoder_path[TEST_PATH_MAX], decoder_path[TEST_PATH_MAX];

static void runtime_and_strings(void) {
    /* NULL runtime path: discovery (SAM2_ONNXRUNTIME_PATH). */
    CHECK_OK(sam2_runtime_init(NULL));
    CHECK(sam2_runtime_version() != NULL);
    CHECK(sam2_version() != NULL);
    CHECK(sam2_status_str(SAM2_OK) != NULL);
    CHECK(sam2_status_str(0xFFFFFFFFu) != NULL);
    /* NULL callback removes it; NULL user_data is passed back as is. */
    CHECK_OK(sam2_set_log_callback(NULL, NULL, SAM2_LOG_DEBUG));

    /* sam2_last_error_message: NULL buffer is "too small" with the size needed; NULL `needed`
     * is allowed. Neither changes the message. */
    CHECK_STATUS(sam2_encoder_new(NULL, NULL, NULL), SAM2_ERR_NULL_ARGUMENT);
    size_t needed = 0;
    CHECK_STATUS(sam2_last_error_message(NULL, 0, &needed), SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(needed > 1);
    CHECK_STATUS(sam2_last_error_message(NULL, 100, &needed), SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK_STATUS(sam2_last_error_message(NULL, 0, NULL), SAM2_ERR_BUFFER_TOO_SMALL);
    char buf[256];
    CHECK_OK(sam2_last_error_message(buf, sizeof buf, NULL));
    CHECK(strlen(buf) + 1 == needed);
    CHECK(strstr(buf, "model_path") != NULL);
}

static void options_init(void) {
    CHECK_NULL(sam2_encoder_options_init(NULL, 0), "options");
    CHECK_NULL(sam2_predictor_options_init(NULL, 0), "options");
    CHECK_NULL(sam2_predict_options_init(NULL, 0), "options");
}

static void free_null(void) {
    sam2_encoder_free(NULL);
    sam2_embedding_free(NULL);
    sam2_predictor_free(NULL);
    sam2_masks_free(NULL);
}

static sam2_encoder *encoder_new(void) {
    sam2_encoder *out = SENTINEL_PTR;
    sam2_encoder_options options;
    CHECK_OK(sam2_encoder_options_init(&options, sizeof options));
    CHECK_NULL(sam2_encoder_new(NULL, &options, &out), "model_path");
    CHECK(out == SENTINEL_PTR);
    CHECK_NULL(sam2_encoder_new(encoder_path, &options, NULL), "out");
    /* NULL options: the defaults. */
    out = NULL;
    CHECK_OK(sam2_encoder_new(encoder_path, NULL, &out));
    CHECK(out != NULL);
    return out;
}

static void encoder_calls(const sam2_encoder *encoder, const test_image *img) {
    size_t len = (size_t)img->width * img->height * 3;
    sam2_embedding *out = SENTINEL_PTR;
    CHECK_NULL(sam2_encode(NULL, img->data, len, img->width, img->height, 0, SAM2_PIXEL_RGB, &out),
               "encoder");
    CHECK_NULL(sam2_encode(encoder, NULL, len, img->width, img->height, 0, SAM2_PIXEL_RGB, &out),
               "pixels");
    CHECK_NULL(sam2_encode(encoder, NULL, 0, img->width, img->height, 0, SAM2_PIXEL_RGB, &out),
               "pixels");
    CHECK(out == SENTINEL_PTR);
    CHECK_NULL(sam2_encode(encoder, img->data, len, img->width, img->height, 0, SAM2_PIXEL_RGB,
                           NULL),
               "out");

    char buf[64];
    size_t needed = 999;
    CHECK_NULL(sam2_encoder_fingerprint(NULL, buf, sizeof buf, &needed), "encoder");
    CHECK(needed == 999);
    /* NULL buffer: too small, and the size needed is reported. */
    CHECK_STATUS(sam2_encoder_fingerprint(encoder, NULL, 0, &needed), SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(needed == 25);
    CHECK_STATUS(sam2_encoder_fingerprint(encoder, NULL, sizeof buf, &needed),
                 SAM2_ERR_BUFFER_TOO_SMALL);
    /* NULL `needed` is allowed. */
    CHECK_OK(sam2_encoder_fingerprint(encoder, buf, sizeof buf, NULL));
    CHECK(strlen(buf) == 24);

    uint32_t provider = 777;
    int32_t device = 777, fell_back = 777;
    CHECK_NULL(sam2_encoder_device(NULL, &provider, &device, &fell_back), "encoder");
    CHECK_NULL(sam2_encoder_device(encoder, NULL, &device, &fell_back), "out_provider");
    CHECK_NULL(sam2_encoder_device(encoder, &provider, NULL, &fell_back), "out_device_id");
    CHECK_NULL(sam2_encoder_device(encoder, &provider, &device, NULL), "out_fell_back");
    CHECK(provider == 777 && device == 777 && fell_back == 777);

    needed = 999;
    CHECK_NULL(sam2_encoder_providers(NULL, buf, sizeof buf, &needed), "encoder");
    CHECK(needed == 999);
    CHECK_STATUS(sam2_encoder_providers(encoder, NULL, 0, &needed), SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(needed == strlen("CPUExecutionProvider") + 1);
    CHECK_OK(sam2_encoder_providers(encoder, buf, sizeof buf, NULL));

    /* NULL provider array with a count. */
    sam2_encoder_options options;
    CHECK_OK(sam2_encoder_options_init(&options, sizeof options));
    options.provider_count = 1;
    sam2_encoder *out_encoder = SENTINEL_PTR;
    CHECK_NULL(sam2_encoder_new(encoder_path, &options, &out_encoder), "options.providers");
    CHECK(out_encoder == SENTINEL_PTR);
}

static void embedding_calls(const sam2_embedding *embedding) {
    CHECK(sam2_embedding_is_serializable(NULL) == 0);
    CHECK(sam2_embedding_allocator_name(NULL) == NULL);

    int32_t device = 777;
    CHECK_NULL(sam2_embedding_device_id(NULL, &device), "embedding");
    CHECK(device == 777);
    CHECK_NULL(sam2_embedding_device_id(embedding, NULL), "out_device_id");

    uint32_t w = 777, h = 777;
    CHECK_NULL(sam2_embedding_image_size(NULL, &w, &h), "embedding");
    CHECK_NULL(sam2_embedding_image_size(embedding, NULL, &h), "out_width");
    CHECK_NULL(sam2_embedding_image_size(embedding, &w, NULL), "out_height");
    CHECK(w == 777 && h == 777);

    char buf[64];
    size_t needed = 999;
    CHECK_NULL(sam2_embedding_fingerprint(NULL, buf, sizeof buf, &needed), "embedding");
    CHECK(needed == 999);
    CHECK_STATUS(sam2_embedding_fingerprint(embedding, NULL, 0, &needed),
                 SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(needed == 25);
    CHECK_OK(sam2_embedding_fingerprint(embedding, buf, sizeof buf, NULL));

    /* Files. The path of a save that fails must not exist afterwards. */
    char path[TEST_PATH_MAX];
    int fd = mkstemp(test_scratch_template(path, "sam2_null_sweep_"));
    CHECK(fd >= 0);
    close(fd);
    unlink(path);
    CHECK_NULL(sam2_embedding_save(NULL, path), "embedding");
    CHECK(access(path, F_OK) != 0);
    CHECK_NULL(sam2_embedding_save(embedding, NULL), "path");
    CHECK_OK(sam2_embedding_save(embedding, path));
    sam2_embedding *out = SENTINEL_PTR;
    CHECK_NULL(sam2_embedding_load(NULL, NULL, SAM2_PLACE_HOST, &out), "path");
    CHECK(out == SENTINEL_PTR);
    CHECK_NULL(sam2_embedding_load(path, NULL, SAM2_PLACE_HOST, NULL), "out");
    /* NULL predictor is documented: no fingerprint check, host placement. */
    out = NULL;
    CHECK_OK(sam2_embedding_load(path, NULL, SAM2_PLACE_HOST, &out));
    sam2_embedding_free(out);
    unlink(path);

    out = SENTINEL_PTR;
    CHECK_NULL(sam2_embedding_to_host(NULL, &out), "embedding");
    CHECK(out == SENTINEL_PTR);
    CHECK_NULL(sam2_embedding_to_host(embedding, NULL), "out");

    CHECK_NULL(sam2_test_embedding_simulate_device(NULL, "Cuda", 0, &out), "host_embedding");
    CHECK_NULL(sam2_test_embedding_simulate_device(embedding, NULL, 0, &out), "allocator_name");
    CHECK(out == SENTINEL_PTR);
    CHECK_NULL(sam2_test_embedding_simulate_device(embedding, "Cuda", 0, NULL), "out");
}

static sam2_predictor *predictor_new(const sam2_encoder *encoder) {
    sam2_predictor *out = SENTINEL_PTR;
    sam2_predictor_options options;
    CHECK_OK(sam2_predictor_options_init(&options, sizeof options));
    CHECK_NULL(sam2_predictor_new(encoder, NULL, &options, &out), "decoder_path");
    CHECK(out == SENTINEL_PTR);
    CHECK_NULL(sam2_predictor_new(encoder, decoder_path, &options, NULL), "out");
    /* NULL encoder and NULL options are documented: no fingerprint check, the defaults. */
    CHECK_OK(sam2_predictor_new(NULL, decoder_path, NULL, &out));
    CHECK(out != NULL && out != SENTINEL_PTR);
    sam2_predictor_free(out);
    out = NULL;
    CHECK_OK(sam2_predictor_new(encoder, decoder_path, NULL, &out));
    return out;
}

static void predictor_queries(const sam2_predictor *predictor) {
    uint32_t provider = 777;
    int32_t device = 777, fell_back = 777;
    CHECK_NULL(sam2_predictor_device(NULL, &provider, &device, &fell_back), "predictor");
    CHECK_NULL(sam2_predictor_device(predictor, NULL, &device, &fell_back), "out_provider");
    CHECK_NULL(sam2_predictor_device(predictor, &provider, NULL, &fell_back), "out_device_id");
    CHECK_NULL(sam2_predictor_device(predictor, &provider, &device, NULL), "out_fell_back");
    CHECK(provider == 777 && device == 777 && fell_back == 777);

    char buf[128];
    size_t needed = 999;
    CHECK_NULL(sam2_predictor_providers(NULL, buf, sizeof buf, &needed), "predictor");
    CHECK(needed == 999);
    CHECK_STATUS(sam2_predictor_providers(predictor, NULL, 0, &needed), SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(needed > 1);
    CHECK_OK(sam2_predictor_providers(predictor, buf, sizeof buf, NULL));

    /* NULL provider array with a count. */
    sam2_predictor_options options;
    CHECK_OK(sam2_predictor_options_init(&options, sizeof options));
    options.provider_count = 2;
    sam2_predictor *out = SENTINEL_PTR;
    CHECK_NULL(sam2_predictor_new(NULL, decoder_path, &options, &out), "options.providers");
    CHECK(out == SENTINEL_PTR);
}

static sam2_masks *predict_calls(const sam2_predictor *predictor,
                                 const sam2_embedding *embedding) {
    sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    sam2_predict_options options;
    CHECK_OK(sam2_predict_options_init(&options, sizeof options));
    sam2_masks *out = SENTINEL_PTR;
    CHECK_NULL(sam2_predict(NULL, embedding, &prompt, 1, &options, &out), "predictor");
    CHECK_NULL(sam2_predict(predictor, NULL, &prompt, 1, &options, &out), "embedding");
    CHECK_NULL(sam2_predict(predictor, embedding, NULL, 1, &options, &out), "prompts");
    CHECK_NULL(sam2_predict(predictor, embedding, NULL, 0, &options, &out), "prompts");
    CHECK(out == SENTINEL_PTR);
    CHECK_NULL(sam2_predict(predictor, embedding, &prompt, 1, &options, NULL), "out");

    /* NULL arrays inside a prompt: points with a count, mask_input with a length. */
    sam2_prompt bad = prompt;
    bad.points = NULL;
    CHECK_NULL(sam2_predict(predictor, embedding, &bad, 1, &options, &out), "prompt.points");
    bad = prompt;
    bad.mask_input = NULL;
    bad.mask_input_len = 65536;
    CHECK_NULL(sam2_predict(predictor, embedding, &bad, 1, &options, &out), "prompt.mask_input");
    CHECK(out == SENTINEL_PTR);
    /* NULL points with a count of 0 is a box-only prompt. */
    sam2_prompt box_only = test_box_prompt(40, 50, 160, 170);
    CHECK(box_only.points == NULL);
    sam2_masks *ok = NULL;
    CHECK_OK(sam2_predict(predictor, embedding, &box_only, 1, &options, &ok));
    sam2_masks_free(ok);

    /* NULL options: the defaults. */
    out = NULL;
    CHECK_OK(sam2_predict(predictor, embedding, &prompt, 1, NULL, &out));
    CHECK(out != NULL);
    return out;
}

static void masks_calls(const sam2_masks *masks) {
    size_t objects = 777, candidates = 777;
    CHECK_NULL(sam2_masks_count(NULL, &objects, &candidates), "masks");
    CHECK_NULL(sam2_masks_count(masks, NULL, &candidates), "out_objects");
    CHECK_NULL(sam2_masks_count(masks, &objects, NULL), "out_candidates");
    CHECK(objects == 777 && candidates == 777);

    uint32_t w = 777, h = 777;
    CHECK_NULL(sam2_masks_size(NULL, &w, &h), "masks");
    CHECK_NULL(sam2_masks_size(masks, NULL, &h), "out_width");
    CHECK_NULL(sam2_masks_size(masks, &w, NULL), "out_height");
    CHECK(w == 777 && h == 777);

    const uint8_t *data = SENTINEL_PTR;
    size_t len = 777;
    CHECK_NULL(sam2_masks_mask(NULL, 0, &data, &len), "masks");
    CHECK_NULL(sam2_masks_mask(masks, 0, NULL, &len), "out_data");
    CHECK_NULL(sam2_masks_mask(masks, 0, &data, NULL), "out_len");
    CHECK(data == SENTINEL_PTR && len == 777);

    float score = 777.0f;
    CHECK_NULL(sam2_masks_score(NULL, 0, &score), "masks");
    CHECK_NULL(sam2_masks_score(masks, 0, NULL), "out_score");
    CHECK(score == 777.0f);

    uint32_t box[4] = {777, 777, 777, 777};
    uint64_t area = 777;
    CHECK_NULL(sam2_masks_box(NULL, 0, box, &area), "masks");
    CHECK_NULL(sam2_masks_box(masks, 0, NULL, &area), "out_box");
    CHECK_NULL(sam2_masks_box(masks, 0, box, NULL), "out_area");
    CHECK(box[0] == 777 && box[3] == 777 && area == 777);

    const float *logits = SENTINEL_PTR;
    uint32_t side = 777;
    len = 777;
    CHECK_NULL(sam2_masks_low_res(NULL, 0, &logits, &len, &side), "masks");
    CHECK_NULL(sam2_masks_low_res(masks, 0, NULL, &len, &side), "out_data");
    CHECK_NULL(sam2_masks_low_res(masks, 0, &logits, NULL, &side), "out_len");
    CHECK_NULL(sam2_masks_low_res(masks, 0, &logits, &len, NULL), "out_side");
    CHECK(logits == SENTINEL_PTR && len == 777 && side == 777);

    /* A NULL handle is reported before an out-of-range index. */
    CHECK_NULL(sam2_masks_score(NULL, 12345, &score), "masks");
}

int main(void) {
    test_default_environment();
    runtime_and_strings();
    options_init();
    free_null();
    test_model_path(encoder_path, "tiny_a_encoder.onnx");
    test_model_path(decoder_path, "tiny_a_decoder.onnx");
    test_image image = test_load_image("shapes.ppm");

    sam2_encoder *encoder = encoder_new();
    encoder_calls(encoder, &image);
    sam2_embedding *embedding = test_encode(encoder, &image);
    embedding_calls(embedding);
    sam2_predictor *predictor = predictor_new(encoder);
    predictor_queries(predictor);
    sam2_masks *masks = predict_calls(predictor, embedding);
    masks_calls(masks);

    sam2_masks_free(masks);
    sam2_predictor_free(predictor);
    sam2_embedding_free(embedding);
    sam2_encoder_free(encoder);
    free_null();
    test_image_free(&image);
    printf("test_null_sweep: ok\n");
    return 0;
}
