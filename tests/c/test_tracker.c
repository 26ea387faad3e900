/*
 * Video tracking through the C ABI, on the generated four-module tracker ($SAM2_MODELS/track/)
 * and the clip of tools/models/track_clip.py ($SAM2_MODELS/track/clip.bin, read by
 * examples/c/track_clip.c): a red disc moves right, passes behind a bar (hidden on frames 11-14)
 * and comes out; a blue square moves left.
 *
 *   - both objects prompted with one click on frame 0 and tracked forward over the 24 frames:
 *     IoU >= 0.9 with the ground truth wherever the object is visible, `present == 0` with an
 *     empty mask (area 0, box zeros) where the disc is hidden; each object's box and area agree
 *     with its mask; the low-res logits are 256 x 256;
 *   - prompted on the last frame and tracked backward to the first, the same;
 *   - the memory bank stays bounded by memory_frames; remove_object and reset do what they say;
 *   - results outlive the tracker;
 *   - errors: a frame outside num_frames, a click outside the frame, NaN, a mask prompt, a bad
 *     direction, an index past the objects, memory_frames out of range, an image encoder given
 *     as a video module: each its status and a message naming the culprit, out-params untouched.
 *
 * Under valgrind (tools/ci/test-valgrind.sh) the same paths run on fewer frames: forward to frame
 * 11 (the first hidden one), backward from 23 to 21.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "track_clip.h"

#define SENTINEL ((sam2_track_result *)(uintptr_t)0x5a5a5a50U)
enum { PLANE = CLIP_WIDTH * CLIP_HEIGHT, RGB_LEN = PLANE * 3 };

static uint8_t rgb[RGB_LEN], disc[PLANE], square[PLANE];

static int visible(const uint8_t *m) {
    return test_area(m, PLANE) > 0;
}

static sam2_prompt click_at(int x, int y, sam2_point *pt) {
    pt->x = (float)x;
    pt->y = (float)y;
    pt->label = SAM2_POINT_POSITIVE;
    return test_points_prompt(pt, 1);
}

static sam2_track_result *prompt_object(sam2_tracker *tracker, int t, uint32_t id, int x, int y) {
    sam2_point pt;
    sam2_prompt prompt = click_at(x, y, &pt);
    sam2_track_result *r = NULL;
    CHECK_OK(sam2_tracker_add_prompt(tracker, (uint32_t)t, rgb, RGB_LEN, CLIP_WIDTH, CLIP_HEIGHT,
                                     0, SAM2_PIXEL_RGB, id, &prompt, &r));
    CHECK(r != NULL);
    return r;
}

static void precision_is(const sam2_tracker *tracker, uint32_t want) {
    uint32_t precision = 99;
    CHECK_OK(sam2_tracker_precision(tracker, &precision));
    CHECK(precision == want);
}

static sam2_track_result *track(sam2_tracker *tracker, int t, uint32_t direction) {
    sam2_track_result *r = NULL;
    CHECK_OK(sam2_tracker_track(tracker, (uint32_t)t, rgb, RGB_LEN, CLIP_WIDTH, CLIP_HEIGHT, 0,
                                SAM2_PIXEL_RGB, direction, &r));
    CHECK(r != NULL);
    return r;
}

/* Object `index` of `r`: its facts and its mask, checked against each other. */
static const uint8_t *object(const sam2_track_result *r, size_t index, sam2_tracked_object *o) {
    CHECK_OK(sam2_track_result_object(r, index, o));
    const uint8_t *mask = NULL;
    size_t len = 0;
    CHECK_OK(sam2_track_result_mask(r, index, &mask, &len));
    CHECK(mask != NULL && len == PLANE);
    uint32_t box[4];
    uint64_t area;
    test_bounds(mask, CLIP_WIDTH, CLIP_HEIGHT, box, &area);
    CHECK(o->area == area);
    CHECK(memcmp(o->box, box, sizeof box) == 0);
    CHECK((o->present != 0) == (o->score > 0.0f));
    const float *logits = NULL;
    CHECK_OK(sam2_track_result_low_res(r, index, &logits, &len));
    CHECK(logits != NULL && len == 256 * 256);
    return mask;
}

static void count_is(const sam2_track_result *r, int t, size_t want) {
    uint32_t frame = 999, w = 0, h = 0;
    size_t count = 999;
    CHECK_OK(sam2_track_result_count(r, &frame, &count, &w, &h));
    CHECK(frame == (uint32_t)t && count == want && w == CLIP_WIDTH && h == CLIP_HEIGHT);
}

/* Checks one object on frame t against its ground truth; returns its IoU (or -1 when hidden). */
static double check_object(const sam2_track_result *r, size_t index, uint32_t id,
                           const uint8_t *truth, int t) {
    sam2_tracked_object o;
    const uint8_t *mask = object(r, index, &o);
    CHECK(o.object_id == id);
    if (!visible(truth)) {
        if (o.present != 0 || o.area != 0 || o.box[2] != 0 || o.box[3] != 0) {
            fprintf(stderr, "frame %d: object %u is hidden but present (score %.2f, area %llu)\n",
                    t, id, o.score, (unsigned long long)o.area);
            exit(1);
        }
        CHECK(test_area(mask, PLANE) == 0);
        return -1.0;
    }
    double iou = test_iou(mask, truth, PLANE);
    if (o.present != 1 || iou < 0.9) {
        fprintf(stderr, "frame %d: object %u: present %d, IoU %.3f (want 1 and >= 0.9)\n", t, id,
                o.present, iou);
        exit(1);
    }
    return iou;
}

static void forward_both_objects(void) {
    sam2_tracker_options options;
    CHECK_OK(sam2_tracker_options_init(&options, sizeof options));
    CHECK(options.memory_frames == 16 && options.num_frames == 0 &&
          options.corrections_as_conditioning == 1);
    options.num_frames = CLIP_FRAMES;
    sam2_tracker *tracker = test_open_tracker(&options);

    uint32_t provider = 99;
    int32_t device = 99, fell_back = 99;
    CHECK_OK(sam2_tracker_device(tracker, &provider, &device, &fell_back));
    CHECK(provider == SAM2_PROVIDER_CPU && fell_back == 0);
    precision_is(tracker, SAM2_PRECISION_FP32);

    clip_frame(0, rgb, disc, square);
    int x, y;
    clip_disc_centre(0, &x, &y);
    sam2_track_result *first = prompt_object(tracker, 0, 1, x, y);
    count_is(first, 0, 1);
    printf("prompted: disc IoU %.3f", check_object(first, 0, 1, disc, 0));
    sam2_track_result_free(first);
    clip_square_centre(0, &x, &y);
    first = prompt_object(tracker, 0, 2, x, y);
    printf(", square IoU %.3f\n", check_object(first, 0, 2, square, 0));
    sam2_track_result_free(first);

    double min_disc = 1.0, min_square = 1.0;
    int hidden = 0, frames_tracked = test_under_valgrind() ? 12 : CLIP_FRAMES;
    printf("frame  disc IoU  present  square IoU\n");
    sam2_track_result *last = NULL;
    for (int t = 0; t < frames_tracked; t++) {
        clip_frame(t, rgb, disc, square);
        sam2_track_result *r = track(tracker, t, SAM2_TRACK_FORWARD);
        count_is(r, t, 2);
        double d = check_object(r, 0, 1, disc, t);
        double s = check_object(r, 1, 2, square, t);
        sam2_tracked_object o;
        CHECK_OK(sam2_track_result_object(r, 0, &o));
        if (d < 0) {
            hidden++;
            printf("%5d  %8s  %7d  %10.3f\n", t, "hidden", o.present, s);
        } else {
            printf("%5d  %8.3f  %7d  %10.3f\n", t, d, o.present, s);
            if (d < min_disc) min_disc = d;
        }
        if (s < min_square) min_square = s;
        if (t == frames_tracked - 1) last = r;
        else sam2_track_result_free(r);
    }
    CHECK(hidden == (frames_tracked == CLIP_FRAMES ? 4 : 1));
    printf("forward: disc IoU >= %.3f on its %d visible frames, absent on its %d hidden ones; "
           "square IoU >= %.3f on all %d\n",
           min_disc, frames_tracked - hidden, hidden, min_square, frames_tracked);

    /* The bank: each object's prompted frame and its last memory_frames tracked frames (frame 0,
     * prompted, gives the prompted result and adds no memory). */
    size_t frames = 0;
    CHECK_OK(sam2_tracker_memory_frames(tracker, &frames));
    printf("memory frames after %d frames, memory_frames 16: %zu\n", frames_tracked, frames);
    size_t kept = (size_t)(frames_tracked - 1) < 16 ? (size_t)(frames_tracked - 1) : 16;
    CHECK(frames == 2 * (1 + kept));

    /* A frame past num_frames. */
    clip_frame(0, rgb, disc, square);
    sam2_track_result *out = SENTINEL;
    CHECK_FAILS(sam2_tracker_track(tracker, CLIP_FRAMES, rgb, RGB_LEN, CLIP_WIDTH, CLIP_HEIGHT, 0,
                                   SAM2_PIXEL_RGB, SAM2_TRACK_FORWARD, &out),
                SAM2_ERR_INVALID_ARGUMENT, "outside the clip of 24 frames");
    CHECK(out == SENTINEL);

    /* Reset forgets every object; the models stay loaded. */
    CHECK_OK(sam2_tracker_reset(tracker));
    CHECK_OK(sam2_tracker_memory_frames(tracker, &frames));
    CHECK(frames == 0);
    CHECK_FAILS(sam2_tracker_track(tracker, 0, rgb, RGB_LEN, CLIP_WIDTH, CLIP_HEIGHT, 0,
                                   SAM2_PIXEL_RGB, SAM2_TRACK_FORWARD, &out),
                SAM2_ERR_INVALID_ARGUMENT, "no object");
    CHECK(out == SENTINEL);

    /* A result outlives its tracker. */
    sam2_tracker_free(tracker);
    count_is(last, frames_tracked - 1, 2);
    clip_frame(frames_tracked - 1, rgb, disc, square);
    sam2_tracked_object o;
    const uint8_t *mask = object(last, 1, &o);
    CHECK(o.object_id == 2 && test_iou(mask, square, PLANE) >= 0.9);
    sam2_track_result_free(last);
}

static void backward_from_the_last_frame(void) {
    sam2_tracker_options options;
    CHECK_OK(sam2_tracker_options_init(&options, sizeof options));
    options.num_frames = CLIP_FRAMES;
    options.memory_frames = 6;
    sam2_tracker *tracker = test_open_tracker(&options);
    int last = CLIP_FRAMES - 1, x, y;
    clip_frame(last, rgb, disc, square);
    clip_disc_centre(last, &x, &y);
    sam2_track_result_free(prompt_object(tracker, last, 5, x, y));
    double min_iou = 1.0;
    int hidden = 0, first = test_under_valgrind() ? last - 2 : 0;
    for (int t = last; t >= first; t--) {
        clip_frame(t, rgb, disc, square);
        sam2_track_result *r = track(tracker, t, SAM2_TRACK_BACKWARD);
        count_is(r, t, 1);
        double d = check_object(r, 0, 5, disc, t);
        if (d < 0) hidden++;
        else if (d < min_iou) min_iou = d;
        sam2_track_result_free(r);
    }
    CHECK(hidden == (first == 0 ? 4 : 0));
    size_t frames = 0;
    CHECK_OK(sam2_tracker_memory_frames(tracker, &frames));
    printf("backward from frame 23 to %d: disc IoU >= %.3f where visible, absent on %d frames; "
           "memory frames with memory_frames 6: %zu\n",
           first, min_iou, hidden, frames);
    size_t kept = (size_t)(last - first) < 6 ? (size_t)(last - first) : 6;
    CHECK(frames == 1 + kept);
    sam2_tracker_free(tracker);
}

static void remove_and_reset(void) {
    sam2_tracker *tracker = test_open_tracker(NULL); /* defaults: a stream of unknown length */
    int x, y;
    clip_frame(0, rgb, disc, square);
    clip_disc_centre(0, &x, &y);
    sam2_track_result_free(prompt_object(tracker, 0, 7, x, y));
    clip_square_centre(0, &x, &y);
    sam2_track_result_free(prompt_object(tracker, 0, 9, x, y));
    /* A prompted frame's memory is encoded with the prompt (issue 28: it used to keep the whole
     * encoder output, ~28 MiB, until the next track, uncounted): each holds about 1.25 MiB (its
     * memory, pointer and logits) beside the last frame's features (24 MiB, SAM2's shapes) and
     * the memory position encoding (1 MiB), and the frame's input tensor kept for the next frame
     * (12 MiB, issue 30): 39.5 MiB in all. */
    size_t frames = 99;
    CHECK_OK(sam2_tracker_memory_frames(tracker, &frames));
    CHECK(frames == 2);
    uint64_t bytes = 0;
    CHECK_OK(sam2_tracker_memory_bytes(tracker, &bytes));
    printf("two objects prompted on frame 0: %zu frame memories, %.1f MiB held\n", frames,
           (double)bytes / 1048576.0);
    CHECK(bytes > 39 * 1048576ull && bytes < 40 * 1048576ull);
    int32_t removed = 99;
    CHECK_OK(sam2_tracker_remove_object(tracker, 7, &removed));
    CHECK(removed == 1);
    CHECK_OK(sam2_tracker_remove_object(tracker, 7, &removed));
    CHECK(removed == 0);
    CHECK_OK(sam2_tracker_remove_object(tracker, 12345, NULL));
    clip_frame(1, rgb, disc, square);
    sam2_track_result *r = track(tracker, 1, SAM2_TRACK_FORWARD);
    count_is(r, 1, 1);
    double s = check_object(r, 0, 9, square, 1);
    sam2_track_result_free(r);
    CHECK_OK(sam2_tracker_memory_frames(tracker, &frames));
    printf("after removing object 7: only object 9 tracked (IoU %.3f), memory frames %zu\n", s,
           frames);
    CHECK(frames == 2);
    CHECK_OK(sam2_tracker_reset(tracker));
    CHECK_OK(sam2_tracker_remove_object(tracker, 9, &removed));
    CHECK(removed == 0);
    sam2_tracker_free(tracker);
}

static void errors(void) {
    sam2_tracker_options options;
    CHECK_OK(sam2_tracker_options_init(&options, sizeof options));
    options.num_frames = CLIP_FRAMES;
    sam2_tracker *tracker = test_open_tracker(&options);
    clip_frame(0, rgb, disc, square);
    sam2_track_result *out = SENTINEL;
    sam2_point pt;
#define PROMPT_FAILS(frame, prompt, needle)                                                    \
    do {                                                                                     \
        CHECK_FAILS(sam2_tracker_add_prompt(tracker, frame, rgb, RGB_LEN, CLIP_WIDTH,        \
                                            CLIP_HEIGHT, 0, SAM2_PIXEL_RGB, 1, &(prompt), &out), \
                    SAM2_ERR_INVALID_ARGUMENT, needle);                                      \
        CHECK(out == SENTINEL);                                                              \
    } while (0)
    sam2_prompt p = click_at(400, 10, &pt);
    PROMPT_FAILS(0, p, "outside");
    p = click_at(10, 10, &pt);
    pt.x = NAN;
    PROMPT_FAILS(0, p, "points");
    p = click_at(10, 10, &pt);
    PROMPT_FAILS(CLIP_FRAMES, p, "outside the clip");
    static float logits[256 * 256];
    p.mask_input = logits;
    p.mask_input_len = 256 * 256;
    PROMPT_FAILS(0, p, "mask");
    /* None of those created an object. */
    size_t frames = 99;
    CHECK_OK(sam2_tracker_memory_frames(tracker, &frames));
    CHECK(frames == 0);
    CHECK_FAILS(sam2_tracker_track(tracker, 0, rgb, RGB_LEN, CLIP_WIDTH, CLIP_HEIGHT, 0,
                                   SAM2_PIXEL_RGB, SAM2_TRACK_FORWARD, &out),
                SAM2_ERR_INVALID_ARGUMENT, "no object");

    int x, y;
    clip_disc_centre(0, &x, &y);
    sam2_track_result *r = prompt_object(tracker, 0, 1, x, y);
    CHECK_FAILS(sam2_tracker_track(tracker, 0, rgb, RGB_LEN, CLIP_WIDTH, CLIP_HEIGHT, 0,
                                   SAM2_PIXEL_RGB, 2, &out),
                SAM2_ERR_INVALID_ARGUMENT, "direction");
    CHECK(out == SENTINEL);
    sam2_tracked_object o;
    memset(&o, 0x5a, sizeof o);
    CHECK_FAILS(sam2_track_result_object(r, 1, &o), SAM2_ERR_INVALID_ARGUMENT,
                "the result holds 1 objects");
    CHECK(o.object_id == 0x5a5a5a5aU);
    sam2_track_result_free(r);
    sam2_tracker_free(tracker);

    /* Options out of range, and an image encoder where the video one belongs. */
    char paths[TRACK_MODULES][TEST_PATH_MAX], image_encoder[TEST_PATH_MAX];
    test_track_paths(paths);
    sam2_tracker *t = (sam2_tracker *)(uintptr_t)0x5a5a5a50U;
    const uint32_t memory[] = {0, 3, 5, 1025, 2000};
    for (size_t i = 0; i < sizeof memory / sizeof memory[0]; i++) {
        CHECK_OK(sam2_tracker_options_init(&options, sizeof options));
        options.memory_frames = memory[i];
        CHECK_FAILS(sam2_tracker_new(paths[0], paths[1], paths[2], paths[3], &options, &t),
                    SAM2_ERR_INVALID_ARGUMENT, "memory_frames");
    }
    CHECK_OK(sam2_tracker_options_init(&options, sizeof options));
    options.corrections_as_conditioning = 2;
    CHECK_FAILS(sam2_tracker_new(paths[0], paths[1], paths[2], paths[3], &options, &t),
                SAM2_ERR_INVALID_ARGUMENT, "corrections_as_conditioning");
    CHECK_FAILS(sam2_tracker_new(test_model_path(image_encoder, "tiny_a_encoder.onnx"), paths[1],
                                 paths[2], paths[3], NULL, &t),
                SAM2_ERR_MODEL, "vision_feats");
    CHECK((uintptr_t)t == 0x5a5a5a50U);
    printf("errors: each refused with its status and message, nothing written, no object made\n");
}

/* The int8 variant of the generated tracker (sam2-variant, made by the set-up in
 * variants/track_int8: its image encoder int8, the three other modules copied) says so, and
 * follows the disc from a click as the original does. */
static void int8_variant(void) {
    static const char *const files[TRACK_MODULES] = {
        "variants/track_int8/image_encoder.onnx", "variants/track_int8/memory_attention.onnx",
        "variants/track_int8/image_decoder.onnx", "variants/track_int8/memory_encoder.onnx"};
    char p[TRACK_MODULES][TEST_PATH_MAX];
    for (int i = 0; i < TRACK_MODULES; i++) test_model_path(p[i], files[i]);
    sam2_tracker_options options;
    CHECK_OK(sam2_tracker_options_init(&options, sizeof options));
    sam2_tracker *tracker = NULL;
    CHECK_OK(sam2_tracker_new(p[0], p[1], p[2], p[3], &options, &tracker));
    precision_is(tracker, SAM2_PRECISION_INT8);

    clip_frame(0, rgb, disc, square);
    int x, y;
    clip_disc_centre(0, &x, &y);
    sam2_track_result *first = prompt_object(tracker, 0, 1, x, y);
    printf("int8 variant: prompted disc IoU %.3f", check_object(first, 0, 1, disc, 0));
    sam2_track_result_free(first);
    for (int t = 1; t < 4; t++) {
        clip_frame(t, rgb, disc, square);
        sam2_track_result *r = track(tracker, t, SAM2_TRACK_FORWARD);
        printf(", frame %d %.3f", t, check_object(r, 0, 1, disc, t));
        sam2_track_result_free(r);
    }
    printf("\n");
    sam2_tracker_free(tracker);
}

/* Every load-time rewrite off (disabled_rewrites = SAM2_REWRITE_ALL): the modules load as
 * exported and follow the disc as with the rewrites, within float noise of their scores. */
static void rewrites_off(void) {
    sam2_tracker_options on, off;
    CHECK_OK(sam2_tracker_options_init(&on, sizeof on));
    CHECK(on.disabled_rewrites == 0);
    CHECK_OK(sam2_tracker_options_init(&off, sizeof off));
    off.disabled_rewrites = SAM2_REWRITE_ALL;
    sam2_tracker *trackers[2] = {test_open_tracker(&on), test_open_tracker(&off)};
    float scores[2][4];
    clip_frame(0, rgb, disc, square);
    int x, y;
    clip_disc_centre(0, &x, &y);
    for (int k = 0; k < 2; k++) sam2_track_result_free(prompt_object(trackers[k], 0, 1, x, y));
    /* Under valgrind one tracked frame (the other tests cover the tracker's memory there). */
    int frames = test_under_valgrind() ? 2 : 4;
    for (int t = 1; t < frames; t++) {
        clip_frame(t, rgb, disc, square);
        for (int k = 0; k < 2; k++) {
            sam2_track_result *r = track(trackers[k], t, SAM2_TRACK_FORWARD);
            CHECK(check_object(r, 0, 1, disc, t) >= 0.9);
            sam2_tracked_object o;
            CHECK_OK(sam2_track_result_object(r, 0, &o));
            scores[k][t] = o.score;
            sam2_track_result_free(r);
        }
        CHECK(fabsf(scores[0][t] - scores[1][t]) <= 1e-3f * (1.0f + fabsf(scores[0][t])));
    }
    printf("rewrites off: the same scores as on, frames 1-%d (frame 1: %.4f)\n", frames - 1,
           scores[1][1]);
    for (int k = 0; k < 2; k++) sam2_tracker_free(trackers[k]);
}

int main(void) {
    test_default_environment();
    test_init_runtime();
    forward_both_objects();
    backward_from_the_last_frame();
    remove_and_reset();
    errors();
    int8_variant();
    rewrites_off();
    printf("test_tracker: ok\n");
    return 0;
}
