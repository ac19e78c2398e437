/* fuzz_common.h - shared by the libFuzzer harnesses of tests/fuzz/ (make fuzz-ci, make fuzz-long). */
#ifndef FA4_FUZZ_COMMON_H
#define FA4_FUZZ_COMMON_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa4gen.h"

#define FUZZ_CHECK(cond, ...)                                                                                          \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "fuzz: property failed: %s: ", #cond);                                                     \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* An error message is one line of printable ASCII. */
static inline void fuzz_one_line(const char *msg)
{
    for (const unsigned char *c = (const unsigned char *)msg; *c; c++)
        FUZZ_CHECK(*c >= 0x20 && *c < 0x7f, "message byte 0x%02x in '%s'", *c, msg);
}

/* The plan's invariants: smem inside the target's limit, entries aligned, in order and disjoint,
 * window bounds in range. */
static inline void fuzz_plan_invariants(const Plan *p)
{
    const Target *t = target_get(p->cfg.target);
    FUZZ_CHECK(p->smem_launch <= t->smem_limit, "smem %u over %u (%s)", p->smem_launch, t->smem_limit, p->canonical);
    FUZZ_CHECK(p->smem_bytes <= p->smem_launch, "smem %u > launch %u", p->smem_bytes, p->smem_launch);
    uint32_t end = 0;
    for (int i = 0; i < p->n_smem; i++) {
        const SmemEntry *e = &p->smem[i];
        FUZZ_CHECK(e->align && e->offset % e->align == 0, "%s at %u, align %u (%s)", e->name, e->offset, e->align,
                   p->canonical);
        FUZZ_CHECK(e->offset >= end, "%s at %u overlaps the previous entry ending at %u (%s)", e->name, e->offset,
                   end, p->canonical);
        FUZZ_CHECK(e->offset + e->size <= p->smem_bytes, "%s ends past smem_bytes (%s)", e->name, p->canonical);
        end = e->offset + e->size;
    }
    if (p->cfg.mask == MASK_WINDOW)
        FUZZ_CHECK(p->cfg.window_left >= -1 && p->cfg.window_left <= (1 << 30) && p->cfg.window_right >= -1 &&
                       p->cfg.window_right <= (1 << 30),
                   "window %d,%d", p->cfg.window_left, p->cfg.window_right);
}
#endif
