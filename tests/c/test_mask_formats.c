/*
 * Mask formats and model pairs through the C ABI: a click in each shape, then every form of its
 * mask must give the mask back (sam2_masks_copy_mask, sam2_masks_crop, sam2_masks_rle decoded
 * here, sam2_masks_polygons rasterised here at tolerance 0), the size queries follow the
 * (buf, len, &needed) convention, and bad arguments give their documented statuses naming the
 * argument, without touching the caller's buffers. sam2_find_model_pair finds tiny_a by name
 * and lists the candidates of an ambiguous directory.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* Even-odd fill at pixel centres of the rings sam2_masks_polygons wrote. */
static uint8_t *rasterize(const float *points, const sam2_ring *rings, size_t ring_count,
                          uint32_t width, uint32_t height) {
    uint8_t *mask = calloc((size_t)width * height, 1);
    double *xs = malloc(sizeof(double) * 65536);
    CHECK(mask != NULL && xs != NULL);
    for (uint32_t y = 0; y < height; y++) {
        double cy = y + 0.5;
        size_t n = 0, at = 0;
        for (size_t r = 0; r < ring_count; r++) {
            size_t count = rings[r].point_count;
            for (size_t i = 0; i < count; i++) {
                const float *a = &points[2 * (at + i)], *b = &points[2 * (at + (i + 1) % count)];
                if ((a[1] <= cy) != (b[1] <= cy)) {
                    CHECK(n < 65536);
                    xs[n++] = a[0] + (cy - a[1]) / (b[1] - a[1]) * (b[0] - a[0]);
                }
            }
            at += count;
        }
        for (size_t i = 1; i < n; i++) { /* insertion sort: few crossings per row */
            double v = xs[i];
            size_t j = i;
            while (j > 0 && xs[j - 1] > v) {
                xs[j] = xs[j - 1];
                j--;
            }
            xs[j] = v;
        }
        for (size_t k = 0; k + 1 < n; k += 2) {
            double from = ceil(xs[k] - 0.5), to = ceil(xs[k + 1] - 0.5);
            for (double x = from < 0 ? 0 : from; x < to && x < width; x++) mask[y * width + (size_t)x] = 1;
        }
    }
    free(xs);
    return mask;
}

static void check_formats(const sam2_masks *masks, const uint8_t *mask, uint32_t w, uint32_t h,
                          const char *name) {
    size_t plane = (size_t)w * h;
    uint8_t *copy = malloc(plane);
    CHECK(copy != NULL);
    CHECK_OK(sam2_masks_copy_mask(masks, 0, copy, plane));
    CHECK(memcmp(copy, mask, plane) == 0);

    /* Crop: ask for the size, then copy; the crop is the mask inside its box. */
    uint32_t box[4] = {7, 7, 7, 7}, want_box[4];
    uint64_t area;
    size_t needed = 0;
    CHECK_STATUS(sam2_masks_crop(masks, 0, NULL, 0, box, &needed), SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(box[0] == 7); /* not written on failure */
    CHECK_OK(sam2_masks_box(masks, 0, want_box, &area));
    CHECK(needed == (size_t)(want_box[2] - want_box[0] + 1) * (want_box[3] - want_box[1] + 1));
    uint8_t *crop = malloc(needed);
    CHECK(crop != NULL);
    CHECK_OK(sam2_masks_crop(masks, 0, crop, needed, box, &needed));
    CHECK(memcmp(box, want_box, sizeof box) == 0);
    uint32_t crop_w = box[2] - box[0] + 1;
    for (uint32_t y = box[1]; y <= box[3]; y++)
        CHECK(memcmp(&crop[(size_t)(y - box[1]) * crop_w], &mask[(size_t)y * w + box[0]], crop_w) == 0);

    /* RLE counts: column-major runs starting with 0s. */
    size_t count = 0;
    CHECK_STATUS(sam2_masks_rle(masks, 0, NULL, 0, &count), SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(count >= 1);
    uint32_t *counts = malloc(sizeof(uint32_t) * (count + 1));
    CHECK(counts != NULL);
    counts[count - 1] = 0xDEADBEEF;
    CHECK_STATUS(sam2_masks_rle(masks, 0, counts, count - 1, &count), SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(counts[count - 1] == 0xDEADBEEF);
    CHECK_OK(sam2_masks_rle(masks, 0, counts, count + 1, &count));
    size_t at = 0;
    for (size_t r = 0; r < count; r++) {
        for (size_t k = at; k < at + counts[r]; k++) CHECK(mask[(k % h) * w + k / h] == (r % 2));
        at += counts[r];
    }
    CHECK(at == plane);

    /* The compressed string: size query, then the string. */
    size_t text_needed = 0;
    CHECK_STATUS(sam2_masks_rle_string(masks, 0, NULL, 0, &text_needed), SAM2_ERR_BUFFER_TOO_SMALL);
    char *text = malloc(text_needed);
    CHECK(text != NULL);
    CHECK_OK(sam2_masks_rle_string(masks, 0, text, text_needed, NULL));
    CHECK(strlen(text) + 1 == text_needed);

    /* Polygons at tolerance 0 give the mask back exactly; at 1 pixel, fewer points. */
    size_t point_count = 0, ring_count = 0;
    CHECK_STATUS(sam2_masks_polygons(masks, 0, 0.0f, NULL, 0, NULL, 0, &point_count, &ring_count),
                 SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(point_count >= 3 && ring_count >= 1);
    float *points = malloc(sizeof(float) * 2 * point_count);
    sam2_ring *rings = malloc(sizeof(sam2_ring) * ring_count);
    CHECK(points != NULL && rings != NULL);
    /* One point or one ring short: too small, both sizes reported. */
    size_t p = 0, r = 0;
    CHECK_STATUS(sam2_masks_polygons(masks, 0, 0.0f, points, point_count - 1, rings, ring_count, &p, &r),
                 SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(p == point_count && r == ring_count);
    CHECK_STATUS(sam2_masks_polygons(masks, 0, 0.0f, points, point_count, rings, ring_count - 1, &p, &r),
                 SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK_OK(sam2_masks_polygons(masks, 0, 0.0f, points, point_count, rings, ring_count,
                                 &point_count, &ring_count));
    CHECK(rings[0].is_hole == 0);
    uint8_t *back = rasterize(points, rings, ring_count, w, h);
    double iou = test_iou(back, mask, plane);
    size_t simple_points = 0, simple_rings = 0;
    CHECK_STATUS(sam2_masks_polygons(masks, 0, 1.0f, NULL, 0, NULL, 0, &simple_points, &simple_rings),
                 SAM2_ERR_BUFFER_TOO_SMALL);
    printf("  %-16s RLE %zu runs, %zu chars; polygons %zu rings, %zu points (tolerance 1: %zu), IoU %.4f\n",
           name, count, text_needed - 1, ring_count, point_count, simple_points, iou);
    CHECK(iou >= 0.99);
    CHECK(memcmp(back, mask, plane) == 0);
    CHECK(simple_points < point_count);
    free(back);
    free(points);
    free(rings);
    free(text);
    free(counts);
    free(crop);
    free(copy);
}

static void bad_arguments(const sam2_masks *masks, const sam2_embedding *embedding, uint32_t w, uint32_t h) {
    uint8_t small[4] = {9, 9, 9, 9};
    uint32_t box[4];
    size_t needed = 0, rings = 0, points = 0;
    float pts[8];
    sam2_ring ring[2];

    CHECK_FAILS(sam2_masks_copy_mask(NULL, 0, small, 4), SAM2_ERR_NULL_ARGUMENT, "`masks`");
    CHECK_FAILS(sam2_masks_copy_mask(masks, 0, NULL, 4), SAM2_ERR_NULL_ARGUMENT, "`buffer`");
    CHECK_FAILS(sam2_masks_copy_mask(masks, 0, small, 4), SAM2_ERR_INVALID_ARGUMENT, "`size`");
    CHECK(small[0] == 9);
    CHECK_FAILS(sam2_masks_copy_mask(masks, 1, small, (size_t)w * h), SAM2_ERR_INVALID_ARGUMENT, "`index`");
    CHECK_FAILS(sam2_masks_copy_mask(masks, SIZE_MAX, small, 4), SAM2_ERR_INVALID_ARGUMENT, "`index`");
    CHECK_FAILS(sam2_masks_copy_mask((const sam2_masks *)embedding, 0, small, 4), SAM2_ERR_INVALID_ARGUMENT,
                "`masks`");

    CHECK_FAILS(sam2_masks_crop(NULL, 0, small, 4, box, &needed), SAM2_ERR_NULL_ARGUMENT, "`masks`");
    CHECK_FAILS(sam2_masks_crop(masks, 0, small, 4, NULL, &needed), SAM2_ERR_NULL_ARGUMENT, "`out_box`");
    CHECK_FAILS(sam2_masks_crop(masks, 0, small, 4, box, NULL), SAM2_ERR_NULL_ARGUMENT, "`out_needed`");
    CHECK_FAILS(sam2_masks_crop(masks, 0, NULL, 4, box, &needed), SAM2_ERR_NULL_ARGUMENT, "`buffer`");
    CHECK_FAILS(sam2_masks_crop(masks, 3, small, 4, box, &needed), SAM2_ERR_INVALID_ARGUMENT, "`index`");

    CHECK_FAILS(sam2_masks_rle(NULL, 0, NULL, 0, &needed), SAM2_ERR_NULL_ARGUMENT, "`masks`");
    CHECK_FAILS(sam2_masks_rle(masks, 0, NULL, 0, NULL), SAM2_ERR_NULL_ARGUMENT, "`out_count`");
    CHECK_FAILS(sam2_masks_rle(masks, 0, NULL, 5, &needed), SAM2_ERR_NULL_ARGUMENT, "`counts`");
    CHECK_FAILS(sam2_masks_rle(masks, 0, (uint32_t *)pts, SIZE_MAX, &needed), SAM2_ERR_INVALID_ARGUMENT,
                "`counts`");
    CHECK_FAILS(sam2_masks_rle(masks, 2, NULL, 0, &needed), SAM2_ERR_INVALID_ARGUMENT, "`index`");

    CHECK_FAILS(sam2_masks_rle_string(NULL, 0, NULL, 0, &needed), SAM2_ERR_NULL_ARGUMENT, "`masks`");
    CHECK_FAILS(sam2_masks_rle_string(masks, 9, NULL, 0, &needed), SAM2_ERR_INVALID_ARGUMENT, "`index`");
    /* NULL `needed` is allowed: the status alone says the buffer is too small. */
    CHECK_STATUS(sam2_masks_rle_string(masks, 0, (char *)small, 1, NULL), SAM2_ERR_BUFFER_TOO_SMALL);

    CHECK_FAILS(sam2_masks_polygons(NULL, 0, 0.0f, pts, 4, ring, 2, &points, &rings), SAM2_ERR_NULL_ARGUMENT,
                "`masks`");
    CHECK_FAILS(sam2_masks_polygons(masks, 0, 0.0f, pts, 4, ring, 2, NULL, &rings), SAM2_ERR_NULL_ARGUMENT,
                "`out_points`");
    CHECK_FAILS(sam2_masks_polygons(masks, 0, 0.0f, pts, 4, ring, 2, &points, NULL), SAM2_ERR_NULL_ARGUMENT,
                "`out_rings`");
    CHECK_FAILS(sam2_masks_polygons(masks, 0, 0.0f, NULL, 4, ring, 2, &points, &rings), SAM2_ERR_NULL_ARGUMENT,
                "`points`");
    CHECK_FAILS(sam2_masks_polygons(masks, 0, 0.0f, pts, 4, NULL, 2, &points, &rings), SAM2_ERR_NULL_ARGUMENT,
                "`rings`");
    CHECK_FAILS(sam2_masks_polygons(masks, 0, 0.0f, pts, SIZE_MAX, ring, 2, &points, &rings),
                SAM2_ERR_INVALID_ARGUMENT, "`points_capacity`");
    const float bad_tolerances[] = {-1.0f, NAN, INFINITY};
    for (size_t i = 0; i < 3; i++)
        CHECK_FAILS(sam2_masks_polygons(masks, 0, bad_tolerances[i], pts, 4, ring, 2, &points, &rings),
                    SAM2_ERR_INVALID_ARGUMENT, "`tolerance`");
    CHECK_FAILS(sam2_masks_polygons(masks, 4, 0.0f, pts, 4, ring, 2, &points, &rings), SAM2_ERR_INVALID_ARGUMENT,
                "`index`");
}

/* A model file's path as sam2_find_model_pair gives it: the directory joined to the file with
 * this system's separator (test_model_path joins with '/'). */
static char *found_model_path(char *out, const char *file) {
    test_model_path(out, file);
#ifdef _WIN32
    out[strlen(out) - strlen(file) - 1] = '\\';
#endif
    return out;
}

static void model_pairs(void) {
    char path[TEST_PATH_MAX], enc[TEST_PATH_MAX], dec[TEST_PATH_MAX], want[TEST_PATH_MAX];
    size_t enc_needed = 0, dec_needed = 0;
    test_model_path(path, "tiny_a");
    CHECK_OK(sam2_find_model_pair(path, enc, sizeof enc, &enc_needed, dec, sizeof dec, &dec_needed));
    CHECK(strcmp(enc, found_model_path(want, "tiny_a_encoder.onnx")) == 0);
    CHECK(strcmp(dec, found_model_path(want, "tiny_a_decoder.onnx")) == 0);
    CHECK(enc_needed == strlen(enc) + 1 && dec_needed == strlen(dec) + 1);

    /* Sizes first: both are reported, nothing is written. */
    enc[0] = 'X';
    enc_needed = dec_needed = 0;
    CHECK_STATUS(sam2_find_model_pair(path, enc, 4, &enc_needed, NULL, 0, &dec_needed), SAM2_ERR_BUFFER_TOO_SMALL);
    /* tiny_a_encoder.onnx and tiny_a_decoder.onnx have names of one length. */
    CHECK(enc[0] == 'X' && enc_needed == strlen(want) + 1 && dec_needed == strlen(want) + 1);

    /* The models directory holds several pairs: an error listing them. */
    test_model_path(path, "");
    CHECK_FAILS(sam2_find_model_pair(path, enc, sizeof enc, NULL, dec, sizeof dec, NULL), SAM2_ERR_MODEL,
                "tiny_a_fp16");
    CHECK_FAILS(sam2_find_model_pair(NULL, enc, sizeof enc, NULL, dec, sizeof dec, NULL), SAM2_ERR_NULL_ARGUMENT,
                "`path`");
    CHECK_FAILS(sam2_find_model_pair("/nonexistent-sam2/models/x", enc, sizeof enc, NULL, dec, sizeof dec, NULL),
                SAM2_ERR_MODEL, "not a directory");
    CHECK_FAILS(sam2_find_model_pair("\xff\xfe", enc, sizeof enc, NULL, dec, sizeof dec, NULL),
                SAM2_ERR_INVALID_ARGUMENT, "`path`");
}

int main(void) {
    test_init_runtime();
    test_image image = test_load_image("shapes.ppm");
    test_truth truth = test_load_truth();
    sam2_encoder *encoder = test_open_encoder("tiny_a");
    sam2_predictor *predictor = test_open_predictor(encoder, "tiny_a");
    sam2_embedding *embedding = test_encode(encoder, &image);
    size_t plane = (size_t)image.width * image.height;
    /* Under valgrind, one single shape and one pair of twins (two components) cover every path. */
    for (int i = 0; i < SHAPE_COUNT; i++) {
        if (test_under_valgrind() && i != RED_DISC && i != TWIN_LEFT) continue;
        sam2_point click = {TEST_SHAPES[i].click[0], TEST_SHAPES[i].click[1], SAM2_POINT_POSITIVE};
        sam2_prompt prompt = test_points_prompt(&click, 1);
        sam2_masks *masks = test_predict1(predictor, embedding, &prompt);
        check_formats(masks, test_mask(masks, 0, plane), image.width, image.height, TEST_SHAPES[i].name);
        if (i == 0) bad_arguments(masks, embedding, image.width, image.height);
        sam2_masks_free(masks);
    }
    model_pairs();
    sam2_embedding_free(embedding);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
    test_truth_free(&truth);
    test_image_free(&image);
    printf("test_mask_formats: ok\n");
    return 0;
}
