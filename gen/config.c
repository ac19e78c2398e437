/* config.c - what a user chooses, its one canonical text form and its hash.
 *
 * Guarantees: config_canonical() prints every field the target uses in a
 * fixed key order, and config_parse_canonical() reads that text back to an
 * equal Config, so the text (and its hash) names a kernel across runs and
 * machines. Every rejection is one sentence naming the field, the value and
 * what is allowed; a value is echoed escaped (control and non-ASCII bytes as
 * \xNN, at most 64 bytes), so a message is always one line.
 *
 * Values are exact words: a number is decimal digits with an optional leading
 * '-' (no spaces, no '+'), range-checked before it is narrowed, and a window
 * mask is window:L,R with no spaces, L and R in -1..FA4_WINDOW_MAX (a bound
 * past that is wider than any sequence the kernels index in 32 bits; -1 is
 * unbounded), so every derived bound the emitters compute fits an int.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa4gen.h"


const char *const kind_name[KIND_COUNT] = {"mha", "mla-sparse", "combine", "mha-bwd", "mha-bwd-pre", "mha-bwd-dq",
                                           "kv-append"};
const char *const target_name[TARGET_COUNT] = {"sm90a", "sm100a", "sm103a"};
const char *const dtype_name[DT_COUNT] = {"bf16", "fp16", "e4m3"};
const int dtype_bytes[DT_COUNT] = {2, 2, 1};
static const char *const mask_name[MASK_COUNT] = {"none", "causal", "window"};

static int fail(char *err, size_t n, const char *fmt, ...) FA4_PRINTF(3, 4);
static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && n) vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* A decimal int as the canonical form prints it: optional '-', then digits with no leading zero
 * (strtol alone would take leading spaces, a '+', "-0" and "007"). Out of int range is an error,
 * not a wrap. */
int parse_int(const char *s, int *out)
{
    if (!s) return -1;
    const char *d = s + (*s == '-');
    if (!(*d >= '0' && *d <= '9') || (d[0] == '0' && (d[1] || d != s))) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < INT_MIN || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

/* The value as a message may echo it: one line, printable, bounded. */
static const char *esc(const char *s, char *buf, size_t n)
{
    size_t o = 0, i = 0;
    for (; s[i] && o + 8 < n && i < 64; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') buf[o++] = (char)ch;
        else o += (size_t)snprintf(buf + o, n - o, "\\x%02x", ch);
    }
    if (s[i]) o += (size_t)snprintf(buf + o, n - o, "...");
    buf[o] = 0;
    return buf;
}
#define ESC(s) esc((s), (char[300]){0}, 300)

static int lookup(const char *const *names, int count, const char *s)
{
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

void config_init(Config *c)
{
    memset(c, 0, sizeof *c);
    c->kind = KIND_MHA;
    c->target = TARGET_SM90A;
    c->dtype = DT_BF16;
    c->rope_dtype = DT_BF16;
    c->mask = MASK_NONE;
    c->rescale = -1;   /* 0 is a meaningful value for these two: -1 means unset */
    c->exp2_poly = -1;
    c->pingpong = -1;
    c->persistent = -1;
    c->q_tmem_depth = -1;
    c->tma_store = -1;
    c->prefetch = -1;
    c->head_major = -1;
    c->diag_half = -1;
    c->dynamic = -1;
}

/* Early, paged: the sequence's length and table are read before the wait, kv_early's promise covers
 * them; prefetch, paged: read there only to aim the hints, then again after the wait. Not varlen (its
 * cu_seqlens), a cluster split or the CTA pair (they synchronise CTAs). */
int config_split_pdl(const Config *c)
{
    return c->kind == KIND_MHA && c->split && !c->cluster_split && !c->varlen && c->cta_pair != 2;
}

/* prefetch on the dense, unsplit sm90a forward: its CTAs' first tile's Q and first K/V blocks go into L2 before
 * the wait, under the previous kernel's tail. Not varlen or paged: their lengths and tables are global memory the
 * previous grid may write, and a prefetch aimed by them would need them read twice. */
int config_dense_prefetch(const Config *c)
{
    return c->kind == KIND_MHA && c->target == TARGET_SM90A && !c->split && !c->varlen && !c->page;
}

/* prefetch unset: the K/V blocks a split kernel prefetches into L2 before its wait. H100, 8 decode
 * calls a graph (bench/NOTES.md "Decode, fourth pass"): 2 blocks +5% at batch 1 seqlen_k 16k over none
 * (paged +3.6%), 4 less, 8 -7% (the prefetches crowd the previous kernel's tail). Under early=1 none:
 * the early loads already fill the tail, and prefetches beside them cost 1-8%. 0 where the kernel cannot. */
enum { PREFETCH_BLOCKS = 2 };
/* The dense sm90a forward: its CTAs' first tile's Q and one K/V block, prefetched only while the previous grid runs
 * (plan pdl watch). H200, short shapes under CUDA graphs, each call a programmatic dependent of the one before
 * (bench/NOTES.md "The first tile under the previous grid's tail", runs 82-85): 1 block +1.9..+2.0% geomean over
 * none (run 84: 31 of 32 shapes >= 1.05x cuDNN against 28), 2 blocks +1.8%; after a kernel that lets nothing launch
 * early -0.3% (the watch skips the prefetch); long shapes 0..+0.5%. */
enum { DENSE_PREFETCH_BLOCKS = 1 };

static void default_prefetch(Config *c)
{
    if (c->prefetch >= 0) return;
    c->prefetch = config_split_pdl(c) && !c->early ? PREFETCH_BLOCKS : config_dense_prefetch(c) ? DENSE_PREFETCH_BLOCKS
                                                                                                 : 0;
}

static int parse_mask(Config *c, const char *v, char *err, size_t n)
{
    int m = lookup(mask_name, MASK_COUNT, v);
    if (m == MASK_NONE || m == MASK_CAUSAL) {
        c->mask = (MaskKind)m;
        c->window_left = c->window_right = 0;
        return 0;
    }
    int l, r;
    const char *comma = strncmp(v, "window:", 7) ? NULL : strchr(v + 7, ',');
    if (comma && (size_t)(comma - (v + 7)) < 16) {
        char left[16];
        memcpy(left, v + 7, (size_t)(comma - (v + 7)));
        left[comma - (v + 7)] = 0;
        if (!parse_int(left, &l) && !parse_int(comma + 1, &r) && l >= -1 && r >= -1 && l <= FA4_WINDOW_MAX &&
            r <= FA4_WINDOW_MAX) {
            c->mask = MASK_WINDOW;
            c->window_left = l;
            c->window_right = r;
            return 0;
        }
    }
    return fail(err, n, "mask: '%s' is not allowed; use none, causal or window:L,R (no spaces; L, R in 0..%d, or -1 "
                        "for unbounded)", ESC(v), FA4_WINDOW_MAX);
}

/* mod=<16 hex digits>: the source hash of a score_mod (score_mod_hash), or none. */
static int parse_mod(Config *c, const char *v, char *err, size_t n)
{
    if (!strcmp(v, "none")) {
        c->score_mod = 0;
        return 0;
    }
    uint64_t h = 0;
    size_t i = 0;
    for (; i < 16 && v[i]; i++) {
        int d = v[i] >= '0' && v[i] <= '9' ? v[i] - '0' : v[i] >= 'a' && v[i] <= 'f' ? v[i] - 'a' + 10 : -1;
        if (d < 0) break;
        h = h << 4 | (uint64_t)d;
    }
    if (i != 16 || v[i] || !h)
        return fail(err, n, "mod: '%s' is not allowed; use the 16 lower-case hex digits of a score_mod's source hash "
                            "(fa4gen explain --score-mod FILE prints it), or none", ESC(v));
    c->score_mod = h;
    return 0;
}

/* Integer keys, in canonical order. Each names its Config field by offset. */
typedef struct { const char *key; size_t off; int min, max; const char *allowed; } IntKey;
#define F(f) offsetof(Config, f)
static const IntKey int_keys[] = {
    {"qk", F(qk_depth), 16, 1024, "a multiple of 16 up to 1024"},
    {"ov", F(ov_depth), 16, 1024, "a multiple of 16 up to 1024"},
    {"bm", F(bm), 16, 512, "16..512"},
    {"bn", F(bn), 16, 256, "16..256"},
    {"group", F(group), 1, 256, "1..256 query heads per KV head"},
    {"stages", F(stages), 1, 16, "1..16"},
    {"swizzle", F(swizzle), 32, 128, "32, 64 or 128"},
    {"qtiles", F(qtiles), 1, 2, "1 or 2"},
    {"cta", F(cta_pair), 1, 2, "1 or 2"},
    {"rescale", F(rescale), 0, 64, "0..64 (log2 units; 0 = always rescale)"},
    {"poly", F(exp2_poly), 0, 100, "0..100 (percent)"},
    {"rope_split", F(rope_split), 0, 1, "0 or 1"},
    {"pingpong", F(pingpong), 0, 1, "0 or 1"},
    {"persistent", F(persistent), 0, 1, "0 or 1"},
    {"b_topk", F(b_topk), 16, 256, "16..256 top-k positions per KV block"},
    {"num_mbars", F(num_mbars), 1, 8, "1..8 KV ring slots"},
    {"q_smem_depth", F(q_smem_depth), 0, 1024, "0..1024 Q columns"},
    {"q_tmem_depth", F(q_tmem_depth), 0, 1024, "0..1024 Q columns"},
    {"cta_group", F(cta_group), 1, 2, "1 or 2"},
    {"tma_store", F(tma_store), 0, 1, "0 or 1"},
    {"sink", F(sink), 0, 1, "0 or 1"},
    {"split", F(split), 0, 1, "0 or 1"},
    {"cluster", F(cluster_split), 0, 16, "0 (off) or 2..16 CTAs of a cluster sharing a tile's kv blocks"},
    {"early", F(early), 0, 1, "0 or 1"},
    {"prefetch", F(prefetch), 0, 16, "0..16 (K/V blocks prefetched into L2 before the wait)"},
    {"varlen", F(varlen), 0, 1, "0 or 1"},
    {"page", F(page), 0, 256, "0 (dense K, V) or a power of two in 16..256 (KV rows per page)"},
    {"stale", F(stale), 0, 1, "0, or 1 (unsafe, for A/B benchmarks: rows past a sequence's end reach P V unzeroed)"},
    {"deterministic", F(deterministic), 0, 1, "0 or 1"},
    {"tail_split", F(tail_split), 0, 1, "0 or 1 (mha-bwd on sm90a: the last wave's kv tiles may be split over CTAs)"},
    {"softcap", F(softcap), 0, 1, "0 or 1 (the cap's value is a launch argument)"},
    {"alibi", F(alibi), 0, 1, "0 or 1 (slopes are a launch argument)"},
    {"timeline", F(timeline), 0, 1, "0, or 1 (debug: phase stamps of each tile into the workspace)"},
    {"store_wait", F(store_wait), 0, 1, "0, or 1 (A/B: the epilogue waits for its O store to read the Q slot, then frees it)"},
    {"coords_late", F(coords_late), 0, 1, "0, or 1 (A/B: each tile's coordinates at its top, not during the tile before)"},
    {"o_zero", F(o_zero), 0, 1, "0, or 1 (A/B: O zeroed by moves at each tile's top, not by its first P V)"},
    {"o_sts", F(o_sts), 0, 1, "0, or 1 (A/B: O staged by st.shared.b32, not stmatrix)"},
    {"occupancy", F(occupancy), 0, 2, "1 or 2 (CTAs an SM: each gets half the registers and shared memory)"},
    {"head_major", F(head_major), 0, 1, "0 or 1 (tile order: heads grouped to fit L2, or a head's m-blocks consecutive in "
                                        "waves of alternating direction)"},
    {"diag_half", F(diag_half), 0, 1, "0 or 1 (a consumer that sees no key of a block's upper half skips it: "
                                      "half-wide softmax and P V)"},
    {"dynamic", F(dynamic), 0, 1, "0 or 1 (a persistent CTA takes its next tile from a per-launch counter)"},
    {"claim", F(claim), 0, 4, "0..4 (dynamic=1: consecutive tiles one claim of the counter takes; 0 or 1: one)"},
};
#undef F
enum { N_INT_KEYS = sizeof int_keys / sizeof int_keys[0] };

static int *int_field(Config *c, const IntKey *k) { return (int *)((char *)c + k->off); }
static int int_value(const Config *c, const IntKey *k) { return *(const int *)((const char *)c + k->off); }

int config_set(Config *c, const char *key, const char *value, char *err, size_t n)
{
    if (strcmp(key, "kind") == 0) {
        int k = lookup(kind_name, KIND_COUNT, value);
        if (k < 0) return fail(err, n, "kind: '%s' is not allowed; use mha, mla-sparse, combine, mha-bwd, mha-bwd-pre, "
                                   "mha-bwd-dq or kv-append", ESC(value));
        c->kind = (Kind)k;
        return 0;
    }
    if (strcmp(key, "target") == 0) {
        int t = lookup(target_name, TARGET_COUNT, value);
        if (t < 0) return fail(err, n, "target: '%s' is not allowed; use sm90a, sm100a or sm103a", ESC(value));
        c->target = (TargetId)t;
        return 0;
    }
    if (strcmp(key, "dtype") == 0 || strcmp(key, "rope_dtype") == 0) {
        int d = lookup(dtype_name, DT_COUNT, value);
        if (d < 0) return fail(err, n, "%s: '%s' is not allowed; use bf16, fp16 or e4m3", key, ESC(value));
        if (key[0] == 'd') c->dtype = (DType)d; else c->rope_dtype = (DType)d;
        return 0;
    }
    if (strcmp(key, "mask") == 0) return parse_mask(c, value, err, n);
    if (strcmp(key, "mod") == 0) return parse_mod(c, value, err, n);
    if (strcmp(key, "depth") == 0) {
        int v;
        if (parse_int(value, &v) || v < 16 || v > 1024 || v % 16)
            return fail(err, n, "depth: '%s' is not allowed; use a multiple of 16 up to 1024", ESC(value));
        c->qk_depth = c->ov_depth = v;
        return 0;
    }
    for (int i = 0; i < N_INT_KEYS; i++) {
        const IntKey *k = &int_keys[i];
        if (strcmp(key, k->key) != 0) continue;
        int v;
        if (parse_int(value, &v) || v < k->min || v > k->max)
            return fail(err, n, "%s: '%s' is not allowed; use %s", key, ESC(value), k->allowed);
        *int_field(c, k) = v;
        return 0;
    }
    return fail(err, n, "'%s' is not a config field; fields: kind target dtype depth qk ov bm bn group stages "
                        "swizzle mask qtiles cta rescale poly rope_split rope_dtype pingpong persistent b_topk num_mbars q_smem_depth "
                        "q_tmem_depth cta_group tma_store sink split cluster early prefetch varlen page stale deterministic tail_split softcap alibi timeline store_wait coords_late o_zero o_sts occupancy head_major diag_half dynamic claim mod", ESC(key));
}

/* ---------------------------------------------------------------- the keys a kernel has */

static int is_mla100_key(const char *key);

/* Every field a text or a flag can give, in one index space: the word-valued ones, then int_keys. */
static const char *const word_keys[] = {"kind", "target", "dtype", "rope_dtype", "mask", "mod"};
enum { N_WORD_KEYS = sizeof word_keys / sizeof word_keys[0], N_FIELDS = N_WORD_KEYS + N_INT_KEYS };
_Static_assert((int)N_FIELDS <= (int)CONFIG_FIELDS, "ConfigGiven holds every field");

static const char *field_name(int i) { return i < N_WORD_KEYS ? word_keys[i] : int_keys[i - N_WORD_KEYS].key; }

static int field_index(const char *key)
{
    for (int i = 0; i < N_FIELDS; i++)
        if (!strcmp(field_name(i), key)) return i;
    return -1;
}

static int key_in(const char *key, const char *const *list, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (!strcmp(key, list[i])) return 1;
    return 0;
}
#define KEY_IN(key, ...) key_in((key), (const char *const[]){__VA_ARGS__}, \
                                sizeof (const char *const[]){__VA_ARGS__} / sizeof(const char *))

/* Which kernel reads which key; a superset of what config_canonical prints (key_used), so a
 * canonical text never names a key its kernel lacks. */
int config_key_applies(Kind k, TargetId t, const char *key)
{
    int mha = k == KIND_MHA, mla = k == KIND_MLA_SPARSE, sm90 = t == TARGET_SM90A;
    if (kind_is_bwd(k)) { /* the backward's kernels (mha_bwd_key_used below) */
        /* the runtime builds the pre and dq configs from the main kernel's, so they take its keys */
        return KEY_IN(key, "kind", "target", "dtype", "qk", "ov", "bm", "bn", "group", "stages", "swizzle", "mask",
                      "varlen", "deterministic", "tail_split", "sink", "softcap", "cta");
    }
    if (KEY_IN(key, "kind", "target", "dtype", "ov")) return 1;
    if (k == KIND_COMBINE) return 0; /* target, dtype and ov say it all */
    if (k == KIND_KV_APPEND) return !strcmp(key, "qk"); /* target, dtype, qk (K's depth) and ov (V's) */
    if (is_mla100_key(key)) return mla && !sm90;
    if (KEY_IN(key, "bm", "bn", "stages")) return mha || sm90; /* mla-sparse on sm100a: b_topk, num_mbars */
    if (KEY_IN(key, "qtiles", "cta", "rope_split", "rope_dtype")) return mha && !sm90;
    if (KEY_IN(key, "pingpong", "persistent")) return sm90;
    if (KEY_IN(key, "tma_store")) return mla;
    if (KEY_IN(key, "cluster", "timeline", "store_wait", "coords_late", "o_zero", "o_sts", "occupancy", "head_major",
               "diag_half", "dynamic", "claim"))
        return mha && sm90;
    if (KEY_IN(key, "sink", "split", "early", "prefetch", "varlen", "page", "softcap", "alibi", "mod")) return mha;
    return 1; /* qk group swizzle rescale poly mask */
}

/* "a b c": the keys kind k has on target t, for a message. */
static void keys_of(Kind k, TargetId t, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 1; i < N_FIELDS && o < n; i++) /* 1: not the kind */
        if (config_key_applies(k, t, field_name(i)))
            o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? " " : "", field_name(i));
}

int config_give(Config *c, ConfigGiven *g, const char *key, const char *value, const char *how, char *err, size_t n)
{
    if (config_set(c, key, value, err, n)) return -1;
    int depth = !strcmp(key, "depth");
    const char *fields[2] = {depth ? "qk" : key, depth ? "ov" : NULL};
    for (int j = 0; j < 2 && fields[j]; j++) {
        int i = field_index(fields[j]);
        if (i < 0) return fail(err, n, "internal: '%s' has no field index", fields[j]);
        if (g->how[i][0])
            return fail(err, n, "%s: given twice, as '%s' and '%s'%s; give it once", depth && g->by_depth[i] ? "depth"
                        : fields[j], g->how[i], ESC(how), depth != g->by_depth[i] ? " (depth sets both qk and ov)" : "");
    }
    for (int j = 0; j < 2 && fields[j]; j++) {
        int i = field_index(fields[j]);
        if (i < 0) continue;
        esc(how, g->how[i], sizeof g->how[i]);
        g->by_depth[i] = (unsigned char)depth;
        g->value[i] = i >= N_WORD_KEYS ? int_value(c, &int_keys[i - N_WORD_KEYS]) : 0;
    }
    return 0;
}

void config_given_merge(ConfigGiven *into, const ConfigGiven *over)
{
    for (int i = 0; i < N_FIELDS; i++)
        if (over->how[i][0]) {
            memcpy(into->how[i], over->how[i], sizeof into->how[i]);
            into->by_depth[i] = over->by_depth[i];
            into->value[i] = over->value[i];
        }
}

int config_given_has(const ConfigGiven *g, const char *key, const char **how)
{
    int i = field_index(key);
    if (i < 0 || !g->how[i][0]) return 0;
    if (how) *how = g->how[i];
    return 1;
}

/* What was given, against the kernel the config makes (its defaults filled in): a key the kind
 * and target lack, rope_dtype without a rope tensor, split=0 beside a cluster split, a value the
 * defaults replace. Each would otherwise be dropped from the canonical form without a word. */
int config_check_given(const Config *c, const ConfigGiven *g, char *err, size_t n)
{
    Config f = *c, unset;
    char ignored[8], keys[400];
    if (config_fill_defaults(&f, ignored, sizeof ignored)) return 0; /* plan_make says why */
    config_init(&unset);
    for (int i = 1; i < N_FIELDS; i++) { /* 1: the command or the first word decides the kind */
        if (!g->how[i][0] || config_key_applies(f.kind, f.target, field_name(i))) continue; /* combine: no depth */
        keys_of(f.kind, f.target, keys, sizeof keys);
        return fail(err, n, "%s: '%s' is not allowed for %s on %s, which has no %s (its keys: %s)", field_name(i),
                    g->how[i], kind_name[f.kind], target_name[f.target], field_name(i), keys);
    }
    int rd = field_index("rope_dtype"), split = field_index("split"), cluster = field_index("cluster");
    if (g->how[rd][0] && f.rope_split != 1)
        return fail(err, n, "rope_dtype: '%s' is not allowed without rope_split=1; it is the dtype of K's separate "
                    "rope tensor", g->how[rd]);
    if (g->how[split][0] && !g->value[split] && f.cluster_split)
        return fail(err, n, "split: '%s' conflicts with '%s'; a cluster split is a split kernel (cluster implies "
                    "split=1), so leave split out", g->how[split], g->how[cluster][0] ? g->how[cluster] : "cluster");
    for (int i = N_WORD_KEYS; i < N_FIELDS; i++) {
        const IntKey *k = &int_keys[i - N_WORD_KEYS];
        if (!g->how[i][0] || g->by_depth[i] || g->value[i] == int_value(&unset, k)) continue; /* unset: a default */
        if (int_value(&f, k) != g->value[i])
            return fail(err, n, "%s: '%s' is not allowed for %s on %s, which uses %s=%d here; leave it out or give %d",
                        k->key, g->how[i], kind_name[f.kind], target_name[f.target], k->key, int_value(&f, k),
                        int_value(&f, k));
    }
    return 0;
}

int config_fill_defaults(Config *c, char *err, size_t n)
{
    if ((unsigned)c->target >= TARGET_COUNT) return fail(err, n, "target: value %d is not a target", (int)c->target);
    if (!c->qk_depth) c->qk_depth = c->ov_depth;
    if (!c->ov_depth) c->ov_depth = c->qk_depth;
    if (!c->qk_depth) return fail(err, n, "depth: missing; give --depth D (or --qk-depth and --ov-depth)");
    if (!c->group) c->group = 1;
    if (c->cluster_split) c->split = 1; /* a cluster split is a split kernel */
    const Family *f = target_family(target_get(c->target), c->kind, err, n);
    if (!f) return -1;
    f->defaults(c);
    default_prefetch(c); /* after the target's: sm100a's decides cta */
    return 0;
}

static int key_used(const Config *c, const char *key);

/* A field set for a kernel that lacks it (combine's and kv-append's own checks cover their kinds, whose defaults
 * fill fields it does not read; prefetch: the defaults give every kind 0, its own rule refuses
 * more). */
static int unread_key(const Config *c, char *err, size_t n)
{
    Config unset;
    config_init(&unset);
    if (c->kind == KIND_COMBINE || c->kind == KIND_KV_APPEND) return 0;
    for (int i = 0; i < N_INT_KEYS; i++) {
        const IntKey *k = &int_keys[i];
        if (!strcmp(k->key, "prefetch") || config_key_applies(c->kind, c->target, k->key) ||
            int_value(c, k) == int_value(&unset, k))
            continue;
        return fail(err, n, "%s: %d is not allowed for %s on %s, which has no %s", k->key, int_value(c, k),
                    kind_name[c->kind], target_name[c->target], k->key);
    }
    if (c->rope_dtype != unset.rope_dtype && !(config_key_applies(c->kind, c->target, "rope_dtype") && c->rope_split))
        return fail(err, n, "rope_dtype: %s is not allowed without rope_split=1; it is the dtype of K's separate rope "
                    "tensor", (unsigned)c->rope_dtype < DT_COUNT ? dtype_name[c->rope_dtype] : "(unknown)");
    return 0;
}

int config_check(const Config *c, char *err, size_t n)
{
    if ((unsigned)c->kind >= KIND_COUNT) return fail(err, n, "kind: value %d is not a kind", (int)c->kind);
    if ((unsigned)c->target >= TARGET_COUNT) return fail(err, n, "target: value %d is not a target", (int)c->target);
    if ((unsigned)c->dtype >= DT_COUNT) return fail(err, n, "dtype: value %d is not a dtype", (int)c->dtype);
    if (c->qk_depth % 16 || c->ov_depth % 16)
        return fail(err, n, "qk/ov: %d/%d is not allowed; depths are multiples of 16", c->qk_depth, c->ov_depth);
    if (c->mask == MASK_WINDOW && (c->window_left < -1 || c->window_left > FA4_WINDOW_MAX ||
                                   c->window_right < -1 || c->window_right > FA4_WINDOW_MAX))
        return fail(err, n, "mask: window:%d,%d is not allowed; L and R are in 0..%d, or -1 for unbounded",
                    c->window_left, c->window_right, FA4_WINDOW_MAX);
    if (c->swizzle != 32 && c->swizzle != 64 && c->swizzle != 128)
        return fail(err, n, "swizzle: %d is not allowed; use 32, 64 or 128", c->swizzle);
    /* a key this kernel does not read would vanish from the canonical form (and the hash) */
    for (int i = 0; i < N_INT_KEYS; i++) {
        const IntKey *k = &int_keys[i];
        int unset = !strcmp(k->key, "q_tmem_depth") ? -1 : 0;
        if (is_mla100_key(k->key) && !key_used(c, k->key) && int_value(c, k) != unset)
            return fail(err, n, "%s: %d is not allowed for %s on %s; only mla-sparse on sm100a and sm103a has it", k->key,
                        int_value(c, k), kind_name[c->kind], target_name[c->target]);
    }
    if (c->tma_store >= 0 && c->kind != KIND_MLA_SPARSE)
        return fail(err, n, "tma_store: %d is not allowed for %s; only mla-sparse has it (MHA always stores O by TMA)",
                    c->tma_store, kind_name[c->kind]);
    if (c->sink != 0 && c->sink != 1) return fail(err, n, "sink: %d is not allowed; use 0 or 1", c->sink);
    if (c->split && c->kind != KIND_MHA)
        return fail(err, n, "split: not allowed for %s; split-KV is an MHA feature", kind_name[c->kind]);
    if (c->split && c->sink)
        return fail(err, n, "split: not allowed with sink=1; a sink joins the whole row's denominator, which no "
                    "split sees (use split=0)");
    if (c->cluster_split && (c->kind != KIND_MHA || c->target != TARGET_SM90A || !c->split || c->cluster_split < 2))
        return fail(err, n, "cluster: %d is not allowed for %s on %s; it is 2..16 CTAs of a cluster splitting a tile's "
                    "kv blocks, for mha on sm90a (it implies split=1; sm100a uses split=1 and the combine kernel)",
                    c->cluster_split, kind_name[c->kind], target_name[c->target]);
    if (c->early && !config_split_pdl(c))
        return fail(err, n, "early: 1 is not allowed here; it is for the mha split kernel (split=1) over dense or "
                    "paged K, V (no cluster, cta=2 or varlen)");
    if (c->prefetch > 0 && !config_split_pdl(c) && !config_dense_prefetch(c))
        return fail(err, n, "prefetch: %d is not allowed here; it is for the mha split kernel (split=1) over dense or "
                    "paged K, V (no cluster, cta=2 or varlen) and the dense, unsplit mha forward on sm90a", c->prefetch);
    if (c->page && (c->page < 16 || c->page > 256 || (c->page & (c->page - 1))))
        return fail(err, n, "page: %d is not allowed; use a power of two in 16..256 (KV rows per page), or 0 for "
                    "dense K, V", c->page);
    if (c->kind != KIND_MHA && c->page)
        return fail(err, n, "page: %d is not allowed for %s; paged KV is an MHA feature", c->page, kind_name[c->kind]);
    if (c->stale && (c->kind != KIND_MHA || (!c->varlen && !c->page)))
        return fail(err, n, "stale: 1 is not allowed here; it is for MHA kernels over varlen or paged K, V (varlen=1 or "
                    "page=P), the ones whose kv tiles reach past a sequence's end");
    if (c->kind != KIND_MHA && !kind_is_bwd(c->kind) && c->varlen)
        return fail(err, n, "varlen: 1 is not allowed for %s; variable-length batches are an MHA feature",
                    kind_name[c->kind]);
    if ((c->softcap || c->alibi) && ((c->kind != KIND_MHA && !(c->kind == KIND_MHA_BWD && !c->alibi)) || c->score_mod))
        return fail(err, n, "%s: 1 is not allowed %s; it is a built-in MHA score transform (a score_mod can compute "
                    "it itself)", c->softcap ? "softcap" : "alibi", c->score_mod ? "with mod=" : "for this kind");
    if (c->kind != KIND_MHA && !kind_is_bwd(c->kind) && (c->sink || c->score_mod))
        return fail(err, n, "%s: not allowed for %s; sinks and score_mod are MHA features (mla-sparse takes its "
                    "attn_sink as an argument)", c->sink ? "sink" : "mod", kind_name[c->kind]);
    if (c->timeline && (c->kind != KIND_MHA || c->target != TARGET_SM90A || c->split || c->varlen || c->page))
        return fail(err, n, "timeline: 1 is not allowed here; it is a debug word of the dense, unsplit mha forward on "
                    "sm90a (no split, cluster, varlen or page)");
    if (c->deterministic && !kind_is_bwd(c->kind))
        return fail(err, n, "deterministic: 1 is not allowed for %s; it is a word of the backward kinds (mha-bwd)",
                    kind_name[c->kind]);
    if (c->tail_split && c->kind != KIND_MHA_BWD && c->kind != KIND_MHA_BWD_PRE)
        return fail(err, n, "tail_split: 1 is not allowed for %s; it is a word of the backward's main kernel (mha-bwd)",
                    kind_name[c->kind]);
    const Family *f = target_family(target_get(c->target), c->kind, err, n);
    if (!f || f->check(c, err, n)) return -1;
    return unread_key(c, err, n); /* after the family's own words for these */
}

static void put(char *buf, size_t n, size_t *len, const char *fmt, ...) FA4_PRINTF(4, 5);
static void put(char *buf, size_t n, size_t *len, const char *fmt, ...)
{
    if (*len >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *len, n - *len, fmt, ap);
    va_end(ap);
    if (k > 0) *len += (size_t)k;
}

/* The keys of sparse MLA on sm100a (the seed's config surface): they replace bm, bn, stages,
 * qtiles and cta there, and no other kernel has them. */
static const char *const mla100_keys[] = {"b_topk", "num_mbars", "q_smem_depth", "q_tmem_depth", "cta_group"};

static int is_mla100_key(const char *key)
{
    for (size_t i = 0; i < sizeof mla100_keys / sizeof mla100_keys[0]; i++)
        if (!strcmp(key, mla100_keys[i])) return 1;
    return 0;
}

/* The backward's kinds (mha_bwd.h): the keys their canonical form names. */
int mha_bwd_key_used(const Config *c, const char *key)
{
    if (!strcmp(key, "varlen")) return c->varlen != 0;
    if (!strcmp(key, "deterministic")) return c->deterministic != 0;
    if (!strcmp(key, "tail_split")) return c->kind != KIND_MHA_BWD_DQ && c->tail_split != 0;
    if (!strcmp(key, "sink")) return c->kind != KIND_MHA_BWD && c->sink != 0;
    if (!strcmp(key, "softcap")) return c->kind == KIND_MHA_BWD && c->softcap != 0;
    /* the sm100a CTA pair: named only when on, so the one-CTA kernels keep their text */
    if (!strcmp(key, "cta")) return c->kind == KIND_MHA_BWD && c->cta_pair == 2;
    if (c->kind == KIND_MHA_BWD)
        return !strcmp(key, "qk") || !strcmp(key, "ov") || !strcmp(key, "bm") || !strcmp(key, "bn") ||
               !strcmp(key, "group") || !strcmp(key, "stages") || !strcmp(key, "swizzle");
    /* pre and dq: the depth, and the main kernel's tile that shapes the workspace blocks */
    return !strcmp(key, "qk") || !strcmp(key, "bm") || (c->kind == KIND_MHA_BWD_DQ && !strcmp(key, "bn"));
}

/* Keys a target does not use stay out of its canonical form. */
static int key_used(const Config *c, const char *key)
{
    if (c->kind == KIND_COMBINE) return !strcmp(key, "ov"); /* combine: target, dtype and ov say it all */
    if (c->kind == KIND_KV_APPEND) return !strcmp(key, "qk") || !strcmp(key, "ov");
    if (kind_is_bwd(c->kind)) return mha_bwd_key_used(c, key);
    if (!strcmp(key, "deterministic") || !strcmp(key, "tail_split")) return 0;
    int sm100 = target_is_sm100(c->target);
    int mla100 = sm100 && c->kind == KIND_MLA_SPARSE;
    /* named always: on by default on both targets, so 0 must be spelled for the text to read back the same */
    if (!strcmp(key, "tma_store")) return c->kind == KIND_MLA_SPARSE;
    if (is_mla100_key(key)) return mla100;
    if (mla100 && (!strcmp(key, "bm") || !strcmp(key, "bn") || !strcmp(key, "stages"))) return 0;
    if (!strcmp(key, "qtiles") || !strcmp(key, "cta")) return sm100 && !mla100;
    if (!strcmp(key, "pingpong") || !strcmp(key, "persistent")) return c->target == TARGET_SM90A;
    if (!strcmp(key, "rope_split")) return sm100 && c->kind == KIND_MHA && c->qk_depth != c->ov_depth;
    if (!strcmp(key, "split")) return c->split != 0;
    if (!strcmp(key, "cluster")) return c->cluster_split != 0;
    if (!strcmp(key, "early")) return c->early != 0;
    /* split: named always (0 is a choice); the dense sm90a forward: only off its default (a text without the word
     * means one block) */
    if (!strcmp(key, "prefetch"))
        return config_split_pdl(c) || (config_dense_prefetch(c) ? c->prefetch != DENSE_PREFETCH_BLOCKS : c->prefetch > 0);
    if (!strcmp(key, "sink")) return c->sink != 0; /* features: named only when on, so other kernels keep their text */
    if (!strcmp(key, "varlen")) return c->varlen != 0;
    if (!strcmp(key, "page")) return c->page != 0;
    if (!strcmp(key, "stale")) return c->stale != 0;
    if (!strcmp(key, "softcap")) return c->softcap != 0;
    if (!strcmp(key, "alibi")) return c->alibi != 0;
    if (!strcmp(key, "timeline")) return c->timeline != 0;
    if (!strcmp(key, "store_wait")) return c->store_wait != 0;
    if (!strcmp(key, "coords_late")) return c->coords_late != 0;
    if (!strcmp(key, "o_zero")) return c->o_zero != 0;
    if (!strcmp(key, "o_sts")) return c->o_sts != 0;
    if (!strcmp(key, "occupancy")) return c->occupancy > 1;
    if (!strcmp(key, "head_major")) return c->head_major >= 0;
    if (!strcmp(key, "diag_half")) return c->diag_half >= 0;
    if (!strcmp(key, "dynamic")) return c->dynamic > 0;
    if (!strcmp(key, "claim")) return c->claim > 1;
    return 1;
}

void config_canonical(const Config *c, char *buf, size_t n)
{
    size_t len = 0;
    if (n) buf[0] = 0;
    put(buf, n, &len, "%s target=%s dtype=%s", kind_name[c->kind], target_name[c->target], dtype_name[c->dtype]);
    for (int i = 0; i < N_INT_KEYS; i++)
        if (key_used(c, int_keys[i].key)) put(buf, n, &len, " %s=%d", int_keys[i].key, int_value(c, &int_keys[i]));
    if (key_used(c, "rope_split") && c->rope_split) put(buf, n, &len, " rope_dtype=%s", dtype_name[c->rope_dtype]);
    if (c->kind == KIND_COMBINE || c->kind == KIND_MHA_BWD_PRE || c->kind == KIND_MHA_BWD_DQ || c->kind == KIND_KV_APPEND)
        return; /* no mask */
    if (c->mask == MASK_WINDOW)
        put(buf, n, &len, " mask=window:%d,%d", c->window_left, c->window_right);
    else
        put(buf, n, &len, " mask=%s", mask_name[c->mask]);
    if (c->score_mod) put(buf, n, &len, " mod=%016llx", (unsigned long long)c->score_mod);
}

int config_parse_canonical(const char *text, Config *c, char *err, size_t n)
{
    config_init(c);
    return config_apply_text(c, text, err, n);
}

int config_parse_given(const char *text, Config *c, ConfigGiven *g, char *err, size_t n)
{
    config_init(c);
    memset(g, 0, sizeof *g);
    return config_give_text(c, g, text, err, n);
}

int config_apply_text(Config *c, const char *text, char *err, size_t n)
{
    ConfigGiven g;
    memset(&g, 0, sizeof g);
    return config_give_text(c, &g, text, err, n);
}

int config_give_text(Config *c, ConfigGiven *g, const char *text, char *err, size_t n)
{
    char copy[512], how[80];
    if (strlen(text) >= sizeof copy) return fail(err, n, "config: text is longer than %zu characters", sizeof copy - 1);
    strcpy(copy, text);
    char *save = NULL;
    int first = 1;
    for (char *w = strtok_r(copy, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save), first = 0) {
        char *eq = strchr(w, '=');
        if (!eq) {
            if (!first)
                return fail(err, n, "config: '%s' is not key=value; only the kind may stand alone, first", ESC(w));
            if (config_give(c, g, "kind", w, w, err, n)) return -1;
            continue;
        }
        snprintf(how, sizeof how, "%.*s", (int)(sizeof how - 1), w); /* before the '=' becomes the key's end */
        *eq = 0;
        if (config_give(c, g, w, eq + 1, how, err, n)) return -1;
    }
    return 0;
}

uint64_t config_hash(const Config *c)
{
    char text[512];
    config_canonical(c, text, sizeof text);
    uint64_t h = 0xcbf29ce484222325ull;
    const char *parts[3] = {text, "\n", FA4GEN_VERSION};
    for (int i = 0; i < 3; i++)
        for (const unsigned char *s = (const unsigned char *)parts[i]; *s; s++) h = (h ^ *s) * 0x100000001b3ull;
    return h;
}

void config_symbol(const Config *c, char *buf, size_t n)
{
    /* the kind's name with '-' made an identifier character: mla-sparse -> mla_sparse */
    char kind[24];
    snprintf(kind, sizeof kind, "%s", kind_name[c->kind]);
    for (char *s = kind; *s; s++)
        if (*s == '-') *s = '_';
    snprintf(buf, n, "fa4_%s_%s_%016llx", kind, target_name[c->target], (unsigned long long)config_hash(c));
}
