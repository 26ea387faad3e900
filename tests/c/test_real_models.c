/*
 * The real SAM2 architecture through the C ABI: SAM2.1 hiera-tiny exported by
 * samexporter 0.5.0 and by ONNX Runtime 1.31.1's SAM2 tools (single- and multi-mask decoders),
 * from $SAM2_REAL_MODELS (tools/setup/setup-real.sh), and EdgeTAM's image pairs
 * (sam2-export-edgetam, ONNX Runtime's SAM2 tools run on EdgeTAM) from
 * $SAM2_EDGETAM_MODELS (tools/setup/setup-edgetam.sh), through the same entry points. Default
 * options throughout, as a new user would call the library: encode, click, a batch mixing clicks, a
 * box and a refinement (each object as a single call gives it), multimask, and a save/load round
 * trip. The masks are compared with the reference pipelines by tests/it/real_models.rs.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static const char *const PAIRS[][2] = {
    {"sam2.1_hiera_tiny.encoder.onnx", "sam2.1_hiera_tiny.decoder.onnx"},
    {"sam2.1_hiera_tiny_image_encoder.onnx", "sam2.1_hiera_tiny_image_decoder.onnx"},
    {"sam2.1_hiera_tiny_image_encoder.onnx", "sam2.1_hiera_tiny_image_decoder_multi.onnx"},
};

static const char *const EDGETAM_PAIRS[][2] = {
    {"edgetam_image_encoder.onnx", "edgetam_image_decoder.onnx"},
    {"edgetam_image_encoder.onnx", "edgetam_image_decoder_multi.onnx"},
};

/* The directory a variable names, or exit naming the set-up script that sets it. */
static const char *models_dir(const char *var, const char *setup) {
    const char *dir = getenv(var);
    if (dir == NULL || dir[0] == '\0') {
        fprintf(stderr, "%s is not set: run `. %s` (the README's test command does) before "
                        "configuring the C tests\n", var, setup);
        exit(1);
    }
    return dir;
}

static char *model_path(char *out, const char *dir, const char *file) {
    snprintf(out, TEST_PATH_MAX, "%s/%s", dir, file);
    return out;
}

static sam2_masks *predict(const sam2_predictor *p, const sam2_embedding *e, const sam2_prompt *prompts,
                           size_t n, int multimask) {
    sam2_predict_options options;
    CHECK_OK(sam2_predict_options_init(&options, sizeof options));
    options.multimask = multimask;
    sam2_masks *masks = NULL;
    CHECK_OK(sam2_predict(p, e, prompts, n, &options, &masks));
    return masks;
}

static void run_pair(const char *models, const char *encoder_file, const char *decoder_file,
                     const test_image *image) {
    char path[TEST_PATH_MAX];
    const size_t plane = (size_t)image->width * image->height;
    sam2_encoder *encoder = NULL;
    CHECK_OK(sam2_encoder_new(model_path(path, models, encoder_file), NULL, &encoder));
    sam2_predictor *predictor = NULL;
    CHECK_OK(sam2_predictor_new(encoder, model_path(path, models, decoder_file), NULL, &predictor));
    sam2_embedding *embedding = test_encode(encoder, image);

    /* A click, a box, a positive and a negative click. */
    sam2_point star = {580.0f, 190.0f, 1};
    sam2_point teal[2] = {{160.0f, 440.0f, 1}, {630.0f, 460.0f, 0}};
    sam2_prompt prompts[4];
    prompts[0] = test_points_prompt(&star, 1);
    prompts[1] = test_box_prompt(52.0f, 82.0f, 327.0f, 257.0f);
    prompts[2] = test_points_prompt(teal, 2);
    sam2_masks *first = test_predict1(predictor, embedding, &prompts[0]);
    const float *logits = NULL;
    size_t logits_len = 0;
    uint32_t side = 0;
    CHECK_OK(sam2_masks_low_res(first, 0, &logits, &logits_len, &side));
    CHECK(side == 256 && logits_len == 256u * 256u);
    /* The same click refined with its own logits. */
    prompts[3] = prompts[0];
    prompts[3].mask_input = logits;
    prompts[3].mask_input_len = logits_len;

    /* The batch: each object as a single call gives it (batched kernels may round a few pixels
     * differently). */
    sam2_masks *batch = predict(predictor, embedding, prompts, 4, 0);
    size_t objects = 0, candidates = 0;
    CHECK_OK(sam2_masks_count(batch, &objects, &candidates));
    CHECK(objects == 4 && candidates == 1);
    for (size_t i = 0; i < 4; i++) {
        sam2_masks *one = test_predict1(predictor, embedding, &prompts[i]);
        double iou = test_iou(test_mask(batch, i, plane), test_mask(one, 0, plane), plane);
        float a = 0, b = 0;
        CHECK_OK(sam2_masks_score(batch, i, &a));
        CHECK_OK(sam2_masks_score(one, 0, &b));
        if (iou < 0.999 || a - b > 1e-4f || b - a > 1e-4f) {
            fprintf(stderr, "%s object %zu: batch vs single IoU %.5f, scores %f vs %f\n", decoder_file,
                    i, iou, a, b);
            exit(1);
        }
        uint64_t area = test_area(test_mask(one, 0, plane), plane);
        CHECK(area > 0 && area < plane);
        sam2_masks_free(one);
    }
    /* Different prompts give different masks. */
    CHECK(test_iou(test_mask(batch, 0, plane), test_mask(batch, 1, plane), plane) < 0.99);

    /* Multimask: three candidates from the multi-mask decoders, one from ONNX Runtime's default. */
    sam2_masks *multi = predict(predictor, embedding, prompts, 1, 1);
    CHECK_OK(sam2_masks_count(multi, &objects, &candidates));
    int three = strstr(decoder_file, "_image_decoder.onnx") == NULL;
    CHECK(objects == 1 && candidates == (three ? 3u : 1u));
    sam2_masks_free(multi);

    /* Save and load: the loaded embedding predicts the same mask. */
    char dir[TEST_PATH_MAX], file[TEST_PATH_MAX + 16];
    test_scratch_template(dir, "sam2-real-");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(file, sizeof file, "%s/e.sam2", dir);
    CHECK_OK(sam2_embedding_save(embedding, file));
    sam2_embedding *loaded = NULL;
    CHECK_OK(sam2_embedding_load(file, predictor, SAM2_PLACE_HOST, &loaded));
    sam2_masks *again = test_predict1(predictor, loaded, &prompts[0]);
    CHECK(memcmp(test_mask(again, 0, plane), test_mask(first, 0, plane), plane) == 0);
    sam2_masks_free(again);
    sam2_embedding_free(loaded);
    CHECK(unlink(file) == 0 && rmdir(dir) == 0);

    sam2_masks_free(batch);
    sam2_masks_free(first);
    sam2_embedding_free(embedding);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
    printf("%s + %s: click, box, negative, refinement, batch of 4, multimask, save/load ok\n",
           encoder_file, decoder_file);
}

int main(void) {
    test_default_environment();
    test_init_runtime();
    test_image image = test_load_image("demo.ppm");
    /* Not under valgrind: the real encoder's one-off optimisation and encode take over a quarter
     * of an hour there (measured: more than 12 CPU minutes for one pair), and the C paths it
     * would check are the ones every other program runs under valgrind on the tiny models. */
    if (test_under_valgrind()) {
        printf("test_real_models: not run under valgrind (see the comment in main)\n");
        test_image_free(&image);
        return 0;
    }
    /* SAM2_TEST_REAL_FIRST_PAIRS=1: the first pair of each family only (tools/ci/test-windows.sh
     * under Wine, where what is Windows' own, paths and mapping the files, is the same for every
     * pair; ctest runs them all natively). */
    const char *first = getenv("SAM2_TEST_REAL_FIRST_PAIRS");
    int first_only = first != NULL && strcmp(first, "1") == 0;
    const char *real = models_dir("SAM2_REAL_MODELS", "tools/setup/setup-real.sh");
    for (size_t i = 0; i < (first_only ? 1 : sizeof PAIRS / sizeof PAIRS[0]); i++)
        run_pair(real, PAIRS[i][0], PAIRS[i][1], &image);
    const char *edgetam = models_dir("SAM2_EDGETAM_MODELS", "tools/setup/setup-edgetam.sh");
    for (size_t i = 0; i < (first_only ? 1 : sizeof EDGETAM_PAIRS / sizeof EDGETAM_PAIRS[0]); i++)
        run_pair(edgetam, EDGETAM_PAIRS[i][0], EDGETAM_PAIRS[i][1], &image);
    if (first_only) printf("test_real_models: the first pair of each family only\n");
    test_image_free(&image);
    return 0;
}
