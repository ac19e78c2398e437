/* ptx.c - the PTX text builder.
 *
 * All kernel text goes through emit() into a growable buffer; registers are
 * declared by name as the body uses them and printed at the top by
 * emit_finish(), so emitters read like the PTX they produce. Errors inside
 * the builder (a name clash, out of memory) are recorded in e->failed and
 * reported once by emit_finish(), never by exit().
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa4gen.h"

static void buf_grow(Buf *b, size_t need)
{
    if (b->oom || b->len + need + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need + 1) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) { b->oom = 1; return; }
    b->p = q;
    b->cap = cap;
}

/* Print straight into the spare capacity; measure and grow only when it does not fit. */
static void buf_vprintf(Buf *b, const char *fmt, va_list ap)
{
    if (b->oom) return;
    va_list ap2;
    va_copy(ap2, ap);
    size_t room = b->cap - b->len;
    int k = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap2);
    va_end(ap2);
    if (k < 0) { b->oom = 1; return; }
    if ((size_t)k >= room) {
        buf_grow(b, (size_t)k);
        if (b->oom) return;
        vsnprintf(b->p + b->len, (size_t)k + 1, fmt, ap);
    }
    b->len += (size_t)k;
}

void buf_printf(Buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void buf_puts(Buf *b, const char *s)
{
    size_t k = strlen(s);
    buf_grow(b, k);
    if (b->oom) return;
    memcpy(b->p + b->len, s, k + 1);
    b->len += k;
}

char *read_whole_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = 0;
            *size = (size_t)n;
        }
    }
    fclose(f);
    return buf;
}

void buf_free(Buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

void emit_init(Emit *e, const Plan *p)
{
    memset(e, 0, sizeof *e);
    e->p = p;
}

void emit_free(Emit *e) { buf_free(&e->body); }

void emit_fail(Emit *e, const char *fmt, ...)
{
    if (e->failed) return; /* keep the first error */
    e->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
}

void emit(Emit *e, const char *fmt, ...)
{
    buf_puts(&e->body, "    ");
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&e->body, fmt, ap);
    va_end(ap);
    buf_puts(&e->body, "\n");
}

/* dst = src / n and dst = src % n, src unsigned 32-bit, n an immediate > 0. ptxas 13.0 does not strength-reduce a
 * PTX div or rem by an immediate: div.u32 by 128 assembles to 14 SASS instructions (I2F, MUFU.RCP, F2I and a
 * correction, cuobjdump on sm_90a and sm_100a alike), so a power of two is spelt as the shift or mask it is. */
void emit_div_imm(Emit *e, const char *dst, const char *src, unsigned n)
{
    if (n && !(n & (n - 1)))
        emit(e, "shr.u32 %s, %s, %d;", dst, src, __builtin_ctz(n));
    else
        emit(e, "div.u32 %s, %s, %u;", dst, src, n);
}

void emit_rem_imm(Emit *e, const char *dst, const char *src, unsigned n)
{
    if (n && !(n & (n - 1)))
        emit(e, "and.b32 %s, %s, %u;", dst, src, n - 1);
    else
        emit(e, "rem.u32 %s, %s, %u;", dst, src, n);
}

void emit_note(Emit *e, const char *fmt, ...)
{
    buf_puts(&e->body, "    // ");
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&e->body, fmt, ap);
    va_end(ap);
    buf_puts(&e->body, "\n");
}

void emit_section(Emit *e, const char *fmt, ...)
{
    buf_puts(&e->body, "\n    // ==== ");
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&e->body, fmt, ap);
    va_end(ap);
    buf_puts(&e->body, " ====\n");
}

void emit_label(Emit *e, const char *label) { buf_printf(&e->body, "%s:\n", label); }

void emit_raw(Emit *e, const char *text) { buf_puts(&e->body, text); }

static unsigned reg_hash(const char *name)
{
    unsigned h = 2166136261u;
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 16777619u;
    return h & (EMIT_REG_HASH - 1);
}

/* Open addressing over e->regs; slots hold index + 1. */
static RegDecl *find_reg(Emit *e, const char *name)
{
    for (unsigned h = reg_hash(name);; h = (h + 1) & (EMIT_REG_HASH - 1)) {
        int i = e->reg_slot[h];
        if (!i) return NULL;
        if (!strcmp(e->regs[i - 1].name, name)) return &e->regs[i - 1];
    }
}

static const struct { RegType t; const char *name; } reg_types[] = {
    {RT_PRED, "pred"}, {RT_B16, "b16"}, {RT_B32, "b32"}, {RT_B64, "b64"}, {RT_F32, "f32"},
    {RT_F64, "f64"}}; /* f64: only a score_mod's own registers (score_mod.c) */

const char *reg_type_text(unsigned t)
{
    for (size_t i = 0; i < sizeof reg_types / sizeof reg_types[0]; i++)
        if (t & reg_types[i].t) return reg_types[i].name;
    return "?";
}

static uint8_t reg_type_of(const char *type)
{
    for (size_t i = 0; i < sizeof reg_types / sizeof reg_types[0]; i++)
        if (!strcmp(type, reg_types[i].name)) return (uint8_t)reg_types[i].t;
    return 0;
}

/* Callers have checked that the name is new. */
static RegDecl *declare(Emit *e, const char *type, const char *name, int count)
{
    if (e->n_regs == EMIT_MAX_REGS || strlen(name) + 1 >= EMIT_REG_NAME || strlen(type) >= sizeof e->regs[0].type) {
        emit_fail(e, "internal: cannot declare register %%%s (table full or name too long)", name);
        return &e->regs[0];
    }
    RegDecl *r = &e->regs[e->n_regs++];
    snprintf(r->type, sizeof r->type, "%s", type);
    r->rt = reg_type_of(type);
    if (!r->rt) emit_fail(e, "internal: register %%%s has the unknown type .%s", name, type);
    snprintf(r->name, sizeof r->name, "%%%s", name); /* kept with its %, so reg() returns it as-is */
    r->count = count;
    unsigned h = reg_hash(r->name);
    while (e->reg_slot[h]) h = (h + 1) & (EMIT_REG_HASH - 1);
    e->reg_slot[h] = (uint16_t)e->n_regs;
    return r;
}

const char *reg(Emit *e, const char *type, const char *name)
{
    char full[EMIT_REG_NAME + 1];
    snprintf(full, sizeof full, "%%%s", name);
    RegDecl *r = find_reg(e, full);
    if (r) {
        if (strcmp(r->type, type) || r->count)
            emit_fail(e, "internal: register %s declared as .%s and again as .%s", full, r->type, type);
        return r->name;
    }
    r = declare(e, type, name, 0);
    return r->name;
}

void reg_array(Emit *e, const char *type, const char *name, int n)
{
    char full[EMIT_REG_NAME + 1];
    snprintf(full, sizeof full, "%%%s", name);
    RegDecl *r = find_reg(e, full);
    if (r) {
        if (strcmp(r->type, type) || r->count != n)
            emit_fail(e, "internal: register array %s redeclared", full);
        return;
    }
    declare(e, type, name, n);
}

static Reg handle(Emit *e, const RegDecl *r)
{
    return (Reg){(uint16_t)(r - e->regs + 1), r->rt, 0, -1};
}

static Reg vreg_new(Emit *e, RegType t, int count, const char *fmt, va_list ap)
{
    char name[EMIT_REG_NAME + 1];
    vsnprintf(name, sizeof name, fmt, ap);
    const char *type = reg_type_text(t);
    if (count) reg_array(e, type, name, count);
    else reg(e, type, name);
    char full[EMIT_REG_NAME + 2];
    snprintf(full, sizeof full, "%%%s", name);
    RegDecl *r = find_reg(e, full);
    return r ? handle(e, r) : REG_NONE; /* not found: declare() failed, and said so */
}

Reg reg_new(Emit *e, RegType t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    Reg r = vreg_new(e, t, 0, fmt, ap);
    va_end(ap);
    return r;
}

Reg reg_find(Emit *e, const char *fmt, ...)
{
    char full[EMIT_REG_NAME + 2] = "%";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(full + 1, sizeof full - 1, fmt, ap);
    va_end(ap);
    RegDecl *r = find_reg(e, full);
    if (!r) {
        emit_fail(e, "internal: register %s is used before it is declared", full);
        return REG_NONE;
    }
    return handle(e, r);
}

Reg reg_arr(Emit *e, RegType t, int n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    Reg r = vreg_new(e, t, n, fmt, ap);
    va_end(ap);
    return r;
}

static const RegDecl *decl_of(Emit *e, Reg r)
{
    if (!r.id || r.id > e->n_regs) {
        emit_fail(e, "internal: no register where one is needed");
        return NULL;
    }
    return &e->regs[r.id - 1];
}

Reg reg_at(Emit *e, Reg arr, int i)
{
    const RegDecl *d = decl_of(e, arr);
    if (!d) return REG_NONE;
    if (!d->count || arr.elem >= 0 || i < 0 || i >= d->count) {
        emit_fail(e, "internal: element %d of %s, which %s", i, d->name,
                  d->count ? "has fewer elements" : "is not an array");
        return REG_NONE;
    }
    arr.elem = i;
    return arr;
}

Reg reg_not(Emit *e, Reg p)
{
    if (reg_want(e, p, RT_PRED, "reg_not", "p")) p.neg ^= 1;
    return p;
}

const char *R(Emit *e, Reg r)
{
    const RegDecl *d = decl_of(e, r);
    if (!d) return "%<none>";
    if (r.elem < 0 && !r.neg) return d->name;
    char *t = e->texts[e->n_texts++ % EMIT_REG_TEXTS], *q = t;
    size_t nl = strlen(d->name); /* < EMIT_REG_NAME, so "!", the name and 6 digits fit */
    if (r.neg) *q++ = '!';
    memcpy(q, d->name, nl);
    q += nl;
    if (r.elem >= 0) snprintf(q, sizeof e->texts[0] - (size_t)(q - t), "%d", r.elem);
    else *q = 0;
    return t;
}

int reg_want(Emit *e, Reg r, unsigned types, const char *fn, const char *param)
{
    const RegDecl *d = r.id && r.id <= e->n_regs ? &e->regs[r.id - 1] : NULL;
    if (!d) {
        emit_fail(e, "internal: %s: no register passed as %s, which wants .%s", fn, param, reg_type_text(types));
        return 0;
    }
    if (r.type & types) return 1;
    char want[48] = "";
    for (unsigned t = 1; t <= RT_F32; t <<= 1)
        if (types & t) {
            size_t k = strlen(want);
            snprintf(want + k, sizeof want - k, "%s.%s", k ? " or " : "", reg_type_text(t));
        }
    emit_fail(e, "internal: %s: register %s passed as %s is .%s, which wants %s", fn, d->name, param,
              reg_type_text(r.type), want);
    return 0;
}

const char *reg_list(Emit *e, char *buf, size_t n, Reg arr, int first, int count)
{
    const RegDecl *d = decl_of(e, arr);
    if (n) buf[0] = 0;
    if (!d) return buf;
    if (!d->count || arr.elem >= 0 || first < 0 || first + count > d->count) {
        emit_fail(e, "internal: elements %d..%d of %s, which %s", first, first + count - 1, d->name,
                  d->count ? "has fewer elements" : "is not an array");
        return buf;
    }
    return reglist(buf, n, d->name + 1, first, count);
}

/* Formats by hand: every wgmma names 32-128 accumulators, and snprintf per
 * register was a third of the generation time. */
const char *reglist(char *buf, size_t n, const char *name, int first, int count)
{
    size_t len = 0, nl = strlen(name);
    if (n) buf[0] = 0;
    for (int i = 0; i < count; i++) {
        char num[12];
        int k = 0;
        for (unsigned v = (unsigned)(first + i); k == 0 || v; v /= 10) num[k++] = (char)('0' + v % 10);
        if (len + nl + (size_t)k + 4 >= n) return buf; /* truncated: the caller's buffer is too small */
        buf[len++] = i ? ',' : '{';
        if (i) buf[len++] = ' ';
        buf[len++] = '%';
        memcpy(buf + len, name, nl);
        len += nl;
        while (k) buf[len++] = num[--k];
    }
    if (len + 2 <= n) buf[len++] = '}', buf[len] = 0;
    return buf;
}

const char *new_label(Emit *e, char *buf, size_t n, const char *stem)
{
    snprintf(buf, n, "$%s_%d", stem, e->labels++);
    return buf;
}

char *emit_finish(Emit *e, const char *entry_header, size_t *len)
{
    if (e->failed) return NULL;
    if (e->body.oom) {
        emit_fail(e, "out of memory while emitting PTX");
        return NULL;
    }
    Buf out = {0};
    buf_puts(&out, entry_header);
    buf_puts(&out, "{\n");
    for (int i = 0; i < e->n_regs; i++) {
        const RegDecl *r = &e->regs[i];
        if (r->count) buf_printf(&out, "    .reg .%s %s<%d>;\n", r->type, r->name, r->count);
        else buf_printf(&out, "    .reg .%s %s;\n", r->type, r->name);
    }
    buf_puts(&out, e->body.p ? e->body.p : "");
    buf_puts(&out, "}\n");
    if (out.oom) {
        buf_free(&out);
        emit_fail(e, "out of memory while emitting PTX");
        return NULL;
    }
    if (len) *len = out.len;
    return out.p;
}
