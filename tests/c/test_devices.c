/*
 * Execution providers through the C ABI, on the CPU-only ONNX Runtime of the test set-up:
 *   - by default, and with an explicit CPU request, encoder and predictor report the CPU,
 *     device 0, no fallback, and the provider list "CPUExecutionProvider";
 *   - a CUDA request with the FALLBACK policy (the default) succeeds on the CPU, reports the
 *     fallback, warns once through the log callback naming the provider, and still segments;
 *   - the warning respects the callback's minimum level;
 *   - with the FAIL policy the same request fails (checked with its message in test_errors).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct log_capture {
    int warnings;
    int warnings_naming_cuda;
    int errors;
} log_capture;

static void capture(uint32_t level, const char *message, void *user_data) {
    log_capture *c = user_data;
    if (level == SAM2_LOG_WARNING) {
        c->warnings++;
        if (strstr(message, "CUDAExecutionProvider") != NULL) c->warnings_naming_cuda++;
    }
    if (level >= SAM2_LOG_ERROR) c->errors++;
}

static void expect_device(uint32_t provider, int32_t device_id, int32_t fell_back,
                          uint32_t want_provider, int32_t want_fell_back) {
    CHECK(provider == want_provider);
    CHECK(device_id == 0);
    CHECK(fell_back == want_fell_back);
}

static void expect_cpu_providers(const char *names) {
    if (strcmp(names, "CPUExecutionProvider") != 0) {
        fprintf(stderr, "providers: \"%s\", expected \"CPUExecutionProvider\"\n", names);
        exit(1);
    }
}

static sam2_encoder *encoder_with(const sam2_provider *providers, size_t count) {
    char path[TEST_PATH_MAX];
    sam2_encoder_options options;
    CHECK_OK(sam2_encoder_options_init(&options, sizeof options));
    options.providers = providers;
    options.provider_count = count;
    sam2_encoder *encoder = NULL;
    CHECK_OK(sam2_encoder_new(test_model_path(path, "tiny_a_encoder.onnx"), &options, &encoder));
    return encoder;
}

static sam2_predictor *predictor_with(const sam2_encoder *encoder, const sam2_provider *providers,
                                      size_t count) {
    char path[TEST_PATH_MAX];
    sam2_predictor_options options;
    CHECK_OK(sam2_predictor_options_init(&options, sizeof options));
    options.providers = providers;
    options.provider_count = count;
    sam2_predictor *predictor = NULL;
    CHECK_OK(sam2_predictor_new(encoder, test_model_path(path, "tiny_a_decoder.onnx"), &options,
                                &predictor));
    return predictor;
}

/* Checks both handles' effective device, then that a click still selects the red disc. */
static void check_pair(const sam2_encoder *encoder, const sam2_predictor *predictor,
                       int32_t want_fell_back, const test_image *image, const test_truth *truth) {
    uint32_t provider = 99;
    int32_t device_id = 99, fell_back = 99;
    char names[256];
    CHECK_OK(sam2_encoder_device(encoder, &provider, &device_id, &fell_back));
    expect_device(provider, device_id, fell_back, SAM2_PROVIDER_CPU, want_fell_back);
    CHECK_OK(sam2_encoder_providers(encoder, names, sizeof names, NULL));
    expect_cpu_providers(names);
    provider = 99;
    device_id = fell_back = 99;
    CHECK_OK(sam2_predictor_device(predictor, &provider, &device_id, &fell_back));
    expect_device(provider, device_id, fell_back, SAM2_PROVIDER_CPU, want_fell_back);
    CHECK_OK(sam2_predictor_providers(predictor, names, sizeof names, NULL));
    expect_cpu_providers(names);

    sam2_embedding *embedding = test_encode(encoder, image);
    sam2_point pt = {TEST_SHAPES[RED_DISC].click[0], TEST_SHAPES[RED_DISC].click[1],
                     SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    sam2_masks *masks = test_predict1(predictor, embedding, &prompt);
    size_t n = (size_t)image->width * image->height;
    CHECK(test_iou(test_mask(masks, 0, n), truth->mask[RED_DISC], n) >= 0.9);
    sam2_masks_free(masks);
    sam2_embedding_free(embedding);
}

int main(void) {
    test_default_environment();
    test_init_runtime();
    test_image image = test_load_image("shapes.ppm");
    test_truth truth = test_load_truth();
    log_capture log = {0, 0, 0};
    CHECK_OK(sam2_set_log_callback(capture, &log, SAM2_LOG_WARNING));

    /* Defaults: the CPU, quietly. */
    sam2_encoder *encoder = encoder_with(NULL, 0);
    sam2_predictor *predictor = predictor_with(encoder, NULL, 0);
    check_pair(encoder, predictor, 0, &image, &truth);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);

    /* An explicit CPU request: the same. */
    const sam2_provider cpu = {SAM2_PROVIDER_CPU, 0, 0, SAM2_ARENA_NEXT_POWER_OF_TWO};
    encoder = encoder_with(&cpu, 1);
    predictor = predictor_with(encoder, &cpu, 1);
    check_pair(encoder, predictor, 0, &image, &truth);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
    CHECK(log.warnings == 0 && log.errors == 0);
    printf("  default and explicit CPU: CPUExecutionProvider, no fallback, no warning\n");

    /* CUDA (then the CPU) on a CPU-only runtime: falls back, says so once per session. */
    const sam2_provider cuda_then_cpu[2] = {
        {SAM2_PROVIDER_CUDA, 0, 1u << 30, SAM2_ARENA_SAME_AS_REQUESTED},
        {SAM2_PROVIDER_CPU, 0, 0, SAM2_ARENA_NEXT_POWER_OF_TWO},
    };
    encoder = encoder_with(cuda_then_cpu, 2);
    CHECK(log.warnings == 1 && log.warnings_naming_cuda == 1);
    predictor = predictor_with(encoder, cuda_then_cpu, 1);
    CHECK(log.warnings == 2 && log.warnings_naming_cuda == 2);
    check_pair(encoder, predictor, 1, &image, &truth);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
    printf("  CUDA requested, FALLBACK: runs on the CPU, fell_back = 1, one warning each\n");

    /* Warnings below the callback's minimum level are not delivered. */
    CHECK_OK(sam2_set_log_callback(capture, &log, SAM2_LOG_ERROR));
    encoder = encoder_with(cuda_then_cpu, 1);
    CHECK(log.warnings == 2);
    sam2_encoder_free(encoder);
    CHECK_OK(sam2_set_log_callback(NULL, NULL, SAM2_LOG_WARNING));
    CHECK(log.errors == 0);

    test_truth_free(&truth);
    test_image_free(&image);
    printf("test_devices: ok\n");
    return 0;
}
