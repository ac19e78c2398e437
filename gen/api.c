/* api.c - config -> plan -> PTX: the one entry point the CLI and the runtime use. */
#include <stdio.h>
#include <stdlib.h>

#include "kernel.h"

int fa4gen_generate(const Config *c, Plan *p, char **ptx, size_t *len, char *err, size_t n)
{
    *ptx = NULL;
    if (plan_make(c, p, err, n)) return -1;
    Emit *e = malloc(sizeof *e);
    if (!e) return snprintf(err, n, "out of memory"), -1;
    emit_init(e, p);
    Buf head = {0};
    int rc = p->target->families[p->cfg.kind]->emit(e); /* plan_make found the family */
    if (!rc) {
        kernel_entry_header(&head, p);
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
