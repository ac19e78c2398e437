/* sm100/plan.c - the sm_100a target (FlashAttention-4 design). */
#include <stdio.h>

#include "../fa4gen.h"

static void sm100_defaults(Config *c) { (void)c; }

static int sm100_check(const Config *c, char *err, size_t n)
{
    (void)c;
    snprintf(err, n, "target: sm100a is not implemented yet");
    return -1;
}

static int sm100_plan(const Config *c, Plan *p, char *err, size_t n)
{
    (void)c; (void)p;
    snprintf(err, n, "target: sm100a is not implemented yet");
    return -1;
}

static int sm100_emit(Emit *e) { (void)e; return -1; }

const Target target_sm100a = {
    .id = TARGET_SM100A, .name = "sm100a", .ptx_target = "sm_100a", .ptx_version = "8.7",
    .sm_major = 10, .sm_minor = 0, .smem_limit = 232448,
    .defaults = sm100_defaults, .check = sm100_check, .plan = sm100_plan, .emit = sm100_emit,
};
