/* api.c - config -> plan -> PTX: the one entry point the CLI and the runtime use. */
#include <stdio.h>
#include <stdlib.h>

#include "gen_id.h"
#include "kernel.h"
#include "score_mod.h"

const char *fa4gen_build_id(void) { return FA4GEN_VERSION "+" FA4GEN_SOURCE_ID; }

static int generate(const Config *c, ScoreMod *mod, Plan *p, char **ptx, size_t *len, char *err, size_t n)
{
    *ptx = NULL;
    if (plan_make(c, p, err, n)) return -1;
    if (!!c->score_mod != !!mod)
        return snprintf(err, n, c->score_mod ? "mod=%016llx: this call has no score_mod source; give it (fa4gen "
                        "--score-mod FILE, fa4_mha_args.score_mod)" : "a score_mod was given for a config without "
                        "mod=", (unsigned long long)c->score_mod), -1;
    Emit *e = malloc(sizeof *e);
    if (!e) return snprintf(err, n, "out of memory"), -1;
    emit_init(e, p);
    e->mod = mod;
    Buf head = {0};
    int rc = p->target->families[p->cfg.kind]->emit(e); /* plan_make found the family */
    if (!rc) {
        kernel_entry_header(&head, p, mod);
        if (head.oom) emit_fail(e, "out of memory while emitting PTX");
        else *ptx = emit_finish(e, head.p, len);
    }
    if (!*ptx) {
        snprintf(err, n, "%s", e->failed ? e->err : "internal: the emitter failed without a message");
        rc = -1;
    }
    buf_free(&head);
    emit_free(e);
    free(e);
    return rc;
}

int fa4gen_generate(const Config *c, Plan *p, char **ptx, size_t *len, char *err, size_t n)
{
    return generate(c, NULL, p, ptx, len, err, n);
}

int fa4gen_generate_mod(const Config *c, const char *mod_ptx, int link, Plan *p, char **ptx, size_t *len, char *err,
                        size_t n)
{
    *ptx = NULL;
    if (!mod_ptx) return generate(c, NULL, p, ptx, len, err, n);
    if (link < 0 || link >= MOD_LINK_COUNT) return snprintf(err, n, "internal: score_mod link %d", link), -1;
    ScoreMod m;
    if (score_mod_parse(mod_ptx, (ScoreModLink)link, &m, err, n)) return -1;
    int rc = generate(c, &m, p, ptx, len, err, n);
    score_mod_free(&m);
    return rc;
}
