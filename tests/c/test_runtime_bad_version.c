/*
 * Loading ONNX Runtime (its own process: a process holds one runtime):
 *   - a library that exports OrtGetApiBase but reports version 1.20.0 (fake_ort.so, built by
 *     CMake) is refused with SAM2_ERR_RUNTIME_NOT_FOUND naming the path and the version;
 *   - a path that does not exist is refused the same way, naming the path;
 *   - nothing is loaded by these failures, and the real library (SAM2_ONNXRUNTIME_PATH) then loads.
 *
 * Usage: test_runtime_bad_version <path of fake_ort.so> (fake_ort.dll on Windows)
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

int main(int argc, char **argv) {
    test_default_environment();
    if (argc != 2) {
        fprintf(stderr, "usage: %s <fake_ort.so>\n", argv[0]);
        return 2;
    }
    const char *fake = argv[1];
    const char *real = getenv("SAM2_ONNXRUNTIME_PATH");
    CHECK(real != NULL && real[0] != '\0');
    CHECK(sam2_runtime_version() == NULL);

    /* Too old: the message names the file, the version found and how to fix it. */
    CHECK_STATUS(sam2_runtime_init(fake), SAM2_ERR_RUNTIME_NOT_FOUND);
    CHECK_MESSAGE(fake);
    CHECK_MESSAGE("1.20.0");
    CHECK_MESSAGE("SAM2_ONNXRUNTIME_PATH");
    CHECK(sam2_runtime_version() == NULL);

    /* Missing. */
#ifdef _WIN32
    const char *missing = "C:\\nonexistent\\dir\\onnxruntime.dll";
#else
    const char *missing = "/nonexistent/dir/libonnxruntime.so.1.31.1";
#endif
    CHECK_STATUS(sam2_runtime_init(missing), SAM2_ERR_RUNTIME_NOT_FOUND);
    CHECK_MESSAGE(missing);
    CHECK(sam2_runtime_version() == NULL);

    /* Trying the fake again changes nothing (it was not kept loaded half-way). */
    CHECK_STATUS(sam2_runtime_init(fake), SAM2_ERR_RUNTIME_NOT_FOUND);
    CHECK_MESSAGE("1.20.0");

    /* The real one. */
    CHECK_OK(sam2_runtime_init(real));
    CHECK(sam2_runtime_version() != NULL);
    CHECK(strcmp(sam2_runtime_version(), "1.31.1") == 0);

    /* And it works: an encoder loads and encodes. */
    sam2_encoder *encoder = test_open_encoder("tiny_a");
    uint8_t pixels[32 * 24 * 3];
    memset(pixels, 128, sizeof pixels);
    sam2_embedding *embedding = NULL;
    CHECK_OK(sam2_encode(encoder, pixels, sizeof pixels, 32, 24, 0, SAM2_PIXEL_RGB, &embedding));
    sam2_embedding_free(embedding);
    sam2_encoder_free(encoder);

    /* Once loaded, the fake is refused as a switch of runtime. */
    CHECK_STATUS(sam2_runtime_init(fake), SAM2_ERR_ENVIRONMENT_CONFIGURATION);
    CHECK_MESSAGE(fake);
    printf("test_runtime_bad_version: ok\n");
    return 0;
}
