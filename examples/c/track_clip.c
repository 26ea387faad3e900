/* The clip of tools/models/track_clip.py, read from its file (see track_clip.h). */
#include "track_clip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OBJECTS = 2,
    HEADER = 28,
    CENTRES = CLIP_FRAMES * OBJECTS * 8,
    PLANE = CLIP_WIDTH * CLIP_HEIGHT,
    FRAME_BYTES = PLANE * (3 + OBJECTS)
};

/* The whole file; static, so nothing is left to free. */
static uint8_t clip[HEADER + CENTRES + (size_t)CLIP_FRAMES * FRAME_BYTES];
static int loaded;

static uint32_t word(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int clip_load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "%s: cannot open the tracking clip (tools/setup/setup.sh writes it)\n", path);
        return -1;
    }
    size_t got = fread(clip, 1, sizeof clip, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    const uint32_t want[5] = {1, CLIP_WIDTH, CLIP_HEIGHT, CLIP_FRAMES, OBJECTS};
    int ok = got == sizeof clip && !extra && memcmp(clip, "SAM2CLIP", 8) == 0;
    for (int i = 0; ok && i < 5; i++) ok = word(clip + 8 + 4 * i) == want[i];
    if (!ok) {
        fprintf(stderr, "%s is not the clip of tools/models/track_clip.py (run tools/setup/setup.sh)\n", path);
        return -1;
    }
    loaded = 1;
    return 0;
}

static void need(void) {
    if (loaded) return;
    const char *models = getenv("SAM2_MODELS");
    char path[4096];
    snprintf(path, sizeof path, "%s/track/clip.bin", models != NULL ? models : "models");
    if (clip_load(path) != 0) exit(2);
}

static void centre(int t, int k, int *x, int *y) {
    need();
    const uint8_t *p = clip + HEADER + ((size_t)t * OBJECTS + (size_t)k) * 8;
    *x = (int32_t)word(p);
    *y = (int32_t)word(p + 4);
}

void clip_disc_centre(int t, int *x, int *y) {
    centre(t, 0, x, y);
}

void clip_square_centre(int t, int *x, int *y) {
    centre(t, 1, x, y);
}

void clip_frame(int t, uint8_t *rgb, uint8_t *disc, uint8_t *square) {
    need();
    const uint8_t *f = clip + HEADER + CENTRES + (size_t)t * FRAME_BYTES;
    memcpy(rgb, f, (size_t)PLANE * 3);
    if (disc) memcpy(disc, f + (size_t)PLANE * 3, PLANE);
    if (square) memcpy(square, f + (size_t)PLANE * 4, PLANE);
}
