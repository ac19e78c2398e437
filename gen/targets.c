/* targets.c - the table of targets. Every target is compiled in and chosen at
 * run time by its id (no #ifdefs outside the target folders). */
#include "fa4gen.h"

static const Target *const targets[TARGET_COUNT] = {
    [TARGET_SM90A] = &target_sm90a,
    [TARGET_SM100A] = &target_sm100a,
};

const Target *target_get(TargetId id) { return (unsigned)id < TARGET_COUNT ? targets[id] : NULL; }
