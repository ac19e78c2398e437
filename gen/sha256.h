/* sha256.h - SHA-256 (FIPS 180-4), for what must not collide: the disk cache's
 * entry checksum and the identity of a user's score_mod source. A streaming
 * context (init, update, final), a one-shot call and lowercase hex. */
#ifndef FA4GEN_SHA256_H
#define FA4GEN_SHA256_H

#include <stddef.h>
#include <stdint.h>

enum { SHA256_BYTES = 32, SHA256_HEX = 2 * SHA256_BYTES + 1 };

typedef struct Sha256 {
    uint32_t h[8];          /* the running hash value H(i) */
    uint64_t bytes;         /* message length so far */
    unsigned char block[64];
    size_t used;            /* bytes waiting in block */
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
/* Pads, writes the digest and leaves s unusable until the next sha256_init. */
void sha256_final(Sha256 *s, unsigned char out[SHA256_BYTES]);
void sha256(const void *data, size_t n, unsigned char out[SHA256_BYTES]);
/* 64 lowercase hex digits and a NUL. */
void sha256_hex(const unsigned char digest[SHA256_BYTES], char out[SHA256_HEX]);

#endif
