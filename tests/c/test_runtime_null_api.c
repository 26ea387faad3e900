/*
 * A library that claims a compatible version (1.31.1) but whose OrtGetApiBase()->GetApi returns
 * NULL (fake_ort_null_api.so, built by CMake) is not a usable ONNX Runtime: sam2_runtime_init
 * must refuse it with SAM2_ERR_RUNTIME_NOT_FOUND naming the path, load nothing, and the real
 * library (SAM2_ONNXRUNTIME_PATH) must load afterwards. Its own process: a process holds one
 * runtime.
 *
 * Usage: test_runtime_null_api <path of fake_ort_null_api.so> (fake_ort_null_api.dll on Windows)
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

int main(int argc, char **argv) {
    test_default_environment();
    if (argc != 2) {
        fprintf(stderr, "usage: %s <fake_ort_null_api.so>\n", argv[0]);
        return 2;
    }
    const char *fake = argv[1];
    const char *real = getenv("SAM2_ONNXRUNTIME_PATH");
    CHECK(real != NULL && real[0] != '\0');

    CHECK_STATUS(sam2_runtime_init(fake), SAM2_ERR_RUNTIME_NOT_FOUND);
    CHECK_MESSAGE(fake);
    CHECK(sam2_runtime_version() == NULL);

    /* The failure must not keep the fake: the real library loads and works. */
    CHECK_OK(sam2_runtime_init(real));
    CHECK(sam2_runtime_version() != NULL && strcmp(sam2_runtime_version(), "1.31.1") == 0);
    sam2_encoder *encoder = test_open_encoder("tiny_a");
    sam2_encoder_free(encoder);
    printf("test_runtime_null_api: ok\n");
    return 0;
}
