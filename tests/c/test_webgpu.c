/*
 * The device path through the C ABI on a real device: ONNX Runtime's WebGPU provider (on Mesa's
 * llvmpipe in the test command; tools/setup/setup-webgpu.sh), loaded from SAM2_WEBGPU_ONNXRUNTIME:
 *   - an encoder asked for WebGPU under FAIL runs there, and its embedding stays in device memory:
 *     not serializable, named by ONNX Runtime's allocator ("WebGPU_Buf");
 *   - saving it is refused with SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE and writes nothing;
 *   - a WebGPU predictor reads it in place, and each click gives its shape (IoU >= 0.9);
 *   - sam2_embedding_to_host gives a host copy that saves, and the file loads straight onto the
 *     device (SAM2_PLACE_DEVICE) and predicts the same masks.
 * Without the rig it says "skipped: no WebGPU device", unless SAM2_WEBGPU_REQUIRED=1. Under
 * valgrind it is skipped too (a software GPU under memcheck is hours; the other programs cover
 * the same handles on the host).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

int main(void) {
    const char *lib = getenv("SAM2_WEBGPU_ONNXRUNTIME");
    const char *required = getenv("SAM2_WEBGPU_REQUIRED");
    if (lib == NULL || lib[0] == '\0') {
        if (required != NULL && strcmp(required, "1") == 0) {
            fprintf(stderr, "SAM2_WEBGPU_REQUIRED=1 but SAM2_WEBGPU_ONNXRUNTIME is not set\n");
            return 1;
        }
        printf("test_webgpu: skipped: no WebGPU device\n");
        return 0;
    }
    if (test_under_valgrind()) {
        printf("test_webgpu: skipped under valgrind\n");
        return 0;
    }
    test_default_environment();
    CHECK_OK(sam2_runtime_init(lib));

    sam2_provider webgpu = {SAM2_PROVIDER_WEBGPU, 0, 0, 0};
    char path[TEST_PATH_MAX];
    sam2_encoder_options eopts;
    CHECK_OK(sam2_encoder_options_init(&eopts, sizeof eopts));
    eopts.providers = &webgpu;
    eopts.provider_count = 1;
    eopts.on_device_mismatch = SAM2_ON_MISMATCH_FAIL;
    sam2_encoder *encoder = NULL;
    CHECK_OK(sam2_encoder_new(test_model_path(path, "tiny_a_encoder.onnx"), &eopts, &encoder));
    uint32_t provider = 99;
    int32_t device_id = 99, fell_back = 99;
    CHECK_OK(sam2_encoder_device(encoder, &provider, &device_id, &fell_back));
    CHECK(provider == SAM2_PROVIDER_WEBGPU && fell_back == 0);

    sam2_predictor_options popts;
    CHECK_OK(sam2_predictor_options_init(&popts, sizeof popts));
    popts.providers = &webgpu;
    popts.provider_count = 1;
    popts.on_device_mismatch = SAM2_ON_MISMATCH_FAIL;
    sam2_predictor *predictor = NULL;
    CHECK_OK(sam2_predictor_new(encoder, test_model_path(path, "tiny_a_decoder.onnx"), &popts,
                                &predictor));

    test_image image = test_load_image("shapes.ppm");
    size_t stride = (size_t)image.width * 3;
    sam2_embedding *embedding = NULL;
    CHECK_OK(sam2_encode(encoder, image.data, stride * image.height, image.width, image.height,
                         stride, SAM2_PIXEL_RGB, &embedding));
    CHECK(sam2_embedding_is_serializable(embedding) == 0);
    const char *allocator = sam2_embedding_allocator_name(embedding);
    CHECK(allocator != NULL && strncmp(allocator, "WebGPU", 6) == 0);

    char dir[TEST_PATH_MAX];
    test_scratch_template(dir, "webgpu");
    CHECK(mkdtemp(dir) != NULL);
    char file[TEST_PATH_MAX + 32];
    snprintf(file, sizeof file, "%s/device.sam2", dir);
    CHECK_FAILS(sam2_embedding_save(embedding, file), SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE,
                allocator);
    CHECK(access(file, F_OK) != 0);

    test_truth truth = test_load_truth();
    size_t plane = (size_t)image.width * image.height;
    sam2_embedding *host = NULL;
    CHECK_OK(sam2_embedding_to_host(embedding, &host));
    CHECK(sam2_embedding_is_serializable(host) == 1);
    CHECK_OK(sam2_embedding_save(host, file));
    sam2_embedding *loaded = NULL;
    /* Loaded straight onto the predictor's device. */
    CHECK_OK(sam2_embedding_load(file, predictor, SAM2_PLACE_DEVICE, &loaded));
    CHECK(sam2_embedding_is_serializable(loaded) == 0);
    for (int i = 0; i < SHAPE_COUNT; i++) {
        sam2_point pt = {TEST_SHAPES[i].click[0], TEST_SHAPES[i].click[1], SAM2_POINT_POSITIVE};
        sam2_prompt prompt = test_points_prompt(&pt, 1);
        sam2_masks *on_device = NULL, *from_file = NULL;
        CHECK_OK(sam2_predict(predictor, embedding, &prompt, 1, NULL, &on_device));
        CHECK_OK(sam2_predict(predictor, loaded, &prompt, 1, NULL, &from_file));
        const uint8_t *a = test_mask(on_device, 0, plane);
        const uint8_t *b = test_mask(from_file, 0, plane);
        uint8_t *want = test_click_truth(&truth, i);
        double truth_iou = test_iou(a, want, plane), same = test_iou(a, b, plane);
        printf("test_webgpu: shape %d: IoU %.3f with the ground truth, %.4f with the saved copy\n",
               i, truth_iou, same);
        CHECK(truth_iou >= 0.9);
        CHECK(same >= 0.99);
        free(want);
        sam2_masks_free(on_device);
        sam2_masks_free(from_file);
    }
    /* The README's example on a GPU, unchanged: a predictor made for the encoder with NULL
     * options runs on the encoder's device and reads its embedding in place. */
    sam2_predictor *following = NULL;
    CHECK_OK(sam2_predictor_new(encoder, test_model_path(path, "tiny_a_decoder.onnx"), NULL,
                                &following));
    provider = 99;
    CHECK_OK(sam2_predictor_device(following, &provider, &device_id, &fell_back));
    CHECK(provider == SAM2_PROVIDER_WEBGPU && fell_back == 0);
    {
        sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
        sam2_prompt prompt = test_points_prompt(&pt, 1);
        sam2_masks *masks = NULL;
        CHECK_OK(sam2_predict(following, embedding, &prompt, 1, NULL, &masks));
        uint8_t *want = test_click_truth(&truth, 0);
        double iou = test_iou(test_mask(masks, 0, plane), want, plane);
        printf("test_webgpu: the predictor that follows its encoder: IoU %.3f\n", iou);
        CHECK(iou >= 0.9);
        free(want);
        sam2_masks_free(masks);
    }
    sam2_predictor_free(following);
    remove(file);
    rmdir(dir);
    test_truth_free(&truth);
    sam2_embedding_free(loaded);
    sam2_embedding_free(host);
    sam2_embedding_free(embedding);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
    test_image_free(&image);
    printf("test_webgpu: ok\n");
    return 0;
}
