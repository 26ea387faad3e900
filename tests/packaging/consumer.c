/*
 * A host program built against an installed sam2 with `pkg-config --cflags --libs sam2` (see
 * tools/ci/test-packaging.sh). It checks that the header's SAM2_VERSION_* macros, sam2_version()
 * and the expected version agree, lets the library find ONNX Runtime on its own, and segments
 * the red disc of testdata/shapes.ppm from one click.
 *
 *   sam2_consumer ENCODER DECODER TESTDATA_DIR VERSION [LOADED_FROM]
 *
 * LOADED_FROM, when given, must appear in the library's "loaded ONNX Runtime ... from PATH
 * (SOURCE)" log line: that is how a test checks which discovery step found the runtime.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sam2.h>

#include "pnm.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static char loaded[4096];

static void on_log(uint32_t level, const char *message, void *user_data) {
    (void)level;
    (void)user_data;
    if (strstr(message, "loaded ONNX Runtime") != NULL) {
        strncpy(loaded, message, sizeof loaded - 1);
    }
}

static int fail(const char *what) {
    char message[4096] = "";
    sam2_last_error_message(message, sizeof message, NULL);
    fprintf(stderr, "sam2_consumer: %s failed: %s\n", what, message);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s ENCODER DECODER TESTDATA_DIR VERSION [LOADED_FROM]\n", argv[0]);
        return 2;
    }
    const char *header_version =
        STR(SAM2_VERSION_MAJOR) "." STR(SAM2_VERSION_MINOR) "." STR(SAM2_VERSION_PATCH);
    printf("sam2 header %s, library %s, expected %s\n", header_version, sam2_version(), argv[4]);
    if (strcmp(header_version, argv[4]) != 0 || strcmp(sam2_version(), argv[4]) != 0) {
        fprintf(stderr, "sam2_consumer: versions disagree\n");
        return 1;
    }

    if (sam2_set_log_callback(on_log, NULL, SAM2_LOG_INFO) != SAM2_OK) return fail("sam2_set_log_callback");
    if (sam2_runtime_init(NULL) != SAM2_OK) return fail("sam2_runtime_init");
    printf("%s\n", loaded);
    if (argc == 6 && strstr(loaded, argv[5]) == NULL) {
        fprintf(stderr, "sam2_consumer: ONNX Runtime was not loaded from \"%s\"\n", argv[5]);
        return 1;
    }

    char path[4096];
    uint32_t width, height, channels, tw, th, tc;
    snprintf(path, sizeof path, "%s/shapes.ppm", argv[3]);
    uint8_t *rgb = pnm_read(path, &width, &height, &channels);
    snprintf(path, sizeof path, "%s/shapes_red_disc.pgm", argv[3]);
    uint8_t *truth = pnm_read(path, &tw, &th, &tc);
    if (rgb == NULL || truth == NULL || channels != 3 || tw != width || th != height) {
        fprintf(stderr, "sam2_consumer: cannot read the test images in %s\n", argv[3]);
        return 1;
    }

    sam2_encoder *encoder = NULL;
    sam2_predictor *predictor = NULL;
    sam2_embedding *embedding = NULL;
    sam2_masks *masks = NULL;
    if (sam2_encoder_new(argv[1], NULL, &encoder) != SAM2_OK) return fail("sam2_encoder_new");
    if (sam2_predictor_new(encoder, argv[2], NULL, &predictor) != SAM2_OK) return fail("sam2_predictor_new");
    if (sam2_encode(encoder, rgb, (size_t)width * height * 3, width, height, width * 3,
                    SAM2_PIXEL_RGB, &embedding) != SAM2_OK)
        return fail("sam2_encode");
    sam2_point click = {100.0f, 112.0f, SAM2_POINT_POSITIVE}; /* inside the red disc */
    sam2_prompt prompt = {&click, 1, 0, {0, 0, 0, 0}, NULL, 0};
    if (sam2_predict(predictor, embedding, &prompt, 1, NULL, &masks) != SAM2_OK) return fail("sam2_predict");
    const uint8_t *mask = NULL;
    size_t len = 0;
    if (sam2_masks_mask(masks, 0, &mask, &len) != SAM2_OK) return fail("sam2_masks_mask");
    double iou = len == (size_t)width * height ? pnm_iou(mask, truth, len) : 0.0;
    printf("click (100, 112) on shapes.ppm: red disc IoU %.3f\n", iou);

    sam2_masks_free(masks);
    sam2_embedding_free(embedding);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
    sam2_set_log_callback(NULL, NULL, SAM2_LOG_INFO);
    free(rgb);
    free(truth);
    return iou >= 0.9 ? 0 : 1;
}
