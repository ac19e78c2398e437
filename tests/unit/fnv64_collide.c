/* fnv64_collide.c - finds the FNV-1a 64 collision of fnv_collision.h: two score_mod sources,
 * body A or body B followed by "// " and 16 hex digits and a newline, with one score_mod_hash.
 * Not part of the suite (it runs for a minute or more); kept so the pair can be checked and
 * remade:  cc -O2 -o /tmp/fnv64_collide tests/unit/fnv64_collide.c && /tmp/fnv64_collide
 *
 * Pollard's rho with distinguished points: f(x) is the FNV state after hashing hex(x), starting
 * from body A's state when x is odd and body B's when even. Chains from random starts run until
 * a state with DP_BITS low zero bits; two chains ending at one such point are walked again in
 * step to where they merge, which is a collision of f. About sqrt(pi/2 * 2^64) = 5.4e9
 * evaluations are expected; half the collisions pair the two bodies. The newline after the
 * digits is hashed the same for both, so a collision of f is one of the whole sources. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char body_a[] = "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
                             "{ return 30.0f * tanhf(s / 30.0f); }\n// ";
static const char body_b[] = "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
                             "{ return 0.5f * s; }\n// ";
enum { DP_BITS = 22, MAX_DPS = 1 << 16 };
#define FNV_PRIME 0x100000001b3ull
#define FNV_BASIS 0xcbf29ce484222325ull

static uint64_t state_a, state_b;

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * FNV_PRIME;
    return h;
}

static uint64_t step(uint64_t x)
{
    static const char digits[] = "0123456789abcdef";
    uint64_t h = (x & 1) ? state_a : state_b;
    for (int i = 60; i >= 0; i -= 4) h = (h ^ (unsigned char)digits[(x >> i) & 15]) * FNV_PRIME;
    return h;
}

typedef struct { uint64_t start, end, len; } Chain;

/* Walk chains a and b (same end) to their merge; 1 when it pairs body A with body B. */
static int merge(Chain a, Chain b)
{
    if (a.len < b.len) {
        Chain t = a;
        a = b, b = t;
    }
    uint64_t x = a.start, y = b.start;
    for (uint64_t i = 0; i < a.len - b.len; i++) x = step(x);
    if (x == y) return 0; /* one chain starts on the other */
    while (step(x) != step(y)) x = step(x), y = step(y);
    if ((x & 1) == (y & 1)) return 0; /* two comments after one body */
    char sa[512], sb[512];
    snprintf(sa, sizeof sa, "%s%016llx\n", (x & 1) ? body_a : body_b, (unsigned long long)x);
    snprintf(sb, sizeof sb, "%s%016llx\n", (y & 1) ? body_a : body_b, (unsigned long long)y);
    printf("source 1 ends '// %016llx', source 2 ends '// %016llx': both %016llx / %016llx\n",
           (unsigned long long)x, (unsigned long long)y, (unsigned long long)fnv(FNV_BASIS, sa),
           (unsigned long long)fnv(FNV_BASIS, sb));
    return 1;
}

int main(void)
{
    static Chain chains[MAX_DPS];
    int n = 0;
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL), total = 0;
    const uint64_t mask = (1ull << DP_BITS) - 1, cap = 40ull << DP_BITS;
    state_a = fnv(FNV_BASIS, body_a);
    state_b = fnv(FNV_BASIS, body_b);
    while (n < MAX_DPS) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; /* xorshift64 */
        Chain c = {rng, rng, 0};
        do c.end = step(c.end), c.len++;
        while ((c.end & mask) && c.len < cap);
        total += c.len;
        if (c.end & mask) continue; /* a cycle without a distinguished point */
        for (int i = 0; i < n; i++)
            if (chains[i].end == c.end && merge(chains[i], c)) {
                printf("%.2e evaluations\n", (double)total);
                return 0;
            }
        chains[n++] = c;
    }
    return 1;
}
