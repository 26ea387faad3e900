/* A stand-in for libonnxruntime.so (onnxruntime.dll on Windows, built with mingw-w64 by
 * tools/ci/test-windows.sh): exports OrtGetApiBase like the real one (layout of
 * onnxruntime_c_api.h: struct OrtApiBase { GetApi; GetVersionString; }), reports the version
 * FAKE_ORT_VERSION, and has no API (GetApi returns NULL). */
#include <stddef.h>
#include <stdint.h>

typedef struct OrtApi OrtApi;

typedef struct OrtApiBase {
    const OrtApi *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
} OrtApiBase;

static const OrtApi *get_api(uint32_t version) {
    (void)version;
    return NULL;
}

static const char *get_version_string(void) {
    return FAKE_ORT_VERSION;
}

static const OrtApiBase api_base = {get_api, get_version_string};

const OrtApiBase *OrtGetApiBase(void);

#ifdef _WIN32
#define FAKE_ORT_EXPORT __declspec(dllexport)
#else
#define FAKE_ORT_EXPORT __attribute__((visibility("default")))
#endif

FAKE_ORT_EXPORT const OrtApiBase *OrtGetApiBase(void) {
    return &api_base;
}
