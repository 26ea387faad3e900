/*
 * sam2_track_demo: following objects through a video from C with libsam2.
 *
 *   sam2_track_demo <track-dir> <outdir> [<clip>]
 *
 * <track-dir> holds the four modules of a SAM2 video export (image_encoder.onnx,
 * memory_attention.onnx, image_decoder.onnx, memory_encoder.onnx; the generated ones are in
 * $SAM2_MODELS/track). The clip is the synthetic one of the tests, the file
 * tools/models/track_clip.py writes (<clip>, by default <track-dir>/clip.bin, where
 * tools/setup/setup.sh puts it): a red disc passes behind a grey bar while a blue square moves the
 * other way. One click on each on frame 0 prompts them; the tracker then follows both through the
 * 24 frames. For each frame the demo prints whether each object is present, its score, and the IoU
 * of its mask with the clip's ground truth; it writes <outdir>/track_NN.png (the frame with each
 * mask tinted and its box outlined) and <outdir>/track.png, an animated PNG of all of them.
 *
 * The pattern to copy: sam2_tracker_new once; sam2_tracker_add_prompt on the frames where the
 * user clicks; then sam2_tracker_track frame after frame, reading each object of the result
 * (sam2_track_result_object: present, score, box, area; sam2_track_result_mask: the pixels), and
 * sam2_track_result_free. A hidden object is reported with present == 0 and an empty mask.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "png_write.h"
#include "sam2.h"
#include "track_clip.h"

enum { PLANE = CLIP_WIDTH * CLIP_HEIGHT, RGB_LEN = PLANE * 3, OBJECTS = 2 };

static int report(const char *what, sam2_status status) {
    char message[2048];
    if (sam2_last_error_message(message, sizeof message, NULL) != SAM2_OK) {
        snprintf(message, sizeof message, "(message too long)");
    }
    fprintf(stderr, "%s failed: %s\n  %s\n", what, sam2_status_str(status), message);
    return 1;
}

#define TRY(call)                                                                            \
    do {                                                                                     \
        sam2_status status_ = (call);                                                        \
        if (status_ != SAM2_OK) {                                                            \
            failed = report(#call, status_);                                                 \
            goto done;                                                                       \
        }                                                                                    \
    } while (0)

static double iou(const uint8_t *a, const uint8_t *b) {
    size_t inter = 0, uni = 0;
    for (size_t i = 0; i < PLANE; i++) {
        inter += a[i] && b[i];
        uni += a[i] || b[i];
    }
    return uni == 0 ? 1.0 : (double)inter / (double)uni;
}

/* Tints the mask's pixels halfway to `tint` and outlines its box, in place. */
static void draw(uint8_t *rgb, const uint8_t *mask, const sam2_tracked_object *o,
                 const uint8_t tint[3]) {
    for (size_t i = 0; i < PLANE; i++) {
        if (!mask[i]) continue;
        for (int c = 0; c < 3; c++) rgb[i * 3 + c] = (uint8_t)((rgb[i * 3 + c] + tint[c]) / 2);
    }
    if (!o->present) return;
    for (uint32_t y = o->box[1]; y <= o->box[3]; y++) {
        for (uint32_t x = o->box[0]; x <= o->box[2]; x++) {
            if (y != o->box[1] && y != o->box[3] && x != o->box[0] && x != o->box[2]) continue;
            memcpy(rgb + ((size_t)y * CLIP_WIDTH + x) * 3, tint, 3);
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s <track-dir> <outdir> [<clip>]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1], *outdir = argv[2];
    char clip[4096];
    snprintf(clip, sizeof clip, "%s/clip.bin", dir);
    if (clip_load(argc == 4 ? argv[3] : clip) != 0) return 1;
    static const char *const modules[4] = {"image_encoder", "memory_attention", "image_decoder",
                                           "memory_encoder"};
    static const uint8_t tints[OBJECTS][3] = {{0, 255, 120}, {255, 230, 0}};
    static const char *const names[OBJECTS] = {"disc", "square"};
    char paths[4][4096];
    for (int m = 0; m < 4; m++) snprintf(paths[m], sizeof paths[m], "%s/%s.onnx", dir, modules[m]);

    int failed = 0;
    sam2_tracker *tracker = NULL;
    sam2_track_result *result = NULL;
    uint8_t *frames[CLIP_FRAMES] = {NULL};
    static uint8_t truth[OBJECTS][PLANE];

    TRY(sam2_runtime_init(NULL)); /* SAM2_ONNXRUNTIME_PATH, or the library's search */
    sam2_tracker_options options;
    TRY(sam2_tracker_options_init(&options, sizeof options));
    options.num_frames = CLIP_FRAMES; /* the clip's length is known */
    TRY(sam2_tracker_new(paths[0], paths[1], paths[2], paths[3], &options, &tracker));

    for (int t = 0; t < CLIP_FRAMES; t++) {
        frames[t] = malloc(RGB_LEN);
        if (frames[t] == NULL) {
            fprintf(stderr, "out of memory\n");
            failed = 1;
            goto done;
        }
    }

    /* Frame 0: one click on each object. */
    clip_frame(0, frames[0], truth[0], truth[1]);
    for (uint32_t k = 0; k < OBJECTS; k++) {
        int x, y;
        if (k == 0) clip_disc_centre(0, &x, &y);
        else clip_square_centre(0, &x, &y);
        sam2_point click = {(float)x, (float)y, SAM2_POINT_POSITIVE};
        sam2_prompt prompt;
        memset(&prompt, 0, sizeof prompt);
        prompt.points = &click;
        prompt.point_count = 1;
        TRY(sam2_tracker_add_prompt(tracker, 0, frames[0], RGB_LEN, CLIP_WIDTH, CLIP_HEIGHT, 0,
                                    SAM2_PIXEL_RGB, k + 1, &prompt, &result));
        sam2_track_result_free(result);
        result = NULL;
        printf("object %u (%s): click at (%d, %d) on frame 0\n", k + 1, names[k], x, y);
    }

    printf("frame   disc: present  score    IoU   square: present  score    IoU\n");
    int hidden_ok = 1;
    double worst = 1.0;
    for (int t = 0; t < CLIP_FRAMES; t++) {
        clip_frame(t, frames[t], truth[0], truth[1]);
        TRY(sam2_tracker_track(tracker, (uint32_t)t, frames[t], RGB_LEN, CLIP_WIDTH, CLIP_HEIGHT,
                               0, SAM2_PIXEL_RGB, SAM2_TRACK_FORWARD, &result));
        size_t count = 0;
        uint32_t index = 0, w = 0, h = 0;
        TRY(sam2_track_result_count(result, &index, &count, &w, &h));
        printf("%5d", t);
        for (size_t k = 0; k < count && k < OBJECTS; k++) {
            sam2_tracked_object o;
            const uint8_t *mask = NULL;
            size_t len = 0;
            TRY(sam2_track_result_object(result, k, &o));
            TRY(sam2_track_result_mask(result, k, &mask, &len));
            int visible = 0;
            for (size_t i = 0; i < PLANE && !visible; i++) visible = truth[k][i];
            if (visible) {
                double v = iou(mask, truth[k]);
                if (v < worst) worst = v;
                printf("   %14s %6.2f  %5.3f", o.present ? "yes" : "NO", o.score, v);
            } else {
                if (o.present) hidden_ok = 0;
                printf("   %14s %6.2f %6s", o.present ? "yes (hidden!)" : "no (hidden)", o.score,
                       "-");
            }
            draw(frames[t], mask, &o, tints[k]);
        }
        printf("\n");
        sam2_track_result_free(result);
        result = NULL;
        char path[4200];
        snprintf(path, sizeof path, "%s/track_%02d.png", outdir, t);
        if (png_write(path, frames[t], CLIP_WIDTH, CLIP_HEIGHT, 3) != 0) {
            fprintf(stderr, "cannot write %s\n", path);
            failed = 1;
            goto done;
        }
    }
    size_t memory = 0;
    TRY(sam2_tracker_memory_frames(tracker, &memory));
    printf("worst IoU where visible: %.3f; the disc %s while behind the bar; memory: %zu frames\n",
           worst, hidden_ok ? "was reported absent" : "WAS REPORTED PRESENT", memory);

    char path[4200];
    snprintf(path, sizeof path, "%s/track.png", outdir);
    if (apng_write(path, (const uint8_t *const *)frames, CLIP_FRAMES, CLIP_WIDTH, CLIP_HEIGHT, 3,
                   150) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        failed = 1;
        goto done;
    }
    printf("wrote track_00.png .. track_%02d.png and track.png (animated) to %s\n",
           CLIP_FRAMES - 1, outdir);
    if (!hidden_ok || worst < 0.9) failed = 1;

done:
    sam2_track_result_free(result);
    sam2_tracker_free(tracker);
    for (int t = 0; t < CLIP_FRAMES; t++) free(frames[t]);
    return failed;
}
