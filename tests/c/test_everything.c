/*
 * Segment everything through the C ABI (sam2_segment_everything and the sam2_everything result),
 * on tiny_a and testdata/shapes.ppm:
 *   - with SAM2's default thresholds on a 16 x 16 grid, every shape is found once (IoU >= 0.9
 *     with its ground truth, the twins as one object, and no second mask of IoU >= 0.5 with it);
 *   - each mask's info agrees with its decoded pixels (box, area) and its run lengths;
 *   - the embedding variant gives the same masks, and refuses crops;
 *   - bad input: NULL for each pointer, a wrong struct_size, options out of range (naming the
 *     field), an index out of range, a buffer too small, a handle of another type;
 *   - the progress callback: every click counted up to the total, and a non-zero return cancels
 *     with SAM2_ERR_CANCELLED, nothing written; the work and memory budgets refuse a request up
 *     front naming the figure; the first version of the options struct is still read;
 *   - tiny images with crop layers (7 x 5 with two layers was SAM2_ERR_PANIC).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define FOUND_IOU 0.9
#define DUPLICATE_IOU 0.5

typedef struct run {
    sam2_everything *result;
    size_t count;
    uint32_t width, height;
    uint8_t **masks; /* decoded, count of them */
} run;

static run collect(sam2_everything *result) {
    run r = {result, 0, 0, 0, NULL};
    CHECK_OK(sam2_everything_count(result, &r.count, &r.width, &r.height));
    r.masks = calloc(r.count ? r.count : 1, sizeof *r.masks);
    size_t plane = (size_t)r.width * r.height;
    for (size_t i = 0; i < r.count; i++) {
        r.masks[i] = malloc(plane);
        CHECK(r.masks[i] != NULL);
        CHECK_OK(sam2_everything_mask(result, i, r.masks[i], plane));
        sam2_everything_info info;
        CHECK_OK(sam2_everything_mask_info(result, i, &info));
        uint32_t box[4];
        uint64_t area;
        test_bounds(r.masks[i], r.width, r.height, box, &area);
        CHECK(area == info.area);
        CHECK(memcmp(box, info.box, sizeof box) == 0);
        CHECK(info.predicted_iou > 0.8f && info.stability_score >= 0.95f);
        CHECK(info.crop_box[0] == 0 && info.crop_box[1] == 0 && info.crop_box[2] == r.width &&
              info.crop_box[3] == r.height);
        CHECK(info.point[0] >= 0.0f && info.point[0] <= (float)r.width);
        /* The run lengths cover the image, and the 1-runs add up to the area. */
        const uint32_t *counts = NULL;
        size_t n = 0;
        CHECK_OK(sam2_everything_rle(result, i, &counts, &n));
        uint64_t total = 0, ones = 0;
        for (size_t k = 0; k < n; k++) {
            total += counts[k];
            if (k % 2 == 1) ones += counts[k];
        }
        CHECK(total == plane && ones == area);
    }
    return r;
}

static void run_free(run *r) {
    for (size_t i = 0; i < r->count; i++) free(r->masks[i]);
    free(r->masks);
    sam2_everything_free(r->result);
}

static void check_every_shape_found_once(const run *r, const test_truth *truth) {
    size_t plane = (size_t)r->width * r->height;
    for (int s = 0; s < SHAPE_COUNT; s++) {
        if (s == TWIN_RIGHT) continue; /* the twins are one object: a click on either selects both */
        uint8_t *want = test_click_truth(truth, s);
        int found = 0, overlapping = 0;
        double best = 0.0;
        for (size_t i = 0; i < r->count; i++) {
            double iou = test_iou(r->masks[i], want, plane);
            found += iou >= FOUND_IOU;
            overlapping += iou >= DUPLICATE_IOU;
            if (iou > best) best = iou;
        }
        printf("  %-16s best IoU %.3f, masks with IoU >= %.1f: %d\n", TEST_SHAPES[s].name, best,
               FOUND_IOU, found);
        if (found != 1 || overlapping != 1) {
            fprintf(stderr, "%s: found %d times (IoU >= %.1f), %d masks overlap it (>= %.1f)\n",
                    TEST_SHAPES[s].name, found, FOUND_IOU, overlapping, DUPLICATE_IOU);
            exit(1);
        }
        free(want);
    }
}

static void bad_input(sam2_encoder *enc, sam2_predictor *pred, sam2_embedding *emb,
                      const test_image *img, sam2_everything *result) {
    sam2_everything_options o;
    sam2_everything *out = NULL;
    size_t len = (size_t)img->width * img->height * 3;
    const uint8_t *px = img->data;
    uint32_t w = img->width, h = img->height;

    /* Options: init, its struct_size, each range. */
    CHECK_FAILS(sam2_everything_options_init(NULL, sizeof o), SAM2_ERR_NULL_ARGUMENT, "`options`");
    CHECK_FAILS(sam2_everything_options_init(&o, 3), SAM2_ERR_INVALID_ARGUMENT, "struct_size");
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    CHECK(o.points_per_side == 32 && o.points_per_batch == 64 && o.multimask == 1);
    CHECK(fabsf(o.pred_iou_thresh - 0.8f) < 1e-6f && fabsf(o.stability_score_thresh - 0.95f) < 1e-6f);
    o.struct_size = 7;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "struct_size");
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.points_per_batch = 0;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "points_per_batch");
    o.points_per_batch = 257;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "points_per_batch");
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.pred_iou_thresh = NAN;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "pred_iou_thresh");
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.stability_score_thresh = 1.5f;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "stability_score_thresh");
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.multimask = 2;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "multimask");
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.crop_n_layers = 5;
    CHECK_FAILS(sam2_segment_everything(enc, pred, px, len, w, h, 0, SAM2_PIXEL_RGB, &o, &out),
                SAM2_ERR_INVALID_ARGUMENT, "crop_n_layers");
    o.crop_n_layers = 1; /* fine for an image, not for an embedding */
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "crop_n_layers");
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.points_per_side = 0;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "points_per_side");
    o.point_count = 2;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_NULL_ARGUMENT,
                "`options.points`");
    float outside[4] = {0.5f, 0.5f, 1.5f, 0.5f};
    o.points = outside;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "point_grids");
    o.points_per_side = 32; /* both a grid and points */
    outside[2] = 0.25f;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "point_grids");
    CHECK(out == NULL); /* out-params are written only on success */

    /* NULL for each pointer of the generators. */
    CHECK_FAILS(sam2_segment_everything(NULL, pred, px, len, w, h, 0, SAM2_PIXEL_RGB, NULL, &out),
                SAM2_ERR_NULL_ARGUMENT, "`encoder`");
    CHECK_FAILS(sam2_segment_everything(enc, NULL, px, len, w, h, 0, SAM2_PIXEL_RGB, NULL, &out),
                SAM2_ERR_NULL_ARGUMENT, "`predictor`");
    CHECK_FAILS(sam2_segment_everything(enc, pred, NULL, len, w, h, 0, SAM2_PIXEL_RGB, NULL, &out),
                SAM2_ERR_NULL_ARGUMENT, "`pixels`");
    CHECK_FAILS(sam2_segment_everything(enc, pred, px, len, w, h, 0, SAM2_PIXEL_RGB, NULL, NULL),
                SAM2_ERR_NULL_ARGUMENT, "`out`");
    CHECK_FAILS(sam2_segment_everything(enc, pred, px, len - 1, w, h, 0, SAM2_PIXEL_RGB, NULL, &out),
                SAM2_ERR_INVALID_ARGUMENT, "pixels");
    CHECK_FAILS(sam2_segment_everything(enc, pred, px, len, w, h, 0, 99, NULL, &out),
                SAM2_ERR_INVALID_ARGUMENT, "pixel_format");
    CHECK_FAILS(sam2_segment_everything_embedding(NULL, emb, NULL, &out), SAM2_ERR_NULL_ARGUMENT,
                "`predictor`");
    CHECK_FAILS(sam2_segment_everything_embedding(pred, NULL, NULL, &out), SAM2_ERR_NULL_ARGUMENT,
                "`embedding`");
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, NULL, NULL), SAM2_ERR_NULL_ARGUMENT,
                "`out`");
    /* A handle of another type where a result is expected. */
    size_t count = 0;
    uint32_t rw = 0, rh = 0;
    CHECK_FAILS(sam2_everything_count((const sam2_everything *)(const void *)pred, &count, &rw, &rh),
                SAM2_ERR_INVALID_ARGUMENT, "sam2_predictor");

    /* The accessors: NULL, index, buffer size. */
    CHECK_OK(sam2_everything_count(result, &count, &rw, &rh));
    CHECK(count > 0);
    CHECK_FAILS(sam2_everything_count(NULL, &count, &rw, &rh), SAM2_ERR_NULL_ARGUMENT, "`everything`");
    CHECK_FAILS(sam2_everything_count(result, NULL, &rw, &rh), SAM2_ERR_NULL_ARGUMENT, "`out_count`");
    CHECK_FAILS(sam2_everything_count(result, &count, NULL, &rh), SAM2_ERR_NULL_ARGUMENT, "`out_width`");
    CHECK_FAILS(sam2_everything_count(result, &count, &rw, NULL), SAM2_ERR_NULL_ARGUMENT, "`out_height`");
    sam2_everything_info info;
    CHECK_FAILS(sam2_everything_mask_info(NULL, 0, &info), SAM2_ERR_NULL_ARGUMENT, "`everything`");
    CHECK_FAILS(sam2_everything_mask_info(result, 0, NULL), SAM2_ERR_NULL_ARGUMENT, "`out_info`");
    CHECK_FAILS(sam2_everything_mask_info(result, count, &info), SAM2_ERR_INVALID_ARGUMENT, "`index`");
    CHECK_FAILS(sam2_everything_mask_info(result, (size_t)-1, &info), SAM2_ERR_INVALID_ARGUMENT,
                "`index`");
    size_t plane = (size_t)rw * rh;
    uint8_t *buf = malloc(plane);
    memset(buf, 7, plane);
    CHECK_FAILS(sam2_everything_mask(result, 0, NULL, plane), SAM2_ERR_NULL_ARGUMENT, "`buf`");
    CHECK_STATUS(sam2_everything_mask(result, 0, buf, plane - 1), SAM2_ERR_BUFFER_TOO_SMALL);
    CHECK(buf[0] == 7); /* nothing written */
    CHECK_FAILS(sam2_everything_mask(result, count, buf, plane), SAM2_ERR_INVALID_ARGUMENT, "`index`");
    free(buf);
    const uint32_t *counts;
    size_t n;
    CHECK_FAILS(sam2_everything_rle(result, 0, NULL, &n), SAM2_ERR_NULL_ARGUMENT, "`out_counts`");
    CHECK_FAILS(sam2_everything_rle(result, 0, &counts, NULL), SAM2_ERR_NULL_ARGUMENT, "`out_count`");
    CHECK_FAILS(sam2_everything_rle(result, count, &counts, &n), SAM2_ERR_INVALID_ARGUMENT, "`index`");
    sam2_everything_free(NULL); /* a no-op */
}

/* What the progress callback saw, and when it cancels. */
typedef struct progress_log {
    int calls;
    uint64_t last_done, last_total;
    int monotone;
    uint64_t cancel_at; /* cancel once done reaches this (0: never) */
} progress_log;

static int32_t on_progress(void *user, uint64_t done, uint64_t total) {
    progress_log *p = user;
    if (p->calls > 0 && done < p->last_done) p->monotone = 0;
    p->calls++;
    p->last_done = done;
    p->last_total = total;
    return p->cancel_at != 0 && done >= p->cancel_at;
}

static void progress_and_budgets(sam2_encoder *enc, sam2_predictor *pred, sam2_embedding *emb) {
    sam2_everything_options o;
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    CHECK(o.max_clicks == 1048576u && o.max_memory_bytes == (uint64_t)4 << 30);
    CHECK(o.progress == NULL && o.progress_user == NULL);
    o.points_per_side = 4; /* 16 clicks */
    o.points_per_batch = 4;
    progress_log log = {0, 0, 0, 1, 0};
    o.progress = on_progress;
    o.progress_user = &log;
    sam2_everything *out = NULL;
    CHECK_OK(sam2_segment_everything_embedding(pred, emb, &o, &out));
    /* Once before the batches, once after each of the 4, once at the end. */
    CHECK(log.calls == 6 && log.monotone && log.last_done == 16 && log.last_total == 16);
    sam2_everything_free(out);

    /* Cancelled after the second batch: nothing written, the message says where it stopped. */
    log = (progress_log){0, 0, 0, 1, 8};
    out = NULL;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_CANCELLED,
                "after 8 of 16 clicks");
    CHECK(out == NULL && log.last_done == 8);
    printf("a cancel: %s\n", test_last_error());

    /* The budgets, before anything runs. */
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.points_per_side = 4;
    o.max_clicks = 15;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "16 clicks");
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.points_per_side = 1024;
    o.crop_n_layers = 4;
    test_image img = test_load_image("shapes.ppm");
    size_t len = (size_t)img.width * img.height * 3;
    CHECK_FAILS(sam2_segment_everything(enc, pred, img.data, len, img.width, img.height, 0,
                                        SAM2_PIXEL_RGB, &o, &out),
                SAM2_ERR_INVALID_ARGUMENT, "max_clicks");
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.points_per_side = 4;
    o.max_memory_bytes = 1 << 20;
    CHECK_FAILS(sam2_segment_everything_embedding(pred, emb, &o, &out), SAM2_ERR_INVALID_ARGUMENT,
                "max_memory_bytes");
    printf("over the memory budget: %s\n", test_last_error());
    CHECK(out == NULL);

    /* A caller built against the first version of the struct: its size is read, the budgets
     * and the callback take their defaults (whatever lies beyond it). */
    memset(&o, 0xEE, sizeof o);
    CHECK_OK(sam2_everything_options_init(&o, offsetof(sam2_everything_options, max_clicks)));
    CHECK(o.struct_size == offsetof(sam2_everything_options, max_clicks));
    o.points_per_side = 4;
    CHECK_OK(sam2_segment_everything_embedding(pred, emb, &o, &out));
    sam2_everything_free(out);
    out = NULL;

    /* Tiny images with crop layers (the crops past their edge are left out). Every crop kept is
     * an encode: under valgrind (2 s an encode there) the 1x1 image alone, the one with the
     * fewest crops; the other sizes run natively. */
    const uint32_t sizes[][2] = {{7, 5}, {5, 7}, {1, 1}, {3, 2}};
    uint8_t px[7 * 7 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 37 % 251);
    for (size_t k = 0; k < 4; k++) {
        if (test_under_valgrind() && k != 2) continue;
        CHECK_OK(sam2_everything_options_init(&o, sizeof o));
        o.points_per_side = 2;
        o.crop_n_layers = 2;
        uint32_t w = sizes[k][0], h = sizes[k][1];
        CHECK_OK(sam2_segment_everything(enc, pred, px, (size_t)w * h * 3, w, h, 0,
                                         SAM2_PIXEL_RGB, &o, &out));
        size_t count = 0;
        uint32_t rw = 0, rh = 0;
        CHECK_OK(sam2_everything_count(out, &count, &rw, &rh));
        CHECK(rw == w && rh == h);
        sam2_everything_free(out);
        out = NULL;
    }
    test_image_free(&img);
}

int main(void) {
    test_default_environment();
    test_init_runtime();
    test_image img = test_load_image("shapes.ppm");
    test_truth truth = test_load_truth();
    sam2_encoder *enc = test_open_encoder("tiny_a");
    sam2_predictor *pred = test_open_predictor(enc, "tiny_a");

    sam2_everything_options o;
    CHECK_OK(sam2_everything_options_init(&o, sizeof o));
    o.points_per_side = test_under_valgrind() ? 4 : 16; /* SAM2's defaults otherwise */
    size_t len = (size_t)img.width * img.height * 3;
    sam2_everything *result = NULL;
    CHECK_OK(sam2_segment_everything(enc, pred, img.data, len, img.width, img.height, 0,
                                     SAM2_PIXEL_RGB, &o, &result));
    run r = collect(result);
    printf("sam2_segment_everything: %zu masks (%ux%u)\n", r.count, r.width, r.height);
    CHECK(r.width == img.width && r.height == img.height);
    if (!test_under_valgrind()) {
        check_every_shape_found_once(&r, &truth);
        CHECK(r.count == 5); /* the four objects and the background */
    }

    /* On the embedding: the same masks. */
    sam2_embedding *emb = test_encode(enc, &img);
    sam2_everything *again = NULL;
    CHECK_OK(sam2_segment_everything_embedding(pred, emb, &o, &again));
    run r2 = collect(again);
    CHECK(r2.count == r.count);
    for (size_t i = 0; i < r.count; i++)
        CHECK(memcmp(r.masks[i], r2.masks[i], (size_t)r.width * r.height) == 0);
    run_free(&r2);

    bad_input(enc, pred, emb, &img, result);
    progress_and_budgets(enc, pred, emb);
    run_free(&r);
    sam2_embedding_free(emb);
    sam2_predictor_free(pred);
    sam2_encoder_free(enc);
    test_truth_free(&truth);
    test_image_free(&img);
    printf("test_everything: ok\n");
    return 0;
}
