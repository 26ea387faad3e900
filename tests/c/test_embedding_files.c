/*
 * Embedding files and residency through the C ABI:
 *   - save then load (host placement, device placement, with and without a predictor) gives an
 *     embedding that predicts exactly the masks of the original, for every model pair;
 *   - saving over an existing file replaces it; a refused save (a device embedding) neither
 *     creates the file nor changes an existing one, and leaves no temporary file behind;
 *   - sam2_embedding_to_host of a host embedding is an independent handle with the same masks;
 *   - a simulated device embedding reports its allocator and device, outlives its host original,
 *     and a predictor that allows embedding copies still refuses it (it has no device bytes).
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static test_image image;
static size_t plane;
static char dir[TEST_PATH_MAX];

static void file_path(char out[TEST_PATH_MAX], const char *name) {
    CHECK(snprintf(out, TEST_PATH_MAX, "%s/%s", dir, name) < TEST_PATH_MAX);
}

static int count_dir_entries(void) {
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) n++;
    }
    closedir(d);
    return n;
}

/* Every shape's click gives byte-identical masks (and equal scores) on both embeddings. */
static void same_masks(const sam2_predictor *predictor, const sam2_embedding *a,
                       const sam2_embedding *b, const char *what) {
    /* Every shape, or one under valgrind (which runs ONNX Runtime ~50x slower). */
    for (int i = 0; i < (test_under_valgrind() ? 1 : SHAPE_COUNT); i++) {
        sam2_point pt = {TEST_SHAPES[i].click[0], TEST_SHAPES[i].click[1], SAM2_POINT_POSITIVE};
        sam2_prompt prompt = test_points_prompt(&pt, 1);
        sam2_masks *ma = test_predict1(predictor, a, &prompt);
        sam2_masks *mb = test_predict1(predictor, b, &prompt);
        float sa = 0, sb = 1;
        CHECK_OK(sam2_masks_score(ma, 0, &sa));
        CHECK_OK(sam2_masks_score(mb, 0, &sb));
        if (sa != sb || memcmp(test_mask(ma, 0, plane), test_mask(mb, 0, plane), plane) != 0) {
            fprintf(stderr, "%s: click %s gives a different result\n", what, TEST_SHAPES[i].name);
            exit(1);
        }
        sam2_masks_free(mb);
        sam2_masks_free(ma);
    }
}

static void same_identity(const sam2_embedding *a, const sam2_embedding *b) {
    char fa[32], fb[32];
    CHECK_OK(sam2_embedding_fingerprint(a, fa, sizeof fa, NULL));
    CHECK_OK(sam2_embedding_fingerprint(b, fb, sizeof fb, NULL));
    CHECK(strcmp(fa, fb) == 0);
    uint32_t wa, ha, wb, hb;
    CHECK_OK(sam2_embedding_image_size(a, &wa, &ha));
    CHECK_OK(sam2_embedding_image_size(b, &wb, &hb));
    CHECK(wa == wb && ha == hb);
    CHECK(sam2_embedding_is_serializable(b) == 1);
    CHECK(strcmp(sam2_embedding_allocator_name(b), "Cpu") == 0);
}

static void round_trip(const char *pair) {
    sam2_encoder *encoder = test_open_encoder(pair);
    sam2_predictor *predictor = test_open_predictor(encoder, pair);
    sam2_embedding *original = test_encode(encoder, &image);
    char path[TEST_PATH_MAX];
    file_path(path, "round_trip.sam2");
    CHECK_OK(sam2_embedding_save(original, path));
    CHECK(count_dir_entries() == 1); /* no temporary file left */

    static const struct {
        int with_predictor;
        uint32_t placement;
        const char *what;
    } ways[] = {
        {0, SAM2_PLACE_HOST, "load without predictor"},
        {1, SAM2_PLACE_HOST, "load for the predictor, host"},
        {1, SAM2_PLACE_DEVICE, "load for the predictor, its device"},
    };
    for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
        sam2_embedding *loaded = NULL;
        CHECK_OK(sam2_embedding_load(path, ways[w].with_predictor ? predictor : NULL,
                                     ways[w].placement, &loaded));
        same_identity(original, loaded);
        char what[128];
        snprintf(what, sizeof what, "%s: %s", pair, ways[w].what);
        same_masks(predictor, original, loaded, what);
        sam2_embedding_free(loaded);
    }
    printf("  %-12s save + load (3 ways): identical masks\n", pair);

    /* The loaded embedding lives on its own: free everything else first. */
    sam2_embedding *loaded = NULL;
    CHECK_OK(sam2_embedding_load(path, predictor, SAM2_PLACE_HOST, &loaded));
    sam2_embedding_free(original);
    sam2_encoder_free(encoder);
    unlink(path);
    sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    sam2_masks *masks = test_predict1(predictor, loaded, &prompt);
    sam2_predictor_free(predictor);
    sam2_embedding_free(loaded);
    uint64_t area = 0;
    uint32_t box[4];
    CHECK_OK(sam2_masks_box(masks, 0, box, &area));
    CHECK(area > 1000);
    sam2_masks_free(masks);
}

static void overwrite_and_refusal(void) {
    sam2_encoder *ea = test_open_encoder("tiny_a");
    sam2_encoder *ec = test_open_encoder("tiny_c");
    sam2_embedding *a = test_encode(ea, &image);
    sam2_embedding *c = test_encode(ec, &image);
    char path[TEST_PATH_MAX], fresh[TEST_PATH_MAX];
    file_path(path, "overwritten.sam2");
    file_path(fresh, "never_written.sam2");

    /* Saving over an existing file replaces it. */
    CHECK_OK(sam2_embedding_save(a, path));
    CHECK_OK(sam2_embedding_save(c, path));
    sam2_embedding *loaded = NULL;
    CHECK_OK(sam2_embedding_load(path, NULL, SAM2_PLACE_HOST, &loaded));
    same_identity(c, loaded);
    sam2_embedding_free(loaded);

    /* A refused save: no new file, the existing one byte-identical, nothing else in the dir. */
    size_t before_len = 0, after_len = 0;
    uint8_t *before = test_read_file(path, &before_len);
    sam2_embedding *device = NULL;
    CHECK_OK(sam2_test_embedding_simulate_device(a, "DML", 3, &device));
    CHECK_STATUS(sam2_embedding_save(device, fresh), SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE);
    CHECK(access(fresh, F_OK) != 0);
    CHECK_STATUS(sam2_embedding_save(device, path), SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE);
    uint8_t *after = test_read_file(path, &after_len);
    CHECK(before_len == after_len && memcmp(before, after, before_len) == 0);
    CHECK(count_dir_entries() == 1);
    free(before);
    free(after);

    /* The refused embedding is still usable for what it can do. */
    CHECK(sam2_embedding_is_serializable(device) == 0);
    CHECK(strcmp(sam2_embedding_allocator_name(device), "DML") == 0);
    int32_t device_id = -1;
    CHECK_OK(sam2_embedding_device_id(device, &device_id));
    CHECK(device_id == 3);
    sam2_embedding_free(device);

    unlink(path);
    sam2_embedding_free(c);
    sam2_embedding_free(a);
    sam2_encoder_free(ec);
    sam2_encoder_free(ea);
}

/* An int8 variant (sam2-variant, made by the set-up) says so, its embeddings and their
 * files carry it, and the original's predictor refuses them, naming the precision. */
static void precision_variant(void) {
    char path[TEST_PATH_MAX], file[TEST_PATH_MAX];
    sam2_encoder *fp32 = test_open_encoder("tiny_a");
    sam2_encoder *int8 = NULL;
    CHECK_OK(sam2_encoder_new(test_model_path(path, "variants/tiny_a_int8/tiny_a_encoder.onnx"),
                              NULL, &int8));
    uint32_t precision = 777;
    CHECK_OK(sam2_encoder_precision(fp32, &precision));
    CHECK(precision == SAM2_PRECISION_FP32);
    CHECK_OK(sam2_encoder_precision(int8, &precision));
    CHECK(precision == SAM2_PRECISION_INT8);
    sam2_embedding *embedding = test_encode(int8, &image);
    precision = 777;
    CHECK_OK(sam2_embedding_precision(embedding, &precision));
    CHECK(precision == SAM2_PRECISION_INT8);

    file_path(file, "int8.sam2");
    CHECK_OK(sam2_embedding_save(embedding, file));
    sam2_embedding *loaded = NULL;
    CHECK_OK(sam2_embedding_load(file, NULL, SAM2_PLACE_HOST, &loaded));
    precision = 777;
    CHECK_OK(sam2_embedding_precision(loaded, &precision));
    CHECK(precision == SAM2_PRECISION_INT8);
    sam2_embedding_free(loaded);

    sam2_predictor *original = test_open_predictor(fp32, "tiny_a");
    sam2_embedding *const untouched = (sam2_embedding *)(uintptr_t)0x5a5a5a5aU;
    sam2_embedding *refused = untouched;
    CHECK_STATUS(sam2_embedding_load(file, original, SAM2_PLACE_HOST, &refused),
                 SAM2_ERR_MODEL_MISMATCH);
    CHECK(refused == untouched);
    char message[1024];
    CHECK_OK(sam2_last_error_message(message, sizeof message, NULL));
    CHECK(strstr(message, "(int8)") != NULL);
    unlink(file);

    /* The fp16 variant (for GPUs) says so too, and its embedding is refused the same way. */
    sam2_encoder *fp16 = NULL;
    CHECK_OK(sam2_encoder_new(test_model_path(path, "variants/tiny_a_fp16/tiny_a_encoder.onnx"),
                              NULL, &fp16));
    CHECK_OK(sam2_encoder_precision(fp16, &precision));
    CHECK(precision == SAM2_PRECISION_FP16);
    sam2_embedding *half = test_encode(fp16, &image);
    precision = 777;
    CHECK_OK(sam2_embedding_precision(half, &precision));
    CHECK(precision == SAM2_PRECISION_FP16);
    sam2_point pt = {10.0f, 10.0f, SAM2_POINT_POSITIVE};
    sam2_prompt click = test_points_prompt(&pt, 1);
    sam2_masks *masks = NULL;
    CHECK_STATUS(sam2_predict(original, half, &click, 1, NULL, &masks), SAM2_ERR_MODEL_MISMATCH);
    CHECK(masks == NULL);
    CHECK_OK(sam2_last_error_message(message, sizeof message, NULL));
    CHECK(strstr(message, "(fp16)") != NULL);
    sam2_embedding_free(half);
    sam2_encoder_free(fp16);

    sam2_predictor_free(original);
    sam2_embedding_free(embedding);
    sam2_encoder_free(int8);
    sam2_encoder_free(fp32);
    printf("  int8 and fp16 variants: reported, carried by their embeddings (int8: and file), refused "
           "by the original\n");
}

static void residency(void) {
    sam2_encoder *encoder = test_open_encoder("tiny_a");
    sam2_predictor *predictor = test_open_predictor(encoder, "tiny_a");
    sam2_embedding *original = test_encode(encoder, &image);
    CHECK(sam2_embedding_is_serializable(original) == 1);

    /* A host copy of a host embedding: an independent handle, the same masks. */
    sam2_embedding *copy = NULL;
    CHECK_OK(sam2_embedding_to_host(original, &copy));
    CHECK(copy != NULL && copy != original);
    same_identity(original, copy);
    same_masks(predictor, original, copy, "to_host");

    /* A simulated device embedding outlives the host original it was made from. */
    sam2_embedding *device = NULL;
    CHECK_OK(sam2_test_embedding_simulate_device(copy, "Cuda", 0, &device));
    sam2_embedding_free(copy);
    CHECK(sam2_embedding_is_serializable(device) == 0);
    CHECK(strcmp(sam2_embedding_allocator_name(device), "Cuda") == 0);
    char fp_device[32], fp_original[32];
    CHECK_OK(sam2_embedding_fingerprint(device, fp_device, sizeof fp_device, NULL));
    CHECK_OK(sam2_embedding_fingerprint(original, fp_original, sizeof fp_original, NULL));
    CHECK(strcmp(fp_device, fp_original) == 0);

    /* A predictor allowing embedding copies accepts host embeddings as before, and cannot copy
     * a simulated one (its bytes are not on a device). */
    sam2_predictor_options po;
    CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
    po.allow_embedding_copy = 1;
    char path[TEST_PATH_MAX];
    sam2_predictor *copying = NULL;
    CHECK_OK(sam2_predictor_new(encoder, test_model_path(path, "tiny_a_decoder.onnx"), &po,
                                &copying));
    same_masks(copying, original, original, "allow_embedding_copy");
    sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    sam2_masks *masks = NULL;
    CHECK_STATUS(sam2_predict(copying, device, &prompt, 1, NULL, &masks),
                 SAM2_ERR_ENVIRONMENT_CONFIGURATION);
    CHECK(masks == NULL);
    CHECK_STATUS(sam2_predict(predictor, device, &prompt, 1, NULL, &masks),
                 SAM2_ERR_INVALID_ARGUMENT);
    CHECK(masks == NULL);

    sam2_predictor_free(copying);
    sam2_embedding_free(device);
    sam2_embedding_free(original);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
    printf("  to_host, simulated device embedding, allow_embedding_copy: ok\n");
}

int main(void) {
    test_default_environment();
    test_init_runtime();
    image = test_load_image("shapes.ppm");
    plane = (size_t)image.width * image.height;
    CHECK(mkdtemp(test_scratch_template(dir, "sam2_test_files_")) != NULL);

    /* Under valgrind, one pair of each encoder family (their files differ in tensor names). */
    for (int p = 0; p < PAIR_COUNT; p++) {
        if (!test_under_valgrind() || strcmp(TEST_PAIRS[p], "tiny_a") == 0 ||
            strcmp(TEST_PAIRS[p], "tiny_c") == 0) {
            round_trip(TEST_PAIRS[p]);
        }
    }
    overwrite_and_refusal();
    precision_variant();
    residency();

    CHECK(count_dir_entries() == 0);
    CHECK(rmdir(dir) == 0);
    test_image_free(&image);
    printf("test_embedding_files: ok\n");
    return 0;
}
