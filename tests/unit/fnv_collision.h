/* fnv_collision.h - two score_mod sources with one FNV-1a 64 (score_mod_hash, the config's
 * mod=): a softcap and a halving, each followed by a comment of 16 hex digits. Found with
 * tests/unit/fnv64_collide.c (Pollard's rho with distinguished points over the comment,
 * 2.3e9 hash evaluations, about a minute on one core): a 64-bit FNV is no identity for code
 * an attacker can choose. */
#ifndef FA4_FNV_COLLISION_H
#define FA4_FNV_COLLISION_H

#define FNV_COLLISION_A                                                                                        \
    "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"                       \
    "{ return 30.0f * tanhf(s / 30.0f); }\n"                                                                   \
    "// c9186c5c07d0cbfb\n"
#define FNV_COLLISION_B                                                                                        \
    "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"                       \
    "{ return 0.5f * s; }\n"                                                                                   \
    "// ce0f1a09f1ef1daa\n"
#define FNV_COLLISION_HASH 0xe084e108d9c96384ull

#endif
