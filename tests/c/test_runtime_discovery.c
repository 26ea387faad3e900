/*
 * Finding ONNX Runtime without being told where it is (its own process: a process holds one
 * runtime). CMake puts a copy of libsam2.so in a directory of its own, this program's RPATH:
 *
 *   test_runtime_discovery found    libonnxruntime.so.1 is linked beside that libsam2.so: with
 *                                   neither environment variable set, sam2_runtime_init(NULL)
 *                                   loads it, and the log names where it came from;
 *   test_runtime_discovery missing  nothing is beside it: SAM2_ERR_RUNTIME_NOT_FOUND, and the
 *                                   message names what was tried and how to fix it.
 *
 * On Windows (tools/ci/test-windows.sh, under Wine) the directories hold sam2.dll, found before any
 * other because this program runs from there, with onnxruntime.dll beside it or not; what is
 * checked is the same, except that Windows has no system search to try (docs/platforms.md): the
 * message must not claim one.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sam2.h"

#ifdef _WIN32
/* Removes the variable from the C library's environment and the process's (which sam2 reads). */
#define unsetenv(name) _putenv_s(name, "")
#define SEP "\\"
#define ORT_NAME "onnxruntime.dll"
#else
#define SEP "/"
#define ORT_NAME "libonnxruntime.so"
#endif

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static char loaded_message[4096];

static void on_log(uint32_t level, const char *message, void *user_data) {
    (void)user_data;
    if (level == SAM2_LOG_INFO && strstr(message, "loaded ONNX Runtime") != NULL) {
        strncpy(loaded_message, message, sizeof loaded_message - 1);
    }
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    /* Only the directory of libsam2.so and the system search are left to find it. */
    unsetenv("SAM2_ONNXRUNTIME_PATH");
    unsetenv("ORT_DYLIB_PATH");
    CHECK(sam2_set_log_callback(on_log, NULL, SAM2_LOG_INFO) == SAM2_OK);

    if (strcmp(argv[1], "found") == 0) {
        CHECK(sam2_runtime_init(NULL) == SAM2_OK);
        CHECK(sam2_runtime_version() != NULL);
        CHECK(strcmp(sam2_runtime_version(), "1.31.1") == 0);
        printf("%s\n", loaded_message);
        CHECK(strstr(loaded_message, "beside libsam2") != NULL);
        CHECK(strstr(loaded_message, "libsam2_beside") != NULL); /* the directory CMake made */
    } else {
        CHECK(sam2_runtime_init(NULL) == SAM2_ERR_RUNTIME_NOT_FOUND);
        char message[4096];
        CHECK(sam2_last_error_message(message, sizeof message, NULL) == SAM2_OK);
        printf("%s\n", message);
        CHECK(strstr(message, "libsam2_beside_missing" SEP ORT_NAME " (beside libsam2): not present") != NULL);
#ifdef _WIN32
        CHECK(strstr(message, "system library search") == NULL);
#else
        CHECK(strstr(message, "system library search") != NULL);
        CHECK(strstr(message, "libonnxruntime.so.1") != NULL);
#endif
        CHECK(strstr(message, "SAM2_ONNXRUNTIME_PATH") != NULL);
        CHECK(strstr(message, "to " ORT_NAME " or the directory") != NULL);
        CHECK(sam2_runtime_version() == NULL);
    }
    CHECK(sam2_set_log_callback(NULL, NULL, SAM2_LOG_INFO) == SAM2_OK);
    printf("test_runtime_discovery %s: ok\n", argv[1]);
    return 0;
}
