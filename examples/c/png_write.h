/*
 * A minimal PNG writer for the demo: 8-bit grayscale or RGB, no compression (zlib "stored"
 * blocks), no external library. Not a general-purpose encoder.
 */
#ifndef SAM2_DEMO_PNG_WRITE_H
#define SAM2_DEMO_PNG_WRITE_H

#include <stdint.h>

/* Writes `height` rows of `width` pixels (`channels` = 1 for gray, 3 for RGB; rows tightly
 * packed) to `path`. Returns 0 on success, -1 on failure (errno tells why). */
int png_write(const char *path, const uint8_t *pixels, uint32_t width, uint32_t height,
              int channels);

#endif /* SAM2_DEMO_PNG_WRITE_H */
