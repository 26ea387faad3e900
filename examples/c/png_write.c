/* PNG = signature, then chunks (length, type, data, CRC-32 of type+data): IHDR, IDAT, IEND.
 * IDAT holds a zlib stream: a 2-byte header, deflate "stored" blocks (up to 65535 bytes each:
 * a header byte, LEN, ~LEN, raw bytes), and the Adler-32 of the uncompressed data. The
 * uncompressed data is each row prefixed by filter type 0 (none). */
#include "png_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return crc;
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static int write_chunk(FILE *f, const char type[4], const uint8_t *data, uint32_t len) {
    uint8_t head[8], tail[4];
    put32(head, len);
    memcpy(head + 4, type, 4);
    uint32_t crc = crc_update(0xFFFFFFFFu, head + 4, 4);
    crc = crc_update(crc, data, len) ^ 0xFFFFFFFFu;
    put32(tail, crc);
    return fwrite(head, 1, 8, f) == 8 && (len == 0 || fwrite(data, 1, len, f) == len) &&
                   fwrite(tail, 1, 4, f) == 4
               ? 0
               : -1;
}

/* The zlib stream of one image: each row behind a filter byte 0 (none), in stored blocks, then
 * the Adler-32. Returns a malloc'd buffer and its length in *zlen_out, or NULL. */
static uint8_t *zlib_image(const uint8_t *pixels, uint32_t width, uint32_t height, int channels,
                           size_t *zlen_out) {
    size_t row = (size_t)width * (size_t)channels;
    size_t raw_len = (row + 1) * height;                /* filter byte + row */
    size_t blocks = raw_len / 65535 + 1;
    size_t zlen = 2 + raw_len + blocks * 5 + 4;         /* header, blocks, Adler-32 */
    if (zlen > 0x7FFFFFF0u) return NULL;                 /* one chunk holds < 2^31 */
    uint8_t *z = malloc(zlen);
    uint8_t *raw = malloc(raw_len);
    if (z == NULL || raw == NULL) {
        free(z);
        free(raw);
        return NULL;
    }
    for (uint32_t y = 0; y < height; y++) {
        raw[y * (row + 1)] = 0;
        memcpy(raw + y * (row + 1) + 1, pixels + y * row, row);
    }

    uint8_t *o = z;
    *o++ = 0x78; /* deflate, 32 KiB window; (0x78 << 8 | 0x01) is a multiple of 31 */
    *o++ = 0x01;
    for (size_t at = 0; at < raw_len;) {
        size_t n = raw_len - at > 65535 ? 65535 : raw_len - at;
        *o++ = at + n == raw_len ? 1 : 0; /* BFINAL on the last block; BTYPE 00: stored */
        *o++ = (uint8_t)n;
        *o++ = (uint8_t)(n >> 8);
        *o++ = (uint8_t)~n;
        *o++ = (uint8_t)(~n >> 8);
        memcpy(o, raw + at, n);
        o += n;
        at += n;
    }
    uint32_t a = 1, b = 0; /* Adler-32 of the uncompressed stream */
    for (size_t i = 0; i < raw_len; i++) {
        a = (a + raw[i]) % 65521;
        b = (b + a) % 65521;
    }
    free(raw);
    put32(o, (b << 16) | a);
    o += 4;
    *zlen_out = (size_t)(o - z);
    return z;
}

static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

static void make_ihdr(uint8_t ihdr[13], uint32_t width, uint32_t height, int channels) {
    put32(ihdr, width);
    put32(ihdr + 4, height);
    ihdr[8] = 8;                          /* bit depth */
    ihdr[9] = channels == 3 ? 2 : 0;      /* colour type: RGB or gray */
    ihdr[10] = ihdr[11] = ihdr[12] = 0;   /* deflate, adaptive filtering, no interlace */
}

int png_write(const char *path, const uint8_t *pixels, uint32_t width, uint32_t height,
              int channels) {
    if ((channels != 1 && channels != 3) || width == 0 || height == 0) return -1;
    crc_init();
    size_t zlen = 0;
    uint8_t *z = zlib_image(pixels, width, height, channels, &zlen);
    if (z == NULL) return -1;
    uint8_t ihdr[13];
    make_ihdr(ihdr, width, height, channels);

    FILE *f = fopen(path, "wb");
    int rc = -1;
    if (f != NULL) {
        rc = fwrite(signature, 1, 8, f) == 8 && write_chunk(f, "IHDR", ihdr, 13) == 0 &&
                     write_chunk(f, "IDAT", z, (uint32_t)zlen) == 0 &&
                     write_chunk(f, "IEND", NULL, 0) == 0
                 ? 0
                 : -1;
        if (fclose(f) != 0) rc = -1;
    }
    free(z);
    return rc;
}

/* APNG (the PNG extension every current browser shows): after IHDR, acTL (frame count, plays:
 * 0 = forever); before each frame's data, fcTL (sequence number, size, offset, delay as a
 * fraction of a second, dispose and blend ops). The first frame's data is an ordinary IDAT (what
 * a viewer without APNG shows); the others are fdAT chunks: a sequence number, then the zlib
 * stream as in IDAT. fcTL and fdAT share one sequence, starting at 0. */
int apng_write(const char *path, const uint8_t *const *frames, uint32_t count, uint32_t width,
               uint32_t height, int channels, uint32_t delay_ms) {
    if ((channels != 1 && channels != 3) || width == 0 || height == 0 || count == 0 ||
        delay_ms > 65535)
        return -1;
    crc_init();
    uint8_t ihdr[13], actl[8];
    make_ihdr(ihdr, width, height, channels);
    put32(actl, count);
    put32(actl + 4, 0);
    FILE *f = fopen(path, "wb");
    if (f == NULL) return -1;
    int ok = fwrite(signature, 1, 8, f) == 8 && write_chunk(f, "IHDR", ihdr, 13) == 0 &&
             write_chunk(f, "acTL", actl, 8) == 0;
    uint32_t sequence = 0;
    for (uint32_t i = 0; ok && i < count; i++) {
        uint8_t fctl[26];
        put32(fctl, sequence++);
        put32(fctl + 4, width);
        put32(fctl + 8, height);
        put32(fctl + 12, 0); /* x offset */
        put32(fctl + 16, 0); /* y offset */
        fctl[20] = (uint8_t)(delay_ms >> 8); /* delay: delay_ms / 1000 s */
        fctl[21] = (uint8_t)delay_ms;
        fctl[22] = 1000 >> 8;
        fctl[23] = 1000 & 0xFF;
        fctl[24] = 0; /* dispose: none (the next frame covers it all) */
        fctl[25] = 0; /* blend: source */
        ok = write_chunk(f, "fcTL", fctl, 26) == 0;
        size_t zlen = 0;
        uint8_t *z = ok ? zlib_image(frames[i], width, height, channels, &zlen) : NULL;
        if (z == NULL) {
            ok = 0;
            break;
        }
        if (i == 0) {
            ok = write_chunk(f, "IDAT", z, (uint32_t)zlen) == 0;
        } else {
            uint8_t *fdat = malloc(zlen + 4);
            ok = fdat != NULL;
            if (ok) {
                put32(fdat, sequence++);
                memcpy(fdat + 4, z, zlen);
                ok = write_chunk(f, "fdAT", fdat, (uint32_t)(zlen + 4)) == 0;
            }
            free(fdat);
        }
        free(z);
    }
    ok = ok && write_chunk(f, "IEND", NULL, 0) == 0;
    if (fclose(f) != 0) ok = 0;
    return ok ? 0 : -1;
}
