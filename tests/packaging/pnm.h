/*
 * Reading the binary Netpbm files of testdata/ (P6 RGB and P5 gray, maxval 255, no comments), for
 * the consumer programs of tests/packaging. Valid C99 and C++.
 */
#ifndef SAM2_PACKAGING_PNM_H
#define SAM2_PACKAGING_PNM_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Reads `path`; returns a malloc'd buffer of width*height*channels bytes, or NULL. */
static uint8_t *pnm_read(const char *path, uint32_t *width, uint32_t *height, uint32_t *channels) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    char kind = 0;
    unsigned w = 0, h = 0, maxval = 0;
    uint8_t *data = NULL;
    if (fscanf(f, "P%c %u %u %u", &kind, &w, &h, &maxval) == 4 && (kind == '5' || kind == '6') &&
        maxval == 255 && w > 0 && h > 0 && fgetc(f) != EOF) {
        size_t len = (size_t)w * h * (kind == '6' ? 3 : 1);
        data = (uint8_t *)malloc(len);
        if (data != NULL && fread(data, 1, len, f) != len) {
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    *width = w;
    *height = h;
    *channels = kind == '6' ? 3 : 1;
    return data;
}

/* IoU of two masks of n bytes (non-zero = foreground). */
static double pnm_iou(const uint8_t *a, const uint8_t *b, size_t n) {
    size_t both = 0, either = 0;
    for (size_t i = 0; i < n; i++) {
        both += a[i] && b[i];
        either += a[i] || b[i];
    }
    return either == 0 ? 1.0 : (double)both / (double)either;
}

#endif /* SAM2_PACKAGING_PNM_H */
