/* fnv1a.h — FNV-1a 64 over bytes: the one definition of the byte hashes ddprun writes or compares
 * (the config hash, tokenizer.bin's vocabulary fingerprint) and of its encoder's table hash. Not
 * for anything an adversary chooses: collisions are easy to make. Must not allocate or fail. */
#ifndef DDP_FNV1A_H
#define DDP_FNV1A_H

#include <stddef.h>
#include <stdint.h>

#define FNV1A64_BASIS 0xcbf29ce484222325ull

/* h (FNV1A64_BASIS to start) folded with the n bytes at p. */
static inline uint64_t fnv1a64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

#endif
