/*
 * Segmentation through the C ABI, for each generated model pair (contracts A, B, C, and A with a
 * float16 encoder), on testdata/shapes.ppm against its ground-truth masks:
 *   - a click inside each shape selects it (a twin selects both twins), IoU >= 0.9;
 *   - a click in one twin plus a negative click in the other selects only the first;
 *   - a box around each shape selects it;
 *   - multimask returns 3 scored candidates, the best of which is the single-mask answer;
 *   - a batch of prompts gives the same masks as the same prompts one at a time;
 *   - refining with sam2_masks_low_res as mask_input keeps the shape;
 *   - sam2_masks_box reports each mask's own bounds and area;
 *   - the same picture given as BGR, RGBA, BGRA or with padded rows gives a byte-identical
 *     embedding (compared through sam2_embedding_save) and identical masks; GRAY equals RGB with
 *     R = G = B.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define MIN_IOU 0.9

typedef struct ctx {
    const char *pair;
    const test_image *image;
    const test_truth *truth;
    size_t plane; /* width * height */
    sam2_encoder *encoder;
    sam2_predictor *predictor;
    sam2_embedding *embedding;
} ctx;

/* Shapes each per-shape check covers: all of them, or one under valgrind (every code path still
 * runs for each model pair valgrind sees; valgrind runs ONNX Runtime ~50x slower). */
static int shapes_checked(void) {
    return test_under_valgrind() ? 1 : SHAPE_COUNT;
}

static void expect_iou(const ctx *c, const char *what, const uint8_t *mask, const uint8_t *want,
                       double min) {
    double iou = test_iou(mask, want, c->plane);
    printf("  %-12s %-40s IoU %.3f\n", c->pair, what, iou);
    if (iou < min) {
        fprintf(stderr, "%s: %s: IoU %.3f < %.2f\n", c->pair, what, iou, min);
        exit(1);
    }
}

/* sam2_masks_box agrees with the mask's own bounds; the size is the image size. */
static void check_boxes(const ctx *c, const sam2_masks *masks) {
    size_t objects = 0, candidates = 0;
    CHECK_OK(sam2_masks_count(masks, &objects, &candidates));
    uint32_t w = 0, h = 0;
    CHECK_OK(sam2_masks_size(masks, &w, &h));
    CHECK(w == c->image->width && h == c->image->height);
    for (size_t i = 0; i < objects * candidates; i++) {
        const uint8_t *m = test_mask(masks, i, c->plane);
        for (size_t k = 0; k < c->plane; k++) CHECK(m[k] == 0 || m[k] == 1);
        uint32_t box[4] = {9, 9, 9, 9}, want[4];
        uint64_t area = 12345, want_area = 0;
        CHECK_OK(sam2_masks_box(masks, i, box, &area));
        test_bounds(m, w, h, want, &want_area);
        CHECK(area == want_area);
        CHECK(memcmp(box, want, sizeof box) == 0);
    }
}

static sam2_masks *predict(const ctx *c, const sam2_prompt *prompts, size_t count,
                           uint32_t multimask) {
    sam2_predict_options options;
    CHECK_OK(sam2_predict_options_init(&options, sizeof options));
    options.multimask = multimask;
    sam2_masks *masks = NULL;
    CHECK_OK(sam2_predict(c->predictor, c->embedding, prompts, count, &options, &masks));
    size_t objects = 0, candidates = 0;
    CHECK_OK(sam2_masks_count(masks, &objects, &candidates));
    CHECK(objects == count);
    CHECK(candidates == (multimask ? 3u : 1u));
    check_boxes(c, masks);
    return masks;
}

static sam2_prompt click_prompt(sam2_point *storage, int shape) {
    storage->x = TEST_SHAPES[shape].click[0];
    storage->y = TEST_SHAPES[shape].click[1];
    storage->label = SAM2_POINT_POSITIVE;
    return test_points_prompt(storage, 1);
}

static void clicks(const ctx *c) {
    for (int i = 0; i < shapes_checked(); i++) {
        sam2_point pt;
        sam2_prompt prompt = click_prompt(&pt, i);
        sam2_masks *masks = predict(c, &prompt, 1, 0);
        uint8_t *want = test_click_truth(c->truth, i);
        char what[96];
        snprintf(what, sizeof what, "click %s", TEST_SHAPES[i].name);
        expect_iou(c, what, test_mask(masks, 0, c->plane), want, MIN_IOU);
        free(want);
        sam2_masks_free(masks);
    }
}

static void negative_clicks(const ctx *c) {
    for (int i = TWIN_LEFT; i <= TWIN_RIGHT; i++) {
        int other = TEST_SHAPES[i].twin;
        sam2_point pts[2] = {
            {TEST_SHAPES[i].click[0], TEST_SHAPES[i].click[1], SAM2_POINT_POSITIVE},
            {TEST_SHAPES[other].click[0], TEST_SHAPES[other].click[1], SAM2_POINT_NEGATIVE},
        };
        sam2_prompt prompt = test_points_prompt(pts, 2);
        sam2_masks *masks = predict(c, &prompt, 1, 0);
        const uint8_t *m = test_mask(masks, 0, c->plane);
        char what[96];
        snprintf(what, sizeof what, "click %s, not %s", TEST_SHAPES[i].name,
                 TEST_SHAPES[other].name);
        expect_iou(c, what, m, c->truth->mask[i], MIN_IOU);
        /* The excluded twin is (almost) entirely left out. */
        size_t overlap = 0;
        for (size_t k = 0; k < c->plane; k++) overlap += m[k] && c->truth->mask[other][k];
        CHECK(overlap < test_area(c->truth->mask[other], c->plane) / 20);
        sam2_masks_free(masks);
    }
}

static void boxes(const ctx *c) {
    for (int i = 0; i < shapes_checked(); i++) {
        const float *b = TEST_SHAPES[i].bbox;
        /* The inclusive pixel bounds as a box in continuous coordinates, 2 px of margin. */
        sam2_prompt prompt = test_box_prompt(b[0] - 2, b[1] - 2, b[2] + 3, b[3] + 3);
        sam2_masks *masks = predict(c, &prompt, 1, 0);
        char what[96];
        snprintf(what, sizeof what, "box %s", TEST_SHAPES[i].name);
        /* A box selects only the shape inside it, even a twin. */
        expect_iou(c, what, test_mask(masks, 0, c->plane), c->truth->mask[i], MIN_IOU);
        sam2_masks_free(masks);
    }
}

static void multimask(const ctx *c) {
    for (int i = 0; i < shapes_checked(); i++) {
        sam2_point pt;
        sam2_prompt prompt = click_prompt(&pt, i);
        sam2_masks *all = predict(c, &prompt, 1, 1);
        sam2_masks *best = predict(c, &prompt, 1, 0);
        float best_score = -INFINITY;
        size_t best_index = 0;
        for (size_t k = 0; k < 3; k++) {
            float score = NAN;
            CHECK_OK(sam2_masks_score(all, k, &score));
            CHECK(isfinite(score));
            if (score > best_score) {
                best_score = score;
                best_index = k;
            }
        }
        /* The single-mask answer is the highest-scored candidate, mask and score. */
        float single_score = NAN;
        CHECK_OK(sam2_masks_score(best, 0, &single_score));
        CHECK(single_score == best_score);
        CHECK(memcmp(test_mask(all, best_index, c->plane), test_mask(best, 0, c->plane),
                     c->plane) == 0);
        uint8_t *want = test_click_truth(c->truth, i);
        char what[96];
        snprintf(what, sizeof what, "multimask best of %s", TEST_SHAPES[i].name);
        expect_iou(c, what, test_mask(all, best_index, c->plane), want, MIN_IOU);
        free(want);
        sam2_masks_free(best);
        sam2_masks_free(all);
    }
}

/* Prompts of one shape each, batched: each object's mask and score equal the single call's. */
static void batch_equals_one_by_one(const ctx *c, const sam2_prompt *prompts, size_t count,
                                    const char *what) {
    sam2_masks *batch = predict(c, prompts, count, 0);
    for (size_t i = 0; i < count; i++) {
        sam2_masks *one = predict(c, &prompts[i], 1, 0);
        float a = NAN, b = NAN;
        CHECK_OK(sam2_masks_score(batch, i, &a));
        CHECK_OK(sam2_masks_score(one, 0, &b));
        const uint8_t *mb = test_mask(batch, i, c->plane);
        const uint8_t *mo = test_mask(one, 0, c->plane);
        if (memcmp(mb, mo, c->plane) != 0) {
            fprintf(stderr, "%s: %s: object %zu differs from its single prediction (IoU %.4f)\n",
                    c->pair, what, i, test_iou(mb, mo, c->plane));
            exit(1);
        }
        CHECK(fabsf(a - b) <= 1e-5f);
        sam2_masks_free(one);
    }
    printf("  %-12s %-40s identical\n", c->pair, what);
    sam2_masks_free(batch);
}

static void batches(const ctx *c) {
    /* One click per shape. */
    sam2_point pts[SHAPE_COUNT];
    sam2_prompt prompts[SHAPE_COUNT];
    /* Under valgrind only the mixed batch below, which has the padding and mask input paths. */
    if (!test_under_valgrind()) {
        for (int i = 0; i < SHAPE_COUNT; i++) prompts[i] = click_prompt(&pts[i], i);
        batch_equals_one_by_one(c, prompts, SHAPE_COUNT, "batch of 5 clicks");

        /* One box per shape. */
        for (int i = 0; i < SHAPE_COUNT; i++) {
            const float *b = TEST_SHAPES[i].bbox;
            prompts[i] = test_box_prompt(b[0] - 2, b[1] - 2, b[2] + 3, b[3] + 3);
        }
        batch_equals_one_by_one(c, prompts, SHAPE_COUNT, "batch of 5 boxes");
    }

    /* Mixed prompts: a click, a click with a negative click, a box, a box with a click, and a
     * click with mask_input (the library pads shorter prompts). */
    sam2_masks *seed = NULL;
    sam2_prompt seed_prompt = click_prompt(&pts[0], GREEN_RECT);
    CHECK_OK(sam2_predict(c->predictor, c->embedding, &seed_prompt, 1, NULL, &seed));
    const float *logits = NULL;
    size_t len = 0;
    uint32_t side = 0;
    CHECK_OK(sam2_masks_low_res(seed, 0, &logits, &len, &side));
    sam2_point pair[2] = {
        {TEST_SHAPES[TWIN_LEFT].click[0], TEST_SHAPES[TWIN_LEFT].click[1], SAM2_POINT_POSITIVE},
        {TEST_SHAPES[TWIN_RIGHT].click[0], TEST_SHAPES[TWIN_RIGHT].click[1], SAM2_POINT_NEGATIVE},
    };
    prompts[0] = click_prompt(&pts[1], RED_DISC);
    prompts[1] = test_points_prompt(pair, 2);
    const float *b = TEST_SHAPES[YELLOW_TRIANGLE].bbox;
    prompts[2] = test_box_prompt(b[0] - 2, b[1] - 2, b[2] + 3, b[3] + 3);
    b = TEST_SHAPES[TWIN_RIGHT].bbox;
    prompts[3] = test_box_prompt(b[0] - 2, b[1] - 2, b[2] + 3, b[3] + 3);
    prompts[3].points = &pts[2];
    click_prompt(&pts[2], TWIN_RIGHT);
    prompts[3].point_count = 1;
    prompts[4] = click_prompt(&pts[3], GREEN_RECT);
    prompts[4].mask_input = logits;
    prompts[4].mask_input_len = len;
    batch_equals_one_by_one(c, prompts, SHAPE_COUNT, "batch of 5 mixed prompts");
    sam2_masks_free(seed);
}

static void refinement(const ctx *c) {
    for (int i = 0; i < shapes_checked(); i++) {
        sam2_point pt;
        sam2_prompt prompt = click_prompt(&pt, i);
        sam2_masks *first = predict(c, &prompt, 1, 0);
        const float *logits = NULL;
        size_t len = 0;
        uint32_t side = 0;
        CHECK_OK(sam2_masks_low_res(first, 0, &logits, &len, &side));
        CHECK(side == 256 && len == 65536 && logits != NULL);
        /* The logits are what the mask was made from: positive somewhere, negative elsewhere. */
        size_t positive = 0;
        for (size_t k = 0; k < len; k++) positive += logits[k] > 0;
        CHECK(positive > 0 && positive < len);

        prompt.mask_input = logits;
        prompt.mask_input_len = len;
        sam2_masks *refined = predict(c, &prompt, 1, 0);
        uint8_t *want = test_click_truth(c->truth, i);
        char what[96];
        snprintf(what, sizeof what, "refined click %s", TEST_SHAPES[i].name);
        expect_iou(c, what, test_mask(refined, 0, c->plane), want, MIN_IOU);
        free(want);
        sam2_masks_free(refined);
        sam2_masks_free(first);
    }
}

/* The bytes of an embedding, as sam2_embedding_save writes them (tensors and metadata). */
static uint8_t *embedding_bytes(const sam2_embedding *embedding, size_t *len) {
    char path[TEST_PATH_MAX];
    int fd = mkstemp(test_scratch_template(path, "sam2_test_segment_"));
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(sam2_embedding_save(embedding, path));
    uint8_t *bytes = test_read_file(path, len);
    CHECK(*len > 0);
    unlink(path);
    return bytes;
}

static int same_bytes(const uint8_t *ref, size_t ref_len, const sam2_embedding *b) {
    size_t len = 0;
    uint8_t *bytes = embedding_bytes(b, &len);
    int same = len == ref_len && memcmp(ref, bytes, len) == 0;
    free(bytes);
    return same;
}

static int same_embedding(const sam2_embedding *a, const sam2_embedding *b) {
    size_t len = 0;
    uint8_t *bytes = embedding_bytes(a, &len);
    int same = same_bytes(bytes, len, b);
    free(bytes);
    return same;
}

/* Encodes the picture in another layout: the embedding must be byte-identical to the RGB one,
 * and so must every click's mask. */
static void pixel_layouts(const ctx *c) {
    static const struct {
        uint32_t format;
        size_t extra; /* padding bytes per row */
        const char *name;
    } layouts[] = {
        {SAM2_PIXEL_BGR, 0, "BGR"},       {SAM2_PIXEL_RGBA, 0, "RGBA"},
        {SAM2_PIXEL_BGRA, 0, "BGRA"},     {SAM2_PIXEL_RGB, 13, "RGB, stride +13"},
        {SAM2_PIXEL_BGRA, 64, "BGRA, stride +64"},
    };
    const test_image *img = c->image;
    size_t ref_len = 0;
    uint8_t *ref = embedding_bytes(c->embedding, &ref_len);
    /* Under valgrind: the two padded layouts (3 and 4 bytes per pixel) only. */
    for (size_t l = test_under_valgrind() ? 3 : 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        size_t bpp = layouts[l].format >= SAM2_PIXEL_RGBA ? 4 : 3;
        size_t stride = layouts[l].extra ? img->width * bpp + layouts[l].extra : 0;
        size_t len = 0;
        uint8_t *pixels = test_convert(img, layouts[l].format, stride, &len);
        sam2_embedding *embedding = NULL;
        CHECK_OK(sam2_encode(c->encoder, pixels, len, img->width, img->height, stride,
                             layouts[l].format, &embedding));
        free(pixels);
        if (!same_bytes(ref, ref_len, embedding)) {
            fprintf(stderr, "%s: %s: the embedding differs from the RGB one\n", c->pair,
                    layouts[l].name);
            exit(1);
        }
        for (int i = 0; i < shapes_checked(); i++) {
            sam2_point pt;
            sam2_prompt prompt = click_prompt(&pt, i);
            sam2_masks *rgb = predict(c, &prompt, 1, 0);
            sam2_masks *other = NULL;
            CHECK_OK(sam2_predict(c->predictor, embedding, &prompt, 1, NULL, &other));
            if (memcmp(test_mask(rgb, 0, c->plane), test_mask(other, 0, c->plane), c->plane)) {
                fprintf(stderr, "%s: %s: click %s gives a different mask than RGB\n", c->pair,
                        layouts[l].name, TEST_SHAPES[i].name);
                exit(1);
            }
            sam2_masks_free(other);
            sam2_masks_free(rgb);
        }
        printf("  %-12s %-40s identical to RGB\n", c->pair, layouts[l].name);
        sam2_embedding_free(embedding);
    }

    /* The comparison sees a channel swap: RGB bytes declared as BGR give another embedding. */
    sam2_embedding *swapped = NULL;
    CHECK_OK(sam2_encode(c->encoder, img->data, c->plane * 3, img->width, img->height, 0,
                         SAM2_PIXEL_BGR, &swapped));
    CHECK(!same_bytes(ref, ref_len, swapped));
    free(ref);
    sam2_embedding_free(swapped);

    /* Gray: one byte per pixel encodes like the RGB image with R = G = B. */
    size_t gray_len = 0, rgb_len = 0;
    uint8_t *gray = test_convert(img, SAM2_PIXEL_GRAY, 0, &gray_len);
    CHECK(gray_len == c->plane);
    test_image grey_rgb = *img;
    grey_rgb.data = malloc(c->plane * 3);
    CHECK(grey_rgb.data != NULL);
    for (size_t k = 0; k < c->plane; k++) {
        grey_rgb.data[k * 3] = grey_rgb.data[k * 3 + 1] = grey_rgb.data[k * 3 + 2] = gray[k];
    }
    rgb_len = c->plane * 3;
    sam2_embedding *from_gray = NULL, *from_rgb = NULL;
    CHECK_OK(sam2_encode(c->encoder, gray, gray_len, img->width, img->height, 0,
                         SAM2_PIXEL_GRAY, &from_gray));
    CHECK_OK(sam2_encode(c->encoder, grey_rgb.data, rgb_len, img->width, img->height, 0,
                         SAM2_PIXEL_RGB, &from_rgb));
    CHECK(same_embedding(from_gray, from_rgb));
    printf("  %-12s %-40s identical to R = G = B\n", c->pair, "GRAY");
    sam2_embedding_free(from_rgb);
    sam2_embedding_free(from_gray);
    free(grey_rgb.data);
    free(gray);
}

int main(void) {
    test_default_environment();
    test_init_runtime();
    test_image image = test_load_image("shapes.ppm");
    test_truth truth = test_load_truth();
    CHECK(image.width == truth.width && image.height == truth.height);
    for (int p = 0; p < PAIR_COUNT; p++) {
        /* Under valgrind: contract A in float32 and in float16 (the half-precision conversions
         * are their own buffers); contracts B and C differ only in the names and shapes the
         * core's safe Rust gives ONNX Runtime, which ctest runs natively. */
        if (test_under_valgrind() && strcmp(TEST_PAIRS[p], "tiny_a") != 0 &&
            strcmp(TEST_PAIRS[p], "tiny_a_fp16") != 0)
            continue;
        ctx c;
        c.pair = TEST_PAIRS[p];
        c.image = &image;
        c.truth = &truth;
        c.plane = (size_t)image.width * image.height;
        c.encoder = test_open_encoder(c.pair);
        c.predictor = test_open_predictor(c.encoder, c.pair);
        c.embedding = test_encode(c.encoder, &image);
        uint32_t w = 0, h = 0;
        CHECK_OK(sam2_embedding_image_size(c.embedding, &w, &h));
        CHECK(w == image.width && h == image.height);
        clicks(&c);
        negative_clicks(&c);
        boxes(&c);
        multimask(&c);
        batches(&c);
        refinement(&c);
        /* Pixel layouts are converted before the model (the same code for every pair): under
         * valgrind, for the first pair only. */
        if (p == 0 || !test_under_valgrind()) pixel_layouts(&c);
        sam2_embedding_free(c.embedding);
        sam2_predictor_free(c.predictor);
        sam2_encoder_free(c.encoder);
    }
    test_truth_free(&truth);
    test_image_free(&image);
    printf("test_segment: ok\n");
    return 0;
}
