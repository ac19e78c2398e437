/* parse.c - PTX text -> PtxModule (see ptx.h).
 *
 * A cursor over the whole text: directives at module level, then each entry's
 * parameter list, performance directives and body. Statements in a body are
 * register declarations, labels and instructions; branch targets are resolved
 * once the body is read. Every refusal names the line and what was not
 * understood, so a kernel using a form the simulator lacks fails loudly.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx.h"
#include "tc.h"

/* ------------------------------------------------------------ arena */
typedef struct Block { struct Block *next; size_t used, cap; } Block;

static void *arena_alloc(void **arena, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    Block *b = *arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > (1u << 20) ? n : (1u << 20);
        Block *nb = malloc(sizeof(Block) + 16 + cap);
        if (!nb) return NULL;
        nb->next = b, nb->used = 0, nb->cap = cap;
        *arena = b = nb;
    }
    void *p = (char *)(b + 1) + 16 + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

static void arena_free(void *arena)
{
    for (Block *b = arena, *n; b; b = n) n = b->next, free(b);
}

/* ------------------------------------------------------------ parser state */
typedef struct Label { char name[128]; int ins; } Label;
typedef struct Fix { int ins, op; char name[128]; int line; } Fix;

typedef struct P {
    const char *s, *end;
    int line;
    PtxModule *m;
    char *err;
    size_t errlen;
    jmp_buf fail;
    /* the entry being read */
    PtxEntry *e;
    int reg_cap, ins_cap;
    int *hash; /* open addressing over register names: slot + 1, 0 empty */
    int hash_cap;
    Label *labels; int nlabels, label_cap;
    Fix *fixes; int nfixes, fix_cap;
    char dyn_smem[64];
    int tc_group, tc_group_line; /* the .cta_group of the entry's tcgen05 instructions so far (0: none) */
} P;

static void fail(P *p, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fail(P *p, const char *fmt, ...)
{
    va_list ap;
    int k = snprintf(p->err, p->errlen, "line %d: ", p->line);
    va_start(ap, fmt);
    if (k >= 0 && (size_t)k < p->errlen) vsnprintf(p->err + k, p->errlen - k, fmt, ap);
    va_end(ap);
    longjmp(p->fail, 1);
}

static void *alloc(P *p, size_t n)
{
    void *r = arena_alloc(&p->m->arena, n);
    if (!r) fail(p, "out of memory");
    return r;
}

static void grow(P *p, void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *n = realloc(*arr, (size_t)nc * elem);
    if (!n) fail(p, "out of memory");
    memset((char *)n + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = n, *cap = nc;
}

static void skip_ws(P *p)
{
    for (;;) {
        while (p->s < p->end && isspace((unsigned char)*p->s)) {
            if (*p->s == '\n') p->line++;
            p->s++;
        }
        if (p->s + 1 < p->end && p->s[0] == '/' && p->s[1] == '/') {
            while (p->s < p->end && *p->s != '\n') p->s++;
        } else if (p->s + 1 < p->end && p->s[0] == '/' && p->s[1] == '*') {
            p->s += 2;
            while (p->s + 1 < p->end && !(p->s[0] == '*' && p->s[1] == '/')) {
                if (*p->s == '\n') p->line++;
                p->s++;
            }
            p->s += 2;
        } else {
            return;
        }
    }
}

static int peek(P *p)
{
    skip_ws(p);
    return p->s < p->end ? (unsigned char)*p->s : -1;
}

static int accept(P *p, char c)
{
    if (peek(p) == c) { p->s++; return 1; }
    return 0;
}

static void expect(P *p, char c)
{
    if (!accept(p, c)) fail(p, "expected '%c' near '%.20s'", c, p->s);
}

static int word_char(int c) { return isalnum(c) || c == '_' || c == '$' || c == '%' || c == '.' || c == ':'; }

/* A word: identifiers, directives, opcodes with their dotted modifiers. */
static void word(P *p, char *buf, size_t n)
{
    skip_ws(p);
    size_t k = 0;
    while (p->s < p->end && word_char((unsigned char)*p->s)) {
        if (k + 1 >= n) fail(p, "word too long near '%.20s'", p->s);
        buf[k++] = *p->s++;
    }
    buf[k] = 0;
    if (!k) fail(p, "expected a word near '%.20s'", p->s);
}

static long long integer(P *p)
{
    skip_ws(p);
    char *e;
    long long v = strtoll(p->s, &e, 0);
    if (e == p->s) fail(p, "expected a number near '%.20s'", p->s);
    p->s = e;
    return v;
}

/* ------------------------------------------------------------ registers */
static unsigned hash_name(const char *s)
{
    unsigned h = 2166136261u;
    while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

static int reg_find(P *p, const char *name)
{
    if (!p->hash_cap) return -1;
    for (unsigned i = hash_name(name) & (p->hash_cap - 1);; i = (i + 1) & (p->hash_cap - 1)) {
        int v = p->hash[i];
        if (!v) return -1;
        if (!strcmp(p->e->regs[v - 1].name, name)) return v - 1;
    }
}

static void hash_insert(P *p, int slot)
{
    for (unsigned i = hash_name(p->e->regs[slot].name) & (p->hash_cap - 1);; i = (i + 1) & (p->hash_cap - 1))
        if (!p->hash[i]) { p->hash[i] = slot + 1; return; }
}

static void reg_add(P *p, const char *name, int type)
{
    if (strlen(name) >= sizeof p->e->regs[0].name) fail(p, "register name '%s' too long", name);
    if (reg_find(p, name) >= 0) return; /* a nested scope redeclaring: one slot serves both */
    PtxEntry *e = p->e;
    grow(p, (void **)&e->regs, &p->reg_cap, e->nregs + 1, sizeof *e->regs);
    snprintf(e->regs[e->nregs].name, sizeof e->regs[0].name, "%s", name);
    e->regs[e->nregs].type = (uint8_t)type;
    e->nregs++;
    if (e->nregs * 2 > p->hash_cap) {
        int nc = p->hash_cap ? p->hash_cap * 2 : 1024;
        while (e->nregs * 2 > nc) nc *= 2;
        free(p->hash);
        p->hash = calloc((size_t)nc, sizeof *p->hash);
        if (!p->hash) fail(p, "out of memory");
        p->hash_cap = nc;
        for (int i = 0; i < e->nregs; i++) hash_insert(p, i);
    } else {
        hash_insert(p, e->nregs - 1);
    }
}

static const struct { const char *name; PtxType t; } type_names[] = {
    {"pred", T_PRED}, {"b8", T_B8}, {"b16", T_B16}, {"b32", T_B32}, {"b64", T_B64}, {"u8", T_U8},
    {"u16", T_U16}, {"u32", T_U32}, {"u64", T_U64}, {"s8", T_S8}, {"s16", T_S16}, {"s32", T_S32},
    {"s64", T_S64}, {"f16", T_F16}, {"bf16", T_BF16}, {"f32", T_F32}, {"f64", T_F64}, {"f16x2", T_F16X2},
    {"bf16x2", T_BF16X2}, {"e4m3x2", T_E4M3X2}, {"e5m2x2", T_E5M2X2}, {"f32x2", T_F32X2},
};

static int type_of(const char *w)
{
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
        if (!strcmp(w, type_names[i].name)) return type_names[i].t;
    return T_NONE;
}

/* .reg .type name; .reg .type name<N>; .reg .type a, b; */
static void parse_reg_decl(P *p)
{
    char w[64], name[64];
    word(p, w, sizeof w);
    int t = w[0] == '.' ? type_of(w + 1) : T_NONE;
    if (t == T_NONE) fail(p, ".reg with unknown type '%s'", w);
    do {
        word(p, name, sizeof name);
        if (accept(p, '<')) {
            long long n = integer(p);
            expect(p, '>');
            if (n <= 0 || n > 100000) fail(p, "register array %s<%lld> out of range", name, n);
            char full[80];
            for (long long i = 0; i < n; i++) {
                snprintf(full, sizeof full, "%s%lld", name, i);
                reg_add(p, full, t);
            }
        } else {
            reg_add(p, name, t);
        }
    } while (accept(p, ','));
    expect(p, ';');
}

/* ------------------------------------------------------------ operands */
static const struct { const char *name; PtxSpecial sr; } specials[] = {
    {"%tid.x", SR_TID_X}, {"%tid.y", SR_TID_Y}, {"%tid.z", SR_TID_Z}, {"%ntid.x", SR_NTID_X},
    {"%ntid.y", SR_NTID_Y}, {"%ntid.z", SR_NTID_Z}, {"%ctaid.x", SR_CTAID_X}, {"%ctaid.y", SR_CTAID_Y},
    {"%ctaid.z", SR_CTAID_Z}, {"%nctaid.x", SR_NCTAID_X}, {"%nctaid.y", SR_NCTAID_Y},
    {"%nctaid.z", SR_NCTAID_Z}, {"%laneid", SR_LANEID}, {"%warpid", SR_WARPID},
    {"%clusterid.x", SR_CLUSTERID_X}, {"%clusterid.y", SR_CLUSTERID_Y}, {"%clusterid.z", SR_CLUSTERID_Z},
    {"%nclusterid.x", SR_NCLUSTERID_X}, {"%cluster_ctarank", SR_CLUSTER_CTARANK},
    {"%cluster_nctarank", SR_CLUSTER_NCTARANK}, {"%cluster_ctaid.x", SR_CLUSTER_CTAID_X}, {"%smid", SR_SMID},
    {"%clock64", SR_CLOCK64}, {"%globaltimer", SR_GLOBALTIMER},
};

static int param_find(P *p, const char *name)
{
    for (int i = 0; i < p->e->nparams; i++)
        if (!strcmp(p->e->params[i].name, name)) return i;
    return -1;
}

static void parse_operand(P *p, Operand *o, int ins_index, int op_index);

static void parse_vec(P *p, Operand *o, int ins_index)
{
    Operand tmp[160];
    int n = 0;
    if (!accept(p, '}')) {
        do {
            if (n == (int)(sizeof tmp / sizeof tmp[0])) fail(p, "vector operand longer than %d", n);
            parse_operand(p, &tmp[n++], ins_index, -1);
        } while (accept(p, ','));
        expect(p, '}');
    }
    o->kind = O_VEC;
    o->nvec = n;
    o->vec = alloc(p, sizeof(Operand) * (n ? n : 1));
    memcpy(o->vec, tmp, sizeof(Operand) * n);
}

static void parse_number(P *p, Operand *o)
{
    const char *s = p->s;
    int neg = 0;
    if (*s == '-') neg = 1, s++;
    if (s[0] == '0' && (s[1] == 'f' || s[1] == 'F') && isxdigit((unsigned char)s[2])) {
        char *e;
        unsigned long long v = strtoull(s + 2, &e, 16);
        o->kind = O_IMM, o->imm = (int64_t)(uint32_t)v ^ (neg ? 0x80000000u : 0);
        p->s = e;
        return;
    }
    if (s[0] == '0' && (s[1] == 'd' || s[1] == 'D') && isxdigit((unsigned char)s[2])) {
        char *e;
        unsigned long long v = strtoull(s + 2, &e, 16);
        o->kind = O_IMM, o->imm = (int64_t)(v ^ (neg ? 0x8000000000000000ull : 0));
        p->s = e;
        return;
    }
    char *e;
    long long v = strtoll(p->s, &e, 0);
    if (e == p->s) fail(p, "bad number near '%.20s'", p->s);
    if (*e == '.' || *e == 'e' || *e == 'E') fail(p, "decimal float literal near '%.20s' (use 0f)", p->s);
    if (*e == 'U' || *e == 'u') e++;
    o->kind = O_IMM, o->imm = v;
    p->s = e;
}

static void parse_name_operand(P *p, Operand *o, const char *w, int ins_index, int op_index)
{
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        if (!strcmp(w, specials[i].name)) { o->kind = O_SPECIAL, o->reg = specials[i].sr; return; }
    int r = reg_find(p, w);
    if (r >= 0) { o->kind = O_REG, o->reg = r; return; }
    int pi = param_find(p, w);
    if (pi >= 0) { o->kind = O_SYM, o->reg = pi, o->imm = p->e->params[pi].offset; return; }
    if (p->dyn_smem[0] && !strcmp(w, p->dyn_smem)) { o->kind = O_SYM, o->reg = -1; return; }
    if (w[0] == '%') fail(p, "unknown register '%s'", w);
    /* a label: resolved when the body ends */
    grow(p, (void **)&p->fixes, &p->fix_cap, p->nfixes + 1, sizeof *p->fixes);
    Fix *f = &p->fixes[p->nfixes++];
    f->ins = ins_index, f->op = op_index, f->line = p->line;
    snprintf(f->name, sizeof f->name, "%s", w);
    o->kind = O_LABEL, o->reg = -1;
    if (op_index < 0) fail(p, "label '%s' inside a vector", w);
}

static void parse_operand(P *p, Operand *o, int ins_index, int op_index)
{
    memset(o, 0, sizeof *o);
    int c = peek(p);
    if (c == '{') { p->s++; parse_vec(p, o, ins_index); return; }
    if (c == '[') {
        p->s++;
        Operand base;
        parse_operand(p, &base, ins_index, -1);
        o->kind = O_MEM;
        if (accept(p, '+')) {
            Operand off;
            parse_operand(p, &off, ins_index, -1);
            if (off.kind != O_IMM) fail(p, "address offset must be a constant");
            o->imm = off.imm;
        } else if (peek(p) == '-') {
            Operand off;
            parse_operand(p, &off, ins_index, -1);
            o->imm = off.imm;
        }
        if (accept(p, ',')) { /* tensor operand [tmap, {coords}] */
            Operand coords;
            parse_operand(p, &coords, ins_index, -1);
            if (coords.kind != O_VEC) fail(p, "expected {coordinates} in a tensor operand");
            o->nvec = 2;
            o->vec = alloc(p, 2 * sizeof(Operand));
            o->vec[0] = base, o->vec[1] = coords;
        } else {
            o->nvec = 1;
            o->vec = alloc(p, sizeof(Operand));
            o->vec[0] = base;
        }
        expect(p, ']');
        return;
    }
    if (c == '!') { p->s++; parse_operand(p, o, ins_index, op_index); o->neg = 1; return; }
    if (c == '-' || isdigit(c)) { parse_number(p, o); return; }
    char w[96];
    word(p, w, sizeof w);
    if (!strcmp(w, "_")) {
        o->kind = O_SINK;
    } else {
        parse_name_operand(p, o, w, ins_index, op_index);
    }
    if (peek(p) == '|') { /* d|p */
        p->s++;
        Operand second;
        parse_operand(p, &second, ins_index, -1);
        Operand first = *o;
        memset(o, 0, sizeof *o);
        o->kind = O_PAIR, o->nvec = 2;
        o->vec = alloc(p, 2 * sizeof(Operand));
        o->vec[0] = first, o->vec[1] = second;
    }
}

/* ------------------------------------------------------------ opcodes */
typedef struct Toks { char t[16][40]; int n; } Toks;

static void split_opcode(P *p, const char *w, Toks *k)
{
    k->n = 0;
    const char *s = w;
    while (*s) {
        const char *d = strchr(s, '.');
        size_t n = d ? (size_t)(d - s) : strlen(s);
        if (k->n == 16 || n >= sizeof k->t[0]) fail(p, "opcode '%s' not understood", w);
        memcpy(k->t[k->n], s, n);
        k->t[k->n++][n] = 0;
        if (!d) break;
        s = d + 1;
    }
}

static int has(const Toks *k, const char *w)
{
    for (int i = 0; i < k->n; i++)
        if (!strcmp(k->t[i], w)) return 1;
    return 0;
}

static int prefix(const Toks *k, const char *w, const char **rest)
{
    size_t n = strlen(w);
    for (int i = 0; i < k->n; i++)
        if (!strncmp(k->t[i], w, n)) { if (rest) *rest = k->t[i] + n; return 1; }
    return 0;
}

/* The types named in the opcode, in order. */
static int types(const Toks *k, int out[4])
{
    int n = 0;
    for (int i = 1; i < k->n && n < 4; i++) {
        int t = type_of(k->t[i]);
        if (t != T_NONE) out[n++] = t;
    }
    return n;
}

static const struct { const char *w; uint32_t m; } mod_words[] = {
    {"ftz", M_FTZ}, {"approx", M_APPROX}, {"sat", M_SAT}, {"rn", M_RN}, {"rz", M_RZ}, {"rm", M_RM},
    {"rp", M_RP}, {"rni", M_RNI}, {"rzi", M_RZI}, {"rmi", M_RMI}, {"rpi", M_RPI}, {"lo", M_LO}, {"hi", M_HI},
    {"wide", M_WIDE}, {"uni", M_UNI}, {"satfinite", M_SATFINITE}, {"read", M_READ}, {"inc", M_INC},
    {"dec", M_DEC}, {"relu", M_RELU}, {"NaN", M_NAN}, {"relaxed", M_RELAXED}, {"abs", M_ABS},
};

static uint32_t mods_of(const Toks *k)
{
    uint32_t m = 0;
    for (int i = 1; i < k->n; i++)
        for (size_t j = 0; j < sizeof mod_words / sizeof mod_words[0]; j++)
            if (!strcmp(k->t[i], mod_words[j].w)) m |= mod_words[j].m;
    return m;
}

static int space_of(const Toks *k)
{
    if (has(k, "param")) return SP_PARAM;
    if (has(k, "shared::cluster")) return SP_SHARED_CLUSTER;
    if (has(k, "shared") || has(k, "shared::cta")) return SP_SHARED;
    if (has(k, "global")) return SP_GLOBAL;
    if (has(k, "local")) return SP_LOCAL;
    return SP_GENERIC;
}

static const char *cmp_names[] = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu",
                                  "ltu", "leu", "gtu", "geu", "num", "nan"};

static const struct { const char *w; int op; } simple_ops[] = {
    {"mov", OP_MOV}, {"add", OP_ADD}, {"sub", OP_SUB}, {"mul", OP_MUL}, {"mad", OP_MAD}, {"fma", OP_FMA},
    {"div", OP_DIV}, {"rem", OP_REM}, {"min", OP_MIN}, {"max", OP_MAX}, {"neg", OP_NEG}, {"abs", OP_ABS},
    {"not", OP_NOT}, {"and", OP_AND}, {"or", OP_OR}, {"xor", OP_XOR}, {"shl", OP_SHL}, {"shr", OP_SHR},
    {"selp", OP_SELP}, {"cvt", OP_CVT}, {"cvta", OP_CVTA}, {"ex2", OP_EX2}, {"lg2", OP_LG2}, {"rcp", OP_RCP},
    {"sqrt", OP_SQRT}, {"rsqrt", OP_RSQRT}, {"tanh", OP_TANH}, {"bfe", OP_BFE}, {"popc", OP_POPC}, {"clz", OP_CLZ},
    {"prmt", OP_PRMT}, {"lop3", OP_LOP3}, {"bfind", OP_BFIND}, {"brev", OP_BREV}, {"bfi", OP_BFI}, {"shf", OP_SHF},
    {"copysign", OP_COPYSIGN},
    {"ld", OP_LD}, {"st", OP_ST}, {"mapa", OP_MAPA}, {"bra", OP_BRA}, {"ret", OP_RET}, {"exit", OP_EXIT},
    {"elect", OP_ELECT}, {"setmaxnreg", OP_SETMAXNREG},
};

static int tc_shape_of(P *p, const Toks *k)
{
    if (has(k, "32x32b")) return TC_32x32b;
    if (has(k, "16x64b")) return TC_16x64b;
    if (has(k, "16x128b")) return TC_16x128b;
    if (has(k, "16x256b")) return TC_16x256b;
    if (has(k, "16x32bx2")) return TC_16x32bx2;
    fail(p, "tcgen05.ld/st: no shape this simulator knows");
}

static int cta_group_of(const Toks *k)
{
    const char *r;
    return prefix(k, "cta_group::", &r) ? atoi(r) : 1;
}

static void decode_tcgen05(P *p, Ins *in, const Toks *k, const char *w)
{
    const char *op = k->t[1], *r;
    in->b = (int16_t)cta_group_of(k);
    if (prefix(k, "cta_group::", NULL)) { /* as ptxas: one kernel's tcgen05 instructions share one .cta_group */
        if (p->tc_group && p->tc_group != in->b)
            fail(p, "'%s': .cta_group::%d, but line %d used .cta_group::%d (one kernel's tcgen05 instructions must "
                 "all use the same)", w, in->b, p->tc_group_line, p->tc_group);
        p->tc_group = in->b, p->tc_group_line = p->line;
    }
    if (!strcmp(op, "alloc")) in->op = OP_TC_ALLOC;
    else if (!strcmp(op, "dealloc")) in->op = OP_TC_DEALLOC;
    else if (!strcmp(op, "relinquish_alloc_permit")) in->op = OP_TC_RELINQUISH;
    else if (!strcmp(op, "commit")) {
        in->op = OP_TC_COMMIT;
        if (has(k, "multicast::cluster")) in->mods |= M_MULTICAST;
    } else if (!strcmp(op, "mma")) {
        in->op = OP_TC_MMA;
        if (!prefix(k, "kind::", &r)) fail(p, "%s: no .kind", w);
        if (!strcmp(r, "f16")) in->a = TC_KIND_F16;
        else if (!strcmp(r, "tf32")) in->a = TC_KIND_TF32;
        else if (!strcmp(r, "f8f6f4")) in->a = TC_KIND_F8F6F4;
        else fail(p, "%s: kind::%s is not simulated", w, r);
        if (has(k, "sp") || has(k, "ws") || prefix(k, "block_scale", NULL) || prefix(k, "collector", NULL))
            fail(p, "%s: sparse, .ws, block-scaled and collector forms are not simulated", w);
    } else if (!strcmp(op, "ld") || !strcmp(op, "st")) {
        in->op = op[0] == 'l' ? OP_TC_LD : OP_TC_ST;
        in->a = (int16_t)tc_shape_of(p, k);
        if (!prefix(k, "x", &r)) fail(p, "%s: no .num", w);
        for (int i = 1; i < k->n; i++)
            if (k->t[i][0] == 'x' && isdigit((unsigned char)k->t[i][1])) in->b = (int16_t)atoi(k->t[i] + 1);
        if (has(k, "pack::16b") || has(k, "unpack::16b")) in->mods |= M_PACK16;
    } else if (!strcmp(op, "wait::ld")) in->op = OP_TC_WAIT_LD;
    else if (!strcmp(op, "wait::st")) in->op = OP_TC_WAIT_ST;
    else if (!strcmp(op, "fence::before_thread_sync")) in->op = OP_TC_FENCE_BEFORE;
    else if (!strcmp(op, "fence::after_thread_sync")) in->op = OP_TC_FENCE_AFTER;
    else if (!strcmp(op, "cp")) {
        in->op = OP_TC_CP;
        if (has(k, "128x256b")) in->a = TC_CP_128x256b;
        else if (has(k, "4x256b")) in->a = TC_CP_4x256b;
        else if (has(k, "128x128b")) in->a = TC_CP_128x128b;
        else if (has(k, "64x128b")) in->a = TC_CP_64x128b;
        else if (has(k, "32x128b")) in->a = TC_CP_32x128b;
        else fail(p, "%s: shape not simulated", w);
        in->c = has(k, "warpx2::02_13") ? TC_MC_WARPX2_02_13 : has(k, "warpx2::01_23") ? TC_MC_WARPX2_01_23
              : has(k, "warpx4") ? TC_MC_WARPX4 : TC_MC_NONE;
        if (has(k, "b8x16") || prefix(k, "b6x16", NULL) || prefix(k, "b4x16", NULL))
            fail(p, "%s: the decompressing copies (.b8x16 from 6- or 4-bit sources) are not simulated", w);
    } else fail(p, "'%s' is not simulated", w);
}

/* cp.async without .bulk: the Ampere-style copy and its group and mbarrier completions. */
static void decode_cp_async(P *p, Ins *in, const Toks *k, const char *w)
{
    if (k->n < 3) fail(p, "'%s' is not simulated", w);
    const char *op = k->t[2];
    if (!strcmp(op, "commit_group")) in->op = OP_CPA_COMMIT;
    else if (!strcmp(op, "wait_group")) in->op = OP_CPA_WAIT;
    else if (!strcmp(op, "wait_all")) in->op = OP_CPA_WAIT, in->a = 1;
    else if (!strcmp(op, "mbarrier") && k->n > 3 && !strcmp(k->t[3], "arrive")) {
        in->op = OP_CPA_ARRIVE, in->a = (int16_t)has(k, "noinc");
        in->space = SP_SHARED; /* shared::cta only; a generic address is taken as one (cvta.shared is not simulated) */
    } else if (!strcmp(op, "ca") || !strcmp(op, "cg")) {
        /* the destination (shared::cta) comes first, then global; .L2::64B/128B/256B are hints */
        if (k->n < 5 || strncmp(k->t[3], "shared", 6) || !strcmp(k->t[3], "shared::cluster") || strcmp(k->t[4], "global"))
            fail(p, "'%s': only cp.async.{ca,cg}.shared{::cta}.global is simulated", w);
        in->op = OP_CPA, in->a = op[1] == 'g';
        in->b = (int16_t)has(k, "L2::cache_hint");
    } else fail(p, "'%s' is not simulated", w);
}

static void decode_cp(P *p, Ins *in, const Toks *k, const char *w)
{
    if (has(k, "async") && !has(k, "bulk")) { decode_cp_async(p, in, k, w); return; }
    if (!has(k, "async") || !has(k, "bulk")) fail(p, "'%s' is not simulated", w);
    if (has(k, "reduce")) {
        /* cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [dst], [src], size: a bulk store whose
         * bytes are f32 added to global memory, element by element, atomically (PTX ISA, cp.reduce.async.bulk) */
        if (has(k, "tensor") || k->n < 9 || strcmp(k->t[4], "global") || strcmp(k->t[5], "shared::cta") ||
            !has(k, "bulk_group") || !has(k, "add") || in->type != T_F32)
            fail(p, "'%s': of cp.reduce.async.bulk only .global.shared::cta.bulk_group.add.f32 is simulated", w);
        in->op = OP_BULK_STORE;
        in->mods |= M_REDADD;
        return;
    }
    if (has(k, "commit_group")) { in->op = OP_BULK_COMMIT; return; }
    if (has(k, "wait_group")) { in->op = OP_BULK_WAIT; in->mods |= has(k, "read") ? M_READ : 0; return; }
    if (!has(k, "tensor")) { /* a bulk copy: [dst], [src], size[, [mbar]] */
        if (has(k, "prefetch")) fail(p, "'%s': bulk prefetch is not simulated", w);
        if (!strncmp(k->t[3], "shared", 6) && has(k, "global") && has(k, "mbarrier::complete_tx::bytes"))
            in->op = OP_BULK_LOAD;
        else if (!strcmp(k->t[3], "global") && has(k, "bulk_group")) in->op = OP_BULK_STORE;
        else fail(p, "'%s': this bulk copy form is not simulated", w);
        if (has(k, "multicast::cluster")) in->mods |= M_MULTICAST;
        return;
    }
    for (int i = 0; i < k->n; i++)
        if (isdigit((unsigned char)k->t[i][0]) && k->t[i][1] == 'd' && !k->t[i][2]) in->a = (int16_t)(k->t[i][0] - '0');
    if (!in->a) fail(p, "%s: no dimension", w);
    if (has(k, "prefetch")) { /* a hint to L2: only its operands are checked */
        in->op = OP_TMA_PREFETCH;
        if (has(k, "tile::gather4")) in->mods |= M_GATHER4;
        return;
    }
    in->b = (int16_t)cta_group_of(k);
    if (has(k, "tile::gather4")) in->mods |= M_GATHER4;
    if (has(k, "multicast::cluster")) in->mods |= M_MULTICAST;
    if (has(k, "im2col") || has(k, "tile::scatter4") || prefix(k, "im2col", NULL))
        fail(p, "%s: im2col and scatter forms are not simulated", w);
    /* the destination space comes first: shared.. <- global is a load */
    const char *dst = "";
    for (int i = 4; i < k->n && !*dst; i++)
        if (!strncmp(k->t[i], "shared", 6) || !strcmp(k->t[i], "global")) dst = k->t[i];
    if (!strncmp(dst, "shared", 6) && has(k, "global") && has(k, "mbarrier::complete_tx::bytes")) in->op = OP_TMA_LOAD;
    else if (!strcmp(dst, "global") && has(k, "bulk_group")) in->op = OP_TMA_STORE;
    else fail(p, "'%s': this direction/completion form is not simulated", w);
}

static void decode_mbarrier(P *p, Ins *in, const Toks *k, const char *w)
{
    const char *op = k->t[1];
    in->space = has(k, "shared::cluster") ? SP_SHARED_CLUSTER : SP_SHARED;
    if (!strcmp(op, "init")) in->op = OP_MBAR_INIT;
    else if (!strcmp(op, "arrive")) {
        in->op = has(k, "expect_tx") ? OP_MBAR_EXPECT_TX : OP_MBAR_ARRIVE;
    } else if (!strcmp(op, "expect_tx")) {
        in->op = OP_MBAR_EXPECT_TX, in->c = 1; /* no arrival */
    } else if (!strcmp(op, "try_wait") || !strcmp(op, "test_wait")) {
        /* c: test_wait, which never blocks (PTX ISA: a non-blocking test of the phase's completion) */
        in->op = OP_MBAR_TRY_WAIT, in->a = has(k, "parity"), in->c = !strcmp(op, "test_wait");
    } else fail(p, "'%s' is not simulated", w);
    if (has(k, "noComplete")) fail(p, "%s: .noComplete is not simulated", w);
}

/* stmatrix.sync.aligned.m8n8.num{.trans}.ss.b16 [p], r (PTX ISA, warp-level matrix store; sm_90): .num .x1 / .x2 / .x4
 * -> in->b 1 / 2 / 4, .trans -> in->c 1. The ISA also allows no state space (a generic address that must point into
 * shared memory), but generic addresses here reach only global memory and parameters (sim.c generic_ptr), so only
 * .shared and .shared::cta are taken; .m16n8 / .b8 (sm_100) are refused as well. */
static void decode_stmatrix(P *p, Ins *in, const Toks *k, const char *w)
{
    int ss = 0;
    in->op = OP_STMATRIX;
    for (int i = 1; i < k->n; i++) {
        const char *t = k->t[i];
        if (!strcmp(t, "sync") || !strcmp(t, "aligned") || !strcmp(t, "m8n8") || !strcmp(t, "b16")) continue;
        if (!strcmp(t, "x1") || !strcmp(t, "x2") || !strcmp(t, "x4")) {
            if (in->b) fail(p, "'%s': two .num qualifiers", w);
            in->b = (int16_t)(t[1] - '0');
        } else if (!strcmp(t, "trans")) in->c = 1;
        else if (!strcmp(t, "shared") || !strcmp(t, "shared::cta")) ss = 1;
        else if (!strcmp(t, "m16n8") || !strcmp(t, "b8"))
            fail(p, "'%s': of stmatrix only .m8n8 with .b16 is simulated", w);
        else fail(p, "'%s': qualifier .%s of stmatrix is not simulated", w, t);
    }
    if (!has(k, "sync") || !has(k, "aligned") || !has(k, "m8n8") || !has(k, "b16") || !in->b)
        fail(p, "'%s': stmatrix needs .sync.aligned.m8n8, a .num (.x1, .x2, .x4) and .b16", w);
    if (!ss)
        fail(p, "'%s': stmatrix with a generic address is not simulated (generic addresses reach only global memory "
             "here): name .shared or .shared::cta", w);
    in->space = SP_SHARED;
}

/* Operand checks of the forms that take a fixed operand shape, once the operands are read. */
static void check_operands(P *p, const Ins *in)
{
    if (in->op != OP_STMATRIX) return;
    /* [p], {r0 .. r(num-1)}: one 32-bit register per matrix */
    if (in->nops != 2 || in->ops[0].kind != O_MEM || in->ops[0].nvec != 1 || in->ops[1].kind != O_VEC ||
        in->ops[1].nvec != in->b)
        fail(p, "stmatrix .x%d: expected [address], {%d register(s)}", in->b, in->b);
    for (int i = 0; i < in->b; i++) {
        const Operand *r = &in->ops[1].vec[i];
        if (r->kind != O_REG || r->neg) fail(p, "stmatrix: source %d is not a register", i);
        int t = p->e->regs[r->reg].type;
        if (t != T_B32 && t != T_U32 && t != T_S32 && t != T_F32 && t != T_F16X2 && t != T_BF16X2)
            fail(p, "stmatrix: source register %s is not a 32-bit register", p->e->regs[r->reg].name);
    }
}

static void decode(P *p, Ins *in, const char *w)
{
    Toks k;
    split_opcode(p, w, &k);
    const char *b = k.t[0];
    int ty[4], nt = types(&k, ty);
    in->type = nt > 0 ? (uint8_t)ty[0] : T_NONE;
    in->type2 = nt > 1 ? (uint8_t)ty[1] : T_NONE;
    in->mods = mods_of(&k);
    in->vec = 1;
    for (size_t i = 0; i < sizeof simple_ops / sizeof simple_ops[0]; i++)
        if (!strcmp(b, simple_ops[i].w)) in->op = (uint16_t)simple_ops[i].op;
    if (in->op) {
        if (in->op == OP_LD || in->op == OP_ST || in->op == OP_CVTA || in->op == OP_MAPA) {
            in->space = (uint8_t)space_of(&k);
            if (has(&k, "v2")) in->vec = 2;
            if (has(&k, "v4")) in->vec = 4;
            if (has(&k, "v8")) in->vec = 8; /* 256-bit global loads and stores (sm_100) */
            if (in->op == OP_CVTA && has(&k, "to")) fail(p, "'%s': cvta.to is not simulated", w);
        }
        if (in->op == OP_SETMAXNREG && !(in->mods & (M_INC | M_DEC))) fail(p, "%s: .inc or .dec", w);
        if (in->op == OP_PRMT) {
            /* the mode: 0 the default (a selector per byte), else .f4e .b4e .rc8 .ecl .ecr .rc16 */
            static const char *modes[] = {"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"};
            for (int i = 0; i < 6; i++)
                if (has(&k, modes[i])) in->a = (int16_t)(i + 1);
        }
        if (in->op == OP_LOP3 && (has(&k, "or") || has(&k, "and")))
            fail(p, "'%s': lop3 with a predicate result is not simulated", w);
        if (in->op == OP_SHF) in->a = (int16_t)(has(&k, "r") ? 1 : 0), in->c = (int16_t)has(&k, "clamp");
        if (in->op == OP_BFIND) in->c = (int16_t)has(&k, "shiftamt");
        if (has(&k, "xorsign") || has(&k, "oob"))
            fail(p, "'%s': .xorsign and .oob forms are not simulated", w);
        return;
    }
    if (!strcmp(b, "setp")) {
        in->op = OP_SETP;
        int found = 0;
        for (size_t i = 0; i < sizeof cmp_names / sizeof cmp_names[0]; i++)
            if (!strcmp(k.t[1], cmp_names[i])) in->cmp = (uint8_t)i, found = 1;
        if (!found) fail(p, "setp: comparison '%s' not understood", k.t[1]);
        in->bop = has(&k, "and") ? 1 : has(&k, "or") ? 2 : has(&k, "xor") ? 3 : 0;
    } else if (!strcmp(b, "shfl")) {
        in->op = OP_SHFL;
        in->a = has(&k, "bfly") ? 0 : has(&k, "up") ? 1 : has(&k, "down") ? 2 : has(&k, "idx") ? 3 : -1;
        if (in->a < 0 || !has(&k, "sync")) fail(p, "'%s' not understood", w);
    } else if (!strcmp(b, "nanosleep")) {
        in->op = OP_NANOSLEEP;
    } else if (!strcmp(b, "red")) {
        /* red{.release.gpu}.global.add{.v2,.v4}.f32 / .add.u32 [a], b: a global store that adds, element by element
         * (PTX ISA, red; the interpreter runs one thread at a time, so each element's add is atomic; global memory
         * has no clocks here, so .release orders nothing the simulator checks) */
        if (!has(&k, "global") || !has(&k, "add") || (in->type != T_F32 && in->type != T_U32) || has(&k, "shared") ||
            has(&k, "cta") || has(&k, "cluster") || (in->type == T_U32 && (has(&k, "v2") || has(&k, "v4"))))
            fail(p, "'%s': of red only .global.add{.v2,.v4}.f32 and .global.add.u32 are simulated", w);
        in->op = OP_ST, in->space = SP_GLOBAL, in->mods |= M_REDADD;
        in->vec = has(&k, "v4") ? 4 : has(&k, "v2") ? 2 : 1;
    } else if (!strcmp(b, "atom")) {
        /* atom{.sem}{.scope}.global.add.u32 d, [a], b: d = the old value, and b added to it in memory, at one
         * point (PTX ISA, atom; the interpreter runs one thread at a time, so nothing falls between the two) */
        if (!has(&k, "global") || !has(&k, "add") || in->type != T_U32 || has(&k, "v2") || has(&k, "v4"))
            fail(p, "'%s': of atom only .global.add.u32 is simulated", w);
        in->op = OP_LD, in->space = SP_GLOBAL, in->mods |= M_REDADD;
    } else if (!strcmp(b, "redux")) {
        /* redux.sync.op{.abs}{.NaN}.type d, a, membermask */
        static const char *rops[] = {"add", "min", "max", "and", "or", "xor"};
        in->op = OP_REDUX, in->a = -1;
        for (int i = 0; i < 6; i++)
            if (has(&k, rops[i])) in->a = (int16_t)i;
        if (in->a < 0 || !has(&k, "sync")) fail(p, "'%s' not understood", w);
    } else if (!strcmp(b, "vote")) {
        in->op = OP_VOTE;
        in->a = has(&k, "any") ? 0 : has(&k, "all") ? 1 : has(&k, "uni") ? 2 : has(&k, "ballot") ? 3 : -1;
        if (in->a < 0 || !has(&k, "sync")) fail(p, "'%s' not understood", w);
    } else if (!strcmp(b, "bar") || !strcmp(b, "barrier")) {
        if (has(&k, "cluster")) {
            in->op = has(&k, "arrive") ? OP_CLUSTER_ARRIVE : has(&k, "wait") ? OP_CLUSTER_WAIT : 0;
        } else if (has(&k, "warp")) in->op = OP_BAR_WARP;
        else if (has(&k, "sync") || has(&k, "red")) in->op = has(&k, "red") ? 0 : OP_BAR_SYNC;
        else if (has(&k, "arrive")) in->op = OP_BAR_ARRIVE;
        if (!in->op) fail(p, "'%s' is not simulated", w);
    } else if (!strcmp(b, "fence")) {
        if (has(&k, "proxy") && has(&k, "async")) in->op = OP_FENCE_PROXY_ASYNC;
        else if (has(&k, "mbarrier_init")) in->op = OP_FENCE_MBAR_INIT;
        else if (has(&k, "proxy")) fail(p, "'%s' is not simulated", w);
        else in->op = OP_FENCE;
    } else if (!strcmp(b, "griddepcontrol")) {
        if (!has(&k, "launch_dependents") && !has(&k, "wait")) fail(p, "'%s' not understood", w);
        in->op = has(&k, "wait") ? OP_GRIDDEP_WAIT : OP_GRIDDEP;
    } else if (!strcmp(b, "stmatrix")) {
        decode_stmatrix(p, in, &k, w);
    } else if (!strcmp(b, "mbarrier")) {
        decode_mbarrier(p, in, &k, w);
    } else if (!strcmp(b, "cp")) {
        decode_cp(p, in, &k, w);
    } else if (!strcmp(b, "tcgen05")) {
        decode_tcgen05(p, in, &k, w);
    } else if (!strcmp(b, "wgmma")) {
        const char *op = k.t[1];
        if (!strcmp(op, "fence")) in->op = OP_WG_FENCE;
        else if (!strcmp(op, "commit_group")) in->op = OP_WG_COMMIT;
        else if (!strcmp(op, "wait_group")) in->op = OP_WG_WAIT;
        else if (!strcmp(op, "mma_async")) {
            in->op = OP_WG_MMA;
            int m = 0, n = 0, kk = 0, found = 0;
            for (int i = 2; i < k.n && !found; i++) found = sscanf(k.t[i], "m%dn%dk%d", &m, &n, &kk) == 3;
            if (!found) fail(p, "%s: shape not understood", w);
            in->a = (int16_t)m, in->b = (int16_t)n, in->c = (int16_t)kk;
            /* dtype atype btype: the last three tokens */
            if (k.n < 7) fail(p, "%s: types not understood", w);
            static const struct { const char *n; int t; } wt[] = {
                {"f32", TC_F32}, {"f16", TC_F16}, {"bf16", TC_BF16}, {"tf32", TC_TF32}, {"e4m3", TC_E4M3},
                {"e5m2", TC_E5M2}};
            int got[3] = {-1, -1, -1};
            for (int j = 0; j < 3; j++)
                for (size_t i = 0; i < sizeof wt / sizeof wt[0]; i++)
                    if (!strcmp(k.t[k.n - 3 + j], wt[i].n)) got[j] = wt[i].t;
            if (got[0] < 0 || got[1] < 0 || got[2] < 0) fail(p, "%s: types not understood", w);
            in->type = (uint8_t)got[0], in->type2 = (uint8_t)got[1], in->d = (int16_t)got[2];
            if (has(&k, "sp") || has(&k, "satfinite")) fail(p, "%s: this form is not simulated", w);
        } else fail(p, "'%s' is not simulated", w);
    } else {
        fail(p, "instruction '%s' is not simulated", w);
    }
}

/* ------------------------------------------------------------ statements */
static void add_label(P *p, const char *name)
{
    grow(p, (void **)&p->labels, &p->label_cap, p->nlabels + 1, sizeof *p->labels);
    Label *l = &p->labels[p->nlabels++];
    snprintf(l->name, sizeof l->name, "%s", name);
    l->ins = p->e->nins;
}

static void parse_instruction(P *p, const char *first)
{
    PtxEntry *e = p->e;
    grow(p, (void **)&e->ins, &p->ins_cap, e->nins + 1, sizeof *e->ins);
    int idx = e->nins;
    Ins *in = &e->ins[idx];
    memset(in, 0, sizeof *in);
    in->line = p->line;
    in->guard = -1;
    char w[128];
    snprintf(w, sizeof w, "%s", first);
    if (w[0] == '@') {
        const char *g = w + 1;
        if (*g == '!') in->guard_neg = 1, g++;
        int r = reg_find(p, g);
        if (r < 0 || e->regs[r].type != T_PRED) fail(p, "guard '%s' is not a predicate register", g);
        in->guard = r;
        word(p, w, sizeof w);
    }
    decode(p, in, w);
    Operand ops[16];
    int n = 0;
    if (peek(p) != ';') {
        do {
            if (n == 16) fail(p, "too many operands");
            parse_operand(p, &ops[n], idx, n);
            n++;
        } while (accept(p, ','));
    }
    expect(p, ';');
    in = &e->ins[idx]; /* parse_operand may not grow ins, but stay safe */
    in->nops = (uint8_t)n;
    in->ops = alloc(p, sizeof(Operand) * (n ? n : 1));
    memcpy(in->ops, ops, sizeof(Operand) * n);
    check_operands(p, in);
    e->nins++;
}

static void parse_body(P *p)
{
    int depth = 1;
    char w[128];
    while (depth > 0) {
        int c = peek(p);
        if (c < 0) fail(p, "end of file inside an entry body");
        if (c == '{') { p->s++; depth++; continue; }
        if (c == '}') { p->s++; depth--; continue; }
        if (c == '@') {
            p->s++;
            char g[100];
            int neg = accept(p, '!');
            word(p, g, sizeof g);
            snprintf(w, sizeof w, "@%s%s", neg ? "!" : "", g);
            parse_instruction(p, w);
            continue;
        }
        word(p, w, sizeof w);
        if (!strcmp(w, ".reg")) { parse_reg_decl(p); continue; }
        if (!strcmp(w, ".pragma")) { while (p->s < p->end && *p->s != ';') p->s++; expect(p, ';'); continue; }
        if (w[0] == '.') fail(p, "directive '%s' inside a body is not simulated", w);
        if (peek(p) == ':' ) {
            p->s++;
            add_label(p, w);
            continue;
        }
        size_t L = strlen(w);
        if (L > 1 && w[L - 1] == ':') { w[L - 1] = 0; add_label(p, w); continue; }
        parse_instruction(p, w);
    }
    for (int i = 0; i < p->nfixes; i++) {
        Fix *f = &p->fixes[i];
        int target = -1;
        for (int j = 0; j < p->nlabels; j++)
            if (!strcmp(p->labels[j].name, f->name)) target = p->labels[j].ins;
        if (target < 0) { p->line = f->line; fail(p, "unknown name '%s'", f->name); }
        p->e->ins[f->ins].ops[f->op].reg = target;
    }
}

static uint32_t type_size(int t)
{
    switch (t) {
    case T_B8: case T_U8: case T_S8: return 1;
    case T_B16: case T_U16: case T_S16: case T_F16: case T_BF16: return 2;
    case T_B64: case T_U64: case T_S64: case T_F64: return 8;
    default: return 4;
    }
}

/* .param .u32 name | .param .align A .b8 name[N] */
static void parse_param(P *p, PtxEntry *e, int *cap)
{
    char w[64], name[64];
    word(p, w, sizeof w);
    if (strcmp(w, ".param")) fail(p, "expected .param, got '%s'", w);
    uint32_t align = 0, size;
    word(p, w, sizeof w);
    if (!strcmp(w, ".align")) { align = (uint32_t)integer(p); word(p, w, sizeof w); }
    int t = w[0] == '.' ? type_of(w + 1) : T_NONE;
    if (t == T_NONE) fail(p, "parameter type '%s' not understood", w);
    word(p, name, sizeof name);
    size = type_size(t);
    if (accept(p, '[')) { size *= (uint32_t)integer(p); expect(p, ']'); }
    if (!align) align = type_size(t);
    grow(p, (void **)&e->params, cap, e->nparams + 1, sizeof *e->params);
    PtxParam *q = &e->params[e->nparams++];
    snprintf(q->name, sizeof q->name, "%s", name);
    q->align = align, q->size = size;
    q->offset = (e->param_bytes + align - 1) / align * align;
    e->param_bytes = q->offset + size;
}

static void parse_entry(P *p)
{
    PtxModule *m = p->m;
    PtxEntry *ne = realloc(m->entries, sizeof *ne * (size_t)(m->nentries + 1));
    if (!ne) fail(p, "out of memory");
    m->entries = ne;
    PtxEntry *e = p->e = &m->entries[m->nentries++];
    memset(e, 0, sizeof *e);
    p->reg_cap = p->ins_cap = 0;
    p->nlabels = p->nfixes = 0;
    p->tc_group = p->tc_group_line = 0;
    free(p->hash);
    p->hash = NULL, p->hash_cap = 0;
    word(p, e->name, sizeof e->name);
    int pcap = 0;
    expect(p, '(');
    if (!accept(p, ')')) {
        do parse_param(p, e, &pcap); while (accept(p, ','));
        expect(p, ')');
    }
    char w[64];
    while (peek(p) == '.') {
        word(p, w, sizeof w);
        int *dst = !strcmp(w, ".reqntid") || !strcmp(w, ".maxntid") ? e->reqntid
                 : !strcmp(w, ".reqnctapercluster") || !strcmp(w, ".explicitcluster") ? e->cluster : NULL;
        if (!strcmp(w, ".explicitcluster")) continue;
        int vals[3] = {1, 1, 1}, n = 0;
        do vals[n++] = (int)integer(p); while (n < 3 && accept(p, ','));
        if (dst) memcpy(dst, vals, sizeof vals);
        else if (!strcmp(w, ".minnctapersm")) e->minctas = vals[0];
        else if (!strcmp(w, ".maxnreg")) e->maxnreg = vals[0];
        else if (strcmp(w, ".maxnctapersm"))
            fail(p, "entry directive '%s' is not simulated", w);
    }
    expect(p, '{');
    parse_body(p);
}

static void parse_module(P *p)
{
    char w[128];
    while (peek(p) >= 0) {
        word(p, w, sizeof w);
        if (!strcmp(w, ".version")) {
            p->m->version_major = (int)integer(p);
            if (*p->s == '.') { p->s++; p->m->version_minor = (int)integer(p); }
        } else if (!strcmp(w, ".target")) {
            word(p, p->m->target, sizeof p->m->target);
            while (accept(p, ',')) word(p, w, sizeof w);
        } else if (!strcmp(w, ".address_size")) {
            if (integer(p) != 64) fail(p, "only .address_size 64 is simulated");
        } else if (!strcmp(w, ".extern")) {
            word(p, w, sizeof w);
            if (strcmp(w, ".shared")) fail(p, ".extern %s is not simulated", w);
            word(p, w, sizeof w);
            if (!strcmp(w, ".align")) { integer(p); word(p, w, sizeof w); }
            word(p, p->dyn_smem, sizeof p->dyn_smem);
            expect(p, '[');
            expect(p, ']');
            expect(p, ';');
        } else if (!strcmp(w, ".visible") || !strcmp(w, ".entry")) {
            if (strcmp(w, ".entry")) { word(p, w, sizeof w); if (strcmp(w, ".entry")) fail(p, "only .entry functions are simulated"); }
            parse_entry(p);
        } else {
            fail(p, "module directive '%s' is not simulated", w);
        }
    }
}

static void split_lines(P *p, const char *text, size_t len)
{
    PtxModule *m = p->m;
    int n = 1;
    for (size_t i = 0; i < len; i++) n += text[i] == '\n';
    m->lines = alloc(p, sizeof(char *) * (size_t)n);
    const char *s = text, *end = text + len;
    while (s < end && m->nlines < n) {
        const char *e = memchr(s, '\n', (size_t)(end - s));
        if (!e) e = end;
        while (s < e && isspace((unsigned char)*s)) s++;
        size_t k = (size_t)(e - s);
        char *l = alloc(p, k + 1);
        memcpy(l, s, k);
        m->lines[m->nlines++] = l;
        s = e + 1;
    }
}

PtxModule *ptx_parse(const char *text, size_t len, char *err, size_t errlen)
{
    P p;
    memset(&p, 0, sizeof p);
    p.s = text, p.end = text + len, p.line = 1, p.err = err, p.errlen = errlen;
    p.m = calloc(1, sizeof *p.m);
    if (!p.m) { snprintf(err, errlen, "out of memory"); return NULL; }
    if (setjmp(p.fail)) {
        free(p.hash), free(p.labels), free(p.fixes);
        ptx_free(p.m);
        return NULL;
    }
    split_lines(&p, text, len);
    parse_module(&p);
    if (!p.m->nentries) { p.line = 1; fail(&p, "no .entry in the module"); }
    free(p.hash), free(p.labels), free(p.fixes);
    return p.m;
}

void ptx_free(PtxModule *m)
{
    if (!m) return;
    for (int i = 0; i < m->nentries; i++) {
        free(m->entries[i].params);
        free(m->entries[i].regs);
        free(m->entries[i].ins);
    }
    free(m->entries);
    arena_free(m->arena);
    free(m);
}

const PtxEntry *ptx_find_entry(const PtxModule *m, const char *name)
{
    for (int i = 0; i < m->nentries; i++)
        if (!strcmp(m->entries[i].name, name)) return &m->entries[i];
    return NULL;
}

const char *ptx_line(const PtxModule *m, int n)
{
    return n >= 1 && n <= m->nlines ? m->lines[n - 1] : "";
}

const char *ptx_op_name(int op)
{
    static const char *names[OP_COUNT] = {
        [OP_MOV] = "mov", [OP_ADD] = "add", [OP_LD] = "ld", [OP_ST] = "st", [OP_TC_MMA] = "tcgen05.mma",
        [OP_TC_LD] = "tcgen05.ld", [OP_TC_ST] = "tcgen05.st", [OP_TMA_LOAD] = "cp.async.bulk.tensor (load)",
        [OP_TMA_STORE] = "cp.async.bulk.tensor (store)", [OP_WG_MMA] = "wgmma.mma_async",
        [OP_MBAR_TRY_WAIT] = "mbarrier.try_wait", [OP_BAR_SYNC] = "bar.sync",
        [OP_CPA] = "cp.async", [OP_CPA_COMMIT] = "cp.async.commit_group", [OP_CPA_WAIT] = "cp.async.wait_group", [OP_NANOSLEEP] = "nanosleep",
        [OP_CPA_ARRIVE] = "cp.async.mbarrier.arrive", [OP_STMATRIX] = "stmatrix",
    };
    return op > 0 && op < OP_COUNT && names[op] ? names[op] : "instruction";
}
