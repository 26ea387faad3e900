/*
 * sam2_demo: segmenting an image from C with libsam2.
 *
 *   sam2_demo <encoder.onnx> <decoder.onnx> <image.ppm> <outdir>
 *
 * Encodes the image once, then runs three prompts on the embedding (the click, the box and the
 * click with a negative click of testdata/demo.json), printing each mask's score, box and area,
 * and writing <outdir>/mask_<name>.png (the mask, 0/255) and <outdir>/overlay_<name>.png (the
 * image with the mask tinted and its box outlined).
 *
 * The pattern to copy: every sam2 call returns a status; on failure, read the message with
 * sam2_last_error_message. Everything sam2 creates is released with its _free function.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "png_write.h"
#include "sam2.h"

/* Prints the failed call and sam2's message for it, and returns 1 (for `goto done`). */
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

/* sam2 reports warnings (a device fallback, say) through a callback; this one prints them. */
static void print_log(uint32_t level, const char *message, void *user_data) {
    (void)user_data;
    fprintf(stderr, "[sam2 %s] %s\n", level >= SAM2_LOG_ERROR ? "error" : "warning", message);
}

/* ---- A binary PPM (P6, maxval 255) reader, enough for the bundled pictures ---- */

static int skip_space_and_comments(FILE *f) {
    int c;
    while ((c = fgetc(f)) != EOF) {
        if (c == '#') {
            while ((c = fgetc(f)) != EOF && c != '\n') {
            }
        } else if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
            return ungetc(c, f);
        }
    }
    return EOF;
}

static uint8_t *read_ppm(const char *path, uint32_t *width, uint32_t *height) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    unsigned w = 0, h = 0, maxval = 0;
    uint8_t *pixels = NULL;
    if (fgetc(f) == 'P' && fgetc(f) == '6' && skip_space_and_comments(f) != EOF &&
        fscanf(f, "%u", &w) == 1 && skip_space_and_comments(f) != EOF &&
        fscanf(f, "%u", &h) == 1 && skip_space_and_comments(f) != EOF &&
        fscanf(f, "%u", &maxval) == 1 && fgetc(f) != EOF && maxval == 255 && w > 0 && h > 0 &&
        w <= 65536 && h <= 65536) {
        size_t len = (size_t)w * h * 3;
        pixels = malloc(len);
        if (pixels != NULL && fread(pixels, 1, len, f) != len) {
            free(pixels);
            pixels = NULL;
        }
    }
    fclose(f);
    *width = w;
    *height = h;
    return pixels;
}

/* ---- Output pictures ---- */

static int write_mask_png(const char *path, const uint8_t *mask, uint32_t w, uint32_t h) {
    size_t n = (size_t)w * h;
    uint8_t *gray = malloc(n);
    if (gray == NULL) return -1;
    for (size_t i = 0; i < n; i++) gray[i] = mask[i] ? 255 : 0;
    int rc = png_write(path, gray, w, h, 1);
    free(gray);
    return rc;
}

/* The image with the mask tinted (half-way to `tint`) and its box outlined (2 px, yellow). */
static int write_overlay_png(const char *path, const uint8_t *rgb, const uint8_t *mask,
                             const uint32_t box[4], uint64_t area, uint32_t w, uint32_t h,
                             const uint8_t tint[3]) {
    size_t n = (size_t)w * h;
    uint8_t *out = malloc(n * 3);
    if (out == NULL) return -1;
    for (size_t i = 0; i < n; i++) {
        for (int c = 0; c < 3; c++) {
            uint8_t v = rgb[i * 3 + c];
            out[i * 3 + c] = mask[i] ? (uint8_t)((v + tint[c]) / 2) : v;
        }
    }
    static const uint8_t outline[3] = {255, 230, 0};
    for (uint32_t y = 0; area > 0 && y < h; y++) {
        for (uint32_t x = 0; x < w; x++) {
            int inside = x + 1 >= box[0] && x <= box[2] + 1 && y + 1 >= box[1] && y <= box[3] + 1;
            int edge = x <= box[0] || x >= box[2] || y <= box[1] || y >= box[3];
            if (inside && edge) memcpy(out + ((size_t)y * w + x) * 3, outline, 3);
        }
    }
    int rc = png_write(path, out, w, h, 3);
    free(out);
    return rc;
}

/* ---- The prompts: taken from testdata/demo.json ---- */

typedef struct demo_prompt {
    const char *name;   /* the target shape */
    sam2_point points[2];
    size_t point_count;
    int has_box;
    float box[4];
    uint8_t tint[3];
} demo_prompt;

static const demo_prompt PROMPTS[] = {
    /* "click": a positive click on the purple star. */
    {"purple_star", {{580, 190, SAM2_POINT_POSITIVE}, {0, 0, 0}}, 1, 0, {0, 0, 0, 0}, {0, 200, 255}},
    /* "box": a box around the orange ellipse, no click. */
    {"orange_ellipse", {{0, 0, 0}, {0, 0, 0}}, 0, 1, {52, 82, 327, 257}, {40, 255, 60}},
    /* "negative": teal_left and teal_right share a colour; the negative click on teal_right
     * keeps it out. */
    {"teal_left",
     {{160, 440, SAM2_POINT_POSITIVE}, {630, 460, SAM2_POINT_NEGATIVE}},
     2,
     0,
     {0, 0, 0, 0},
     {255, 40, 160}},
};

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s <encoder.onnx> <decoder.onnx> <image.ppm> <outdir>\n",
                argc > 0 ? argv[0] : "sam2_demo");
        return 2;
    }
    const char *encoder_path = argv[1], *decoder_path = argv[2], *image_path = argv[3];
    const char *outdir = argv[4];

    int failed = 0;
    sam2_encoder *encoder = NULL;
    sam2_predictor *predictor = NULL;
    sam2_embedding *embedding = NULL;
    sam2_masks *masks = NULL;
    uint32_t width = 0, height = 0;
    uint8_t *rgb = read_ppm(image_path, &width, &height);
    if (rgb == NULL) {
        fprintf(stderr, "cannot read %s (a binary PPM, P6, is expected)\n", image_path);
        return 1;
    }

    /* Warnings and errors from sam2 (and ONNX Runtime) go to stderr. */
    TRY(sam2_set_log_callback(print_log, NULL, SAM2_LOG_WARNING));
    /* Load ONNX Runtime. NULL searches: $SAM2_ONNXRUNTIME_PATH, $ORT_DYLIB_PATH, the directory
     * of libsam2.so, then the system's libraries. */
    TRY(sam2_runtime_init(NULL));
    printf("sam2 %s, ONNX Runtime %s\n", sam2_version(), sam2_runtime_version());

    /* The encoder (run once per image) and the predictor (run once per prompt). Giving the
     * encoder to the predictor makes it refuse embeddings from any other model. */
    TRY(sam2_encoder_new(encoder_path, NULL, &encoder));
    TRY(sam2_predictor_new(encoder, decoder_path, NULL, &predictor));

    /* Encode once: this is the expensive step. Rows are tightly packed RGB (stride 0). */
    TRY(sam2_encode(encoder, rgb, (size_t)width * height * 3, width, height, 0, SAM2_PIXEL_RGB,
                    &embedding));
    printf("encoded %s (%ux%u)\n", image_path, (unsigned)width, (unsigned)height);

    for (size_t i = 0; i < sizeof PROMPTS / sizeof PROMPTS[0]; i++) {
        const demo_prompt *p = &PROMPTS[i];
        sam2_prompt prompt;
        memset(&prompt, 0, sizeof prompt);
        prompt.points = p->point_count ? p->points : NULL;
        prompt.point_count = p->point_count;
        prompt.has_box = p->has_box;
        memcpy(prompt.box, p->box, sizeof prompt.box);

        /* One prompt, default options: the best of the model's candidate masks. */
        TRY(sam2_predict(predictor, embedding, &prompt, 1, NULL, &masks));
        const uint8_t *mask = NULL;
        size_t mask_len = 0;
        float score = 0;
        uint32_t box[4];
        uint64_t area = 0;
        TRY(sam2_masks_mask(masks, 0, &mask, &mask_len));
        TRY(sam2_masks_score(masks, 0, &score));
        TRY(sam2_masks_box(masks, 0, box, &area));
        printf("%-15s score %.3f  box [%u, %u, %u, %u]  area %llu px\n", p->name, score,
               (unsigned)box[0], (unsigned)box[1], (unsigned)box[2], (unsigned)box[3],
               (unsigned long long)area);

        char path[4096];
        snprintf(path, sizeof path, "%s/mask_%s.png", outdir, p->name);
        if (write_mask_png(path, mask, width, height) != 0) {
            perror(path);
            failed = 1;
            goto done;
        }
        snprintf(path, sizeof path, "%s/overlay_%s.png", outdir, p->name);
        if (write_overlay_png(path, rgb, mask, box, area, width, height, p->tint) != 0) {
            perror(path);
            failed = 1;
            goto done;
        }
        /* The mask pointer belongs to the result: done with it, release the result. */
        sam2_masks_free(masks);
        masks = NULL;
    }
    printf("wrote mask_*.png and overlay_*.png to %s\n", outdir);

done:
    /* Release in any order; _free(NULL) does nothing. */
    sam2_masks_free(masks);
    sam2_embedding_free(embedding);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
    sam2_set_log_callback(NULL, NULL, SAM2_LOG_WARNING);
    free(rgb);
    return failed;
}
