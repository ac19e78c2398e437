/* fuzz_config.c - the canonical config text and key=value words (config_parse_canonical).
 * Properties: every refusal is one printable line; an accepted config that plans prints a
 * canonical form that parses back to the same canonical text and hash (parse -> print ->
 * parse), and its plan keeps the plan invariants. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size > 2048) return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    char err[512] = "", again[512], back[512];
    Config c;
    static Plan plan;
    if (config_parse_canonical(text, &c, err, sizeof err)) {
        fuzz_one_line(err);
    } else if (plan_make(&c, &plan, err, sizeof err)) {
        fuzz_one_line(err);
    } else {
        fuzz_plan_invariants(&plan);
        Config d;
        FUZZ_CHECK(config_parse_canonical(plan.canonical, &d, err, sizeof err) == 0, "'%s': %s", plan.canonical, err);
        FUZZ_CHECK(config_fill_defaults(&d, err, sizeof err) == 0, "'%s': %s", plan.canonical, err);
        config_canonical(&d, again, sizeof again);
        FUZZ_CHECK(!strcmp(again, plan.canonical), "'%s' came back as '%s'", plan.canonical, again);
        FUZZ_CHECK(config_hash(&d) == plan.hash, "'%s': hash changed", plan.canonical);
        /* and once more through a full parse of the printed text */
        Config e;
        config_parse_canonical(again, &e, err, sizeof err);
        config_fill_defaults(&e, err, sizeof err);
        config_canonical(&e, back, sizeof back);
        FUZZ_CHECK(!strcmp(back, again), "'%s' then '%s'", again, back);
    }
    free(text);
    return 0;
}
