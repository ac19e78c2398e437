/* plan100.h - the sm_100a (Blackwell, FlashAttention-4 design) part of the plan.
 * Filled by sm100/plan.c; read by sm100/mha.c. */
#ifndef FA4GEN_PLAN100_H
#define FA4GEN_PLAN100_H
#include <stdint.h>

typedef struct Sm100Plan {
    int mma_m;   /* rows per MMA tile (128, or 256 with cta_group::2) */
    int qtiles;
} Sm100Plan;

#endif
