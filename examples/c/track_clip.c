/* The clip of tools/track_clip.py, byte for byte (see track_clip.h). */
#include "track_clip.h"

#include <string.h>

enum { RADIUS = 22, BAR_X0 = 150, BAR_X1 = 230 };

void clip_disc_centre(int t, int *x, int *y) {
    int cx;
    if (t <= 9) cx = 34 + 10 * t;
    else if (t == 10) cx = 140;
    else if (t <= 14) cx = 174 + 10 * (t - 11);
    else if (t == 15) cx = 236;
    else cx = 246 + 7 * (t - 16);
    *x = cx;
    *y = 96 + 4 * t;
}

static int square_left(int t) {
    return 250 - 8 * t;
}

void clip_square_centre(int t, int *x, int *y) {
    *x = square_left(t) + 20;
    *y = 40;
}

void clip_frame(int t, uint8_t *rgb, uint8_t *disc, uint8_t *square) {
    static const uint8_t target[3] = {214, 48, 52}, distractor[3] = {48, 84, 200},
                         bar[3] = {70, 76, 88};
    int cx, cy;
    clip_disc_centre(t, &cx, &cy);
    int sx = square_left(t);
    for (int y = 0; y < CLIP_HEIGHT; y++) {
        for (int x = 0; x < CLIP_WIDTH; x++) {
            size_t i = (size_t)y * CLIP_WIDTH + (size_t)x;
            int s = x / 20 - y / 24;
            uint8_t px[3] = {(uint8_t)(168 + s + (3 * x + 5 * y) % 17 - 8),
                             (uint8_t)(162 + s + (5 * x + 2 * y) % 13 - 6),
                             (uint8_t)(146 + s + (2 * x + 7 * y) % 11 - 5)};
            int in_bar = x >= BAR_X0 && x < BAR_X1;
            int in_disc = (x - cx) * (x - cx) + (y - cy) * (y - cy) <= RADIUS * RADIUS && !in_bar;
            int in_square = x >= sx && x < sx + 40 && y >= 20 && y < 60;
            if (in_bar) memcpy(px, bar, 3);
            if (in_disc) memcpy(px, target, 3);
            if (in_square) memcpy(px, distractor, 3);
            memcpy(rgb + i * 3, px, 3);
            if (disc) disc[i] = (uint8_t)in_disc;
            if (square) square[i] = (uint8_t)in_square;
        }
    }
}
