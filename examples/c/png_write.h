/*
 * A minimal PNG writer for the demo: 8-bit grayscale or RGB, no compression (zlib "stored"
 * blocks), no external library; and its animated form (APNG), for the tracking demo. Not a
 * general-purpose encoder.
 */
#ifndef SAM2_DEMO_PNG_WRITE_H
#define SAM2_DEMO_PNG_WRITE_H

#include <stdint.h>

/* Writes `height` rows of `width` pixels (`channels` = 1 for gray, 3 for RGB; rows tightly
 * packed) to `path`. Returns 0 on success, -1 on failure (errno tells why). */
int png_write(const char *path, const uint8_t *pixels, uint32_t width, uint32_t height,
              int channels);

/* Writes an animated PNG (APNG) of `count` frames, each `height` rows of `width` pixels as
 * png_write takes them, shown `delay_ms` milliseconds each, looping forever. Viewers without
 * APNG support show the first frame. Returns 0 on success, -1 on failure. */
int apng_write(const char *path, const uint8_t *const *frames, uint32_t count, uint32_t width,
               uint32_t height, int channels, uint32_t delay_ms);

#endif /* SAM2_DEMO_PNG_WRITE_H */
