/*
 * The synthetic clip of the tracking tests and demo, read from the file tools/models/track_clip.py
 * writes (models/track/clip.bin, made by tools/setup/setup.sh; its layout is in track_clip.py's doc
 * string): 320 x 240 RGB, 24 frames; a red disc (object 1) moves right, passes behind a grey bar
 * (hidden on frames 11-14) and comes out; a blue square (object 2) moves left.
 */
#ifndef SAM2_TRACK_CLIP_H
#define SAM2_TRACK_CLIP_H

#include <stdint.h>

enum { CLIP_WIDTH = 320, CLIP_HEIGHT = 240, CLIP_FRAMES = 24 };

/* Reads the clip from `path`; 0 on success, else -1 with the reason on stderr. Without it, the
 * first call below reads $SAM2_MODELS/track/clip.bin, and exits the program if it cannot. */
int clip_load(const char *path);
/* Frame `t`: `rgb` (CLIP_WIDTH * CLIP_HEIGHT * 3 bytes) and, when not NULL, the ground truth of
 * the disc's visible pixels and of the square (CLIP_WIDTH * CLIP_HEIGHT bytes of 0/1 each). */
void clip_frame(int t, uint8_t *rgb, uint8_t *disc, uint8_t *square);
/* Where to click each object on frame `t` (the disc's centre, the square's centre). */
void clip_disc_centre(int t, int *x, int *y);
void clip_square_centre(int t, int *x, int *y);

#endif
