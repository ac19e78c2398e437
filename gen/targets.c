/* targets.c - the table of targets. Every target is compiled in and chosen at
 * run time by its id (no #ifdefs outside the target folders). */
#include <stdio.h>
#include <string.h>

#include "fa4gen.h"

static const Target *const targets[TARGET_COUNT] = {
    [TARGET_SM90A] = &target_sm90a,
    [TARGET_SM100A] = &target_sm100a,
    [TARGET_SM103A] = &target_sm103a,
};

const Target *target_get(TargetId id) { return (unsigned)id < TARGET_COUNT ? targets[id] : NULL; }

const Family *target_family(const Target *t, Kind k, char *err, size_t n)
{
    if ((unsigned)k < KIND_COUNT && t->families[k]) return t->families[k];
    char have[64] = "";
    for (int i = 0; i < KIND_COUNT; i++)
        if (t->families[i])
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", have[0] ? ", " : "", kind_name[i]);
    snprintf(err, n, "kind: %s has no kernel for target %s yet; %s has: %s",
             (unsigned)k < KIND_COUNT ? kind_name[k] : "(unknown)", t->name, t->name, have);
    return NULL;
}
