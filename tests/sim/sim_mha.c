/* sim_mha.c - runs MHA cases through libfa4rt's public path and checks them
 * against the host reference (ref_mha.c). The same binary runs on the CPU
 * simulator (LD_LIBRARY_PATH=build/sim, whose libcuda.so.1 executes PTX) and
 * on a real GPU (the system's libcuda.so.1).
 *
 *   sim_mha [--seed N] [--cases FILE | CASE WORDS...] [--dump DIR] [--compare DIR]
 *           [--quiet] [--no-skip] [--plan]
 *   sim_mha --self-test
 *
 * ---- Case syntax -------------------------------------------------------------
 * A case is a line of key=value words (in a --cases file: one per line, '#'
 * starts a comment, blank lines are ignored). On the command line the same
 * words are separate arguments (`sim_mha target=sm100a dtype=bf16 sq=130 ...`),
 * and each key may also be written as a flag, `--sq 130` or `--sq=130`.
 * A value may be double-quoted to hold spaces (config="bn=64 stages=3").
 * Keys are parsed strictly: an unknown key, a repeated key, a missing
 * required key or a malformed value is an error naming it, and nothing runs.
 *
 *   target=sm90a|sm100a       required; fa4_options.target (a device of another
 *                             compute capability refuses the case: SKIP)
 *   dtype=bf16|fp16|e4m3      required; e4m3 writes bf16 O
 *   sq=N sk=N                 required; seqlen_q, seqlen_k (1..65536)
 *   hq=N                      required; heads_q
 *   qk=N                      required; qk_depth (1..1024)
 *   batch=N                   default 1
 *   hkv=N                     default hq (GQA group = hq / hkv)
 *   ov=N                      default qk; ov_depth
 *   mask=none|causal|window:L,R   default none; L, R >= 0 or -1 (unbounded side)
 *   config="WORDS"            default none; fa4_mha_args.config, the kernel's tuning
 *                             overrides ("bn=64 stages=3 qtiles=1 cta=2")
 *   k_rope=0|1                default 0; 1: K's last 64 columns in their own tensor
 *   descale=Q,K,V             default 0,0,0 (0 means 1); q/k/v descales
 *   scale=X                   default 0 (1/sqrt(qk)); softmax_scale
 *   amp=X                     default 1; Q's values are U(-amp, amp) (peakier softmax)
 *   layout=packed|strided     default packed; strided: every tensor padded in its
 *                             head, seq and batch strides (padding is NaN)
 *   lse=0|1                   default 1; 0: no LSE output (NULL)
 *   sink=rand|-inf|X          default none; fa4_mha_args.sink [hq]: rand = U(-2, 2) per head,
 *                             -inf every head, X >= 0: +X for even heads, -X for odd ones
 *   splits=N                  default 1; fa4_mha_args.num_splits (0: the runtime picks); with a split
 *                             count > 1 (or 0) a workspace of fa4_mha_split_count's size, poisoned
 *                             with NaN, is passed
 *   workspace=0|1             default 1; 0: no workspace whatever the split count (sm90a then
 *                             picks a cluster split, which needs none)
 *   kv_early=0|1              default 0; fa4_mha_args.kv_early (sm90a split kernel: K/V blocks before
 *                             row sk - sq load before griddepcontrol.wait, in ascending order)
 *   mod=NAME                  default none; fa4_mha_args.score_mod, one of (s the scaled score):
 *                             softcap30, softcap50  cap * tanh(s / cap) (Gemma 2 / Grok)
 *                             alibi     s - slope[h] |q - k|, slopes 2^(-8(h+1)/hq) in aux
 *                             relbias   s + bias[clamp(k - q, -128, 128) + 128], 257 U(-2, 2) in aux
 *                             rowdrop   -inf where (q + h + b) % 3 == 1 (those rows see no key)
 *   softcap=X                 default 0; fa4_mha_args.softcap (built-in, config word softcap=1)
 *   alibi=0|1                 default 0; 1: fa4_mha_args.alibi_slopes [hq] = 2^(-8(h+1)/hq) (built-in,
 *                             config word alibi=1; bottom-right: - slope |i + sk - sq - j|)
 *   launches=N                default 1 (1..8); the call N times in a row on one stream, O and LSE poisoned
 *                             again before each, the last one checked: a kernel that leaves state behind
 *                             for the next launch (a dynamic kernel's tile counter not zeroed) fails
 *   prev_grid=N               default 0 (0..100000); the simulator holds griddepcontrol.wait for the launch's
 *                             first N scheduler rounds, as if the stream's previous grid still ran
 *                             (FA4SIM_PREV_GRID; a kernel's prefetch under the previous grid's tail runs;
 *                             ignored on a GPU)
 *
 * The canonical text of a case lists target dtype batch sq sk hq hkv qk ov mask,
 * then the other keys that differ from their defaults, in the order above
 * (values as given). Results print it.
 *
 * ---- Inputs ------------------------------------------------------------------
 * Q, K, V (and k_rope) are U(-1, 1) (Q times amp), rounded to nearest even into
 * the dtype, from a splitmix64 stream seeded by FNV-1a(canonical case text) and
 * --seed (default 1), one stream per tensor: the same bytes on every machine.
 * O and LSE are poisoned with 0xFF bytes (NaN) before the launch.
 *
 * ---- Checks (tests/gpu/test_mha.c's measures and bounds) ------------------------
 *   relL2   = ||O - ref||_2 / ||ref||_2 over every element, <= REL_L2_TOL (1e-2);
 *             e4m3 <= REL_L2_TOL_E4M3 (see there)
 *   lse_err = max |LSE - ref| / max(1, |ref|) over rows that see a key, <= LSE_TOL (1e-3)
 *   the same against what the kernel's rounding explains (RND_L2_TOL, LSE_EXP2 there):
 *   relL2_rnd = relL2 against the reference that rounds P as the kernel's P.V takes it (its config's
 *             dtype, bn, rescale: RefRound) and O to its storage type, <= RND_L2_TOL (2.5e-3; e4m3 5e-3);
 *             not printed where the model does not describe the run (split-KV)
 *   lse_tight = max |LSE - ref| / (LSE_EXP2 + LSE_F32 |ref|) (1.2e-4 + 2e-6 |ref|), <= 1
 *   margin  = the largest error / bound of the above (a thin margin shows as close to 1)
 *   nan     = NaN elements left in O or LSE: must be 0
 *   empty   = rows that see no key whose O is not exactly 0 or LSE not -inf: must be 0
 *   oob     = bytes written in the padding of a strided O: must be 0
 *   maxabs  = max |O - ref| (printed, not bounded)
 * Each case prints one line, PASS|FAIL|SKIP <id> <case> relL2=.. maxabs=.. lse_err=.. nan=N
 * (FA4_ERR_UNSUPPORTED is a SKIP, with fa4_last_error; any other refusal is a
 * FAIL with it; --no-skip makes SKIP a FAIL), and the run ends with exactly
 * `sim_mha: N passed, N failed, N skipped`. Exit status 1 when any case failed,
 * 2 for a usage error or a setup failure (no driver, a bad case).
 *
 * ---- Ids, dumps, comparisons ---------------------------------------------------
 * A case's id is the low 48 bits of FNV-1a 64 over "<canonical case>\nseed=<N>", as
 * 12 hex digits: the same case and seed have the same id on every machine.
 * --dump DIR writes DIR/<id>.bin for every case that launched: a text header
 * of two lines ("fa4sim-dump 1 id=<id> seed=<N> o_bytes=<n> lse_floats=<m>",
 * then the canonical case), then O's device buffer exactly as the kernel left
 * it (including strided padding), then the LSE floats (host byte order).
 * --compare DIR reads DIR/<id>.bin back (a dump of another run of this binary,
 * e.g. on an H100) and prints cmp_o / cmp_lse, the max abs differences of O and
 * LSE; the case fails when cmp_o > CMP_O_TOL or cmp_lse > CMP_LSE_TOL. A case
 * with no stored run prints cmp=none and is not failed for it.
 *
 * --plan launches nothing and needs no GPU: it prints each case's id and the
 * kernel config fa4_mha_config picks for it (or why it is refused).
 * Without --quiet each case also prints the kernel config it ran and its times
 * (lines starting with two blanks); --quiet leaves the result lines and the
 * summary. --self-test checks the reference (format codecs, masks' visible keys,
 * rows with no key, ref_mha_fwd against the textbook formula, descale and
 * k_rope invariants), the case parser and the pass/fail logic; it needs no GPU.
 */
#include <cuda.h> /* types only: every driver call goes through dlopen below */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fa4.h"
#include "harness.h"
#include "ref_mha.h"

/* ---------------------------------------------------------------- tolerances */

/* The GPU test's bounds (tests/gpu/test_mha.c). */
#define REL_L2_TOL 1e-2
#define LSE_TOL 1e-3
/* e4m3: the PV product takes P in e4m3 (3 fraction bits), which alone costs a
 * correct kernel rel L2 2.0e-2 .. 2.7e-2 on these inputs (measured with this
 * reference, P rounded to e4m3 and O to bf16: d128, seqlen_k 128/256, amp 1..4;
 * O's bf16 rounding alone is 1.7e-3). 6e-2 leaves twice that; a wrong mask,
 * scale or tile gives errors of order 1. */
#define REL_L2_TOL_E4M3 6e-2
/* --compare: two runs of the same kernel on the same inputs (simulator vs a
 * GPU) may differ by accumulation order and exp2 approximations only. Measured
 * (simulator vs H100, the 27 sm90a cases, bench/results/2026-11-23-h100-sim-anchor*):
 * O differs by at most one bf16 ulp (1.95e-3 at |O| in [0.5, 1); 9 cases
 * bit-identical or below 1e-6), LSE by at most 1.4e-6; vs an H200 on all 42
 * (2026-11-29-h200-sim-anchor*): the same maxima. The bounds allow two
 * ulps and ten times the LSE difference. */
/* The rounding-aware checks (RefRound: the reference rounds P to the type the kernel's P.V takes, with the
 * kernel's block max, and O to its storage type): what remains is the order of f32 sums, the exp2
 * approximations and the roundings they flip. Measured over cases_sm100.txt and cases_sm90.txt (seed 1), the
 * largest relL2_rnd: e4m3 1.84e-3, bf16 9.3e-4, fp16 7.9e-4 (against 2.8e-2, 2.5e-3, 3.1e-4 exact); the
 * bounds are 2.5-3 times those. A kernel error the size of e4m3's own rounding (2e-2) is then 4 bounds away. */
#define RND_L2_TOL_E4M3 5e-3
#define RND_L2_TOL 2.5e-3
/* LSE: |LSE - ref| <= LSE_EXP2 + LSE_F32 |ref| (LSE_EXP2: the exp2 polynomial's relative error, 8.5e-5 at
 * worst, is LSE's absolute error when one key holds the row sum (measured: window 0,0 rows); LSE_F32: the few
 * f32 roundings of m * scale_log2 and of the ln 2 product, ~2e-7, times 10). A constant wrong in its 4th
 * digit (ln 2 = 0.6932) is off by 7.8e-5 |ref|: 8 bounds at |ref| = 16. */
#define LSE_EXP2 1.2e-4
#define LSE_F32 2e-6
#define CMP_O_TOL 4e-3   /* max |O_a - O_b|, |O| < 1 */
#define CMP_LSE_TOL 1e-5 /* max |LSE_a - LSE_b| */

enum {
    ID_HEX = 12,           /* digits of a case id */
    CASE_TEXT_MAX = 512,
    MAX_SEQLEN = 65536,
    MAX_HEADS = 4096,
    MAX_DEPTH = 1024,
    PAD_HEAD_BYTES = 32, /* strided layout: padding after each head row, seq row, batch */
    PAD_SEQ_BYTES = 64,
    PAD_BATCH_BYTES = 128,
};

static const uint64_t DEFAULT_SEED = 1;

/* ---------------------------------------------------------------- cases */

typedef struct Case {
    fa4_target target;
    RefDtype dtype;
    int batch, sq, sk, hq, hkv, qk, ov;
    RefMask mask;
    int wl, wr;
    int k_rope, strided, lse;
    float qd, kd, vd, scale, amp;
    int sink, mod;     /* SINK_*, MOD_* */
    int splits;        /* num_splits */
    int workspace;     /* 0: no workspace even where splits would take one */
    int kv_early;      /* fa4_mha_args.kv_early */
    float sink_x;      /* sink=X */
    float softcap;     /* softcap=X */
    int alibi;         /* alibi=1 */
    int launches;      /* launches=N */
    int prev_grid;     /* prev_grid=N */
    char softcap_text[64];
    char config[WORD_MAX];
    char descale_text[WORD_MAX], scale_text[64], amp_text[64]; /* as given, for the canonical text */
} Case;

enum { K_TARGET, K_DTYPE, K_SQ, K_SK, K_HQ, K_QK, K_BATCH, K_HKV, K_OV, K_MASK, K_CONFIG, K_KROPE, K_DESCALE,
       K_SCALE, K_AMP, K_LAYOUT, K_LSE, K_SINK, K_MOD, K_SPLITS, K_WORKSPACE, K_KV_EARLY, K_SOFTCAP, K_ALIBI,
       K_LAUNCHES, K_PREV_GRID, K_COUNT };
static const char *const targets_name[] = {[FA4_TARGET_SM90A] = "sm90a", [FA4_TARGET_SM100A] = "sm100a",
                                            [FA4_TARGET_SM103A] = "sm103a"};
static const char *const KEY_NAMES[K_COUNT] = {"target", "dtype", "sq", "sk", "hq", "qk", "batch", "hkv", "ov",
                                               "mask", "config", "k_rope", "descale", "scale", "amp", "layout",
                                               "lse", "sink", "mod", "splits", "workspace", "kv_early",
                                               "softcap", "alibi", "launches", "prev_grid"};

enum { SINK_NONE, SINK_RAND, SINK_NEG_INF, SINK_ALT };
enum { MOD_NONE, MOD_SOFTCAP30, MOD_SOFTCAP50, MOD_ALIBI, MOD_RELBIAS, MOD_ROWDROP, MOD_COUNT };
static const char *const MOD_NAMES[MOD_COUNT] = {"none", "softcap30", "softcap50", "alibi", "relbias", "rowdrop"};
enum { RELBIAS_R = 128 }; /* relbias: k - q clamped to -R..R */

/* The mods' CUDA C (fa4.h's score_mod contract); the reference (mod_ref) computes each in double. */
static const char *const MOD_SRC[MOD_COUNT] = {
    NULL,
    "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
    "{ return 30.0f * tanhf(s * (1.0f / 30.0f)); }\n",
    "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
    "{ return 50.0f * tanhf(s * (1.0f / 50.0f)); }\n",
    "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
    "{ return s - __ldg((const float *)aux + h) * (float)abs(q - k); }\n",
    "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
    "{\n    int d = min(max(k - q, -128), 128);\n    return s + __ldg((const float *)aux + d + 128);\n}\n",
    "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
    "{ return (q + h + b) % 3 == 1 ? __int_as_float(0xff800000) : s; }\n",
};
enum { REQUIRED_KEYS = K_BATCH }; /* keys before K_BATCH are required */

/* A finite float >= 0 (min_exclusive: > 0). */
static int parse_float(const char *key, const char *v, int positive, float *out, char *err, size_t n)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x) || x < 0 || (positive && x == 0) || !isfinite((float)x))
        return errf(err, n, "%s=%s: expected a finite number %s 0", key, v, positive ? ">" : ">=");
    *out = (float)x;
    return 0;
}

static int parse_mask(const char *v, Case *c, char *err, size_t n)
{
    c->wl = c->wr = -1;
    if (!strcmp(v, "none")) c->mask = REF_MASK_NONE;
    else if (!strcmp(v, "causal")) c->mask = REF_MASK_CAUSAL;
    else {
        char extra;
        if (strncmp(v, "window:", 7) || sscanf(v + 7, "%d,%d%c", &c->wl, &c->wr, &extra) != 2 || c->wl < -1 ||
            c->wr < -1 || strspn(v + 7, "-0123456789,") != strlen(v + 7))
            return errf(err, n, "mask=%s: expected none, causal or window:L,R with L, R >= 0 or -1", v);
        c->mask = REF_MASK_WINDOW;
    }
    return 0;
}

static int parse_descale(const char *v, Case *c, char *err, size_t n)
{
    char a[64], b[64], d[64];
    const char *p1 = strchr(v, ','), *p2 = p1 ? strchr(p1 + 1, ',') : NULL;
    size_t la = p1 ? (size_t)(p1 - v) : 0, lb = p2 ? (size_t)(p2 - p1 - 1) : 0;
    if (!p1 || !p2 || strchr(p2 + 1, ',') || la >= sizeof a || lb >= sizeof b || strlen(p2 + 1) >= sizeof d)
        return errf(err, n, "descale=%s: expected Q,K,V (three numbers >= 0; 0 means 1)", v);
    memcpy(a, v, la), a[la] = 0;
    memcpy(b, p1 + 1, lb), b[lb] = 0;
    strcpy(d, p2 + 1);
    if (parse_float("descale (q)", a, 0, &c->qd, err, n) || parse_float("descale (k)", b, 0, &c->kd, err, n) ||
        parse_float("descale (v)", d, 0, &c->vd, err, n))
        return -1;
    snprintf(c->descale_text, sizeof c->descale_text, "%s", v);
    return 0;
}

/* Kernel config words: lower-case key=value words, no quotes. Stored with
 * single spaces. */
static int set_key(Case *c, int k, const char *v, char *err, size_t n)
{
    static const char *const targets[] = {"sm90a", "sm100a", "sm103a"}, *const dtypes[] = {"bf16", "fp16", "e4m3"},
                             *const layouts[] = {"packed", "strided"}, *const bits[] = {"0", "1"};
    const char *key = KEY_NAMES[k];
    int x;
    switch (k) {
    case K_TARGET:
        if (word_choice(key, v, targets, 3, &x, err, n)) return -1;
        c->target = (fa4_target)(FA4_TARGET_SM90A + x); /* the words in fa4_target's order */
        return 0;
    case K_DTYPE:
        if (word_choice(key, v, dtypes, 3, &x, err, n)) return -1;
        c->dtype = (RefDtype)x;
        return 0;
    case K_SQ: return word_int(key, v, 1, MAX_SEQLEN, &c->sq, err, n);
    case K_SK: return word_int(key, v, 1, MAX_SEQLEN, &c->sk, err, n);
    case K_HQ: return word_int(key, v, 1, MAX_HEADS, &c->hq, err, n);
    case K_QK: return word_int(key, v, 1, MAX_DEPTH, &c->qk, err, n);
    case K_BATCH: return word_int(key, v, 1, 1024, &c->batch, err, n);
    case K_HKV: return word_int(key, v, 1, MAX_HEADS, &c->hkv, err, n);
    case K_OV: return word_int(key, v, 1, MAX_DEPTH, &c->ov, err, n);
    case K_MASK: return parse_mask(v, c, err, n);
    case K_CONFIG: return word_config(v, c->config, sizeof c->config, err, n);
    case K_KROPE: return word_choice(key, v, bits, 2, &c->k_rope, err, n);
    case K_DESCALE: return parse_descale(v, c, err, n);
    case K_SCALE:
        snprintf(c->scale_text, sizeof c->scale_text, "%s", v);
        return parse_float(key, v, 0, &c->scale, err, n);
    case K_AMP:
        snprintf(c->amp_text, sizeof c->amp_text, "%s", v);
        return parse_float(key, v, 1, &c->amp, err, n);
    case K_LAYOUT: return word_choice(key, v, layouts, 2, &c->strided, err, n);
    case K_LSE: return word_choice(key, v, bits, 2, &c->lse, err, n);
    case K_SINK:
        if (!strcmp(v, "rand")) c->sink = SINK_RAND;
        else if (!strcmp(v, "-inf")) c->sink = SINK_NEG_INF;
        else if (parse_float(key, v, 0, &c->sink_x, err, n)) return errf(err, n, "sink=%s: expected rand, -inf or a number >= 0", v);
        else c->sink = SINK_ALT;
        return 0;
    case K_MOD: return word_choice(key, v, MOD_NAMES, MOD_COUNT, &c->mod, err, n);
    case K_SPLITS: return word_int(key, v, 0, FA4_MAX_SPLITS, &c->splits, err, n);
    case K_WORKSPACE: return word_choice(key, v, bits, 2, &c->workspace, err, n);
    case K_KV_EARLY: return word_choice(key, v, bits, 2, &c->kv_early, err, n);
    case K_SOFTCAP:
        snprintf(c->softcap_text, sizeof c->softcap_text, "%s", v);
        return parse_float(key, v, 0, &c->softcap, err, n);
    case K_ALIBI: return word_choice(key, v, bits, 2, &c->alibi, err, n);
    case K_LAUNCHES: return word_int(key, v, 1, 8, &c->launches, err, n);
    case K_PREV_GRID: return word_int(key, v, 0, 100000, &c->prev_grid, err, n);
    }
    return errf(err, n, "internal: key %d", k);
}

static void case_defaults(Case *c)
{
    memset(c, 0, sizeof *c);
    c->batch = 1;
    c->mask = REF_MASK_NONE;
    c->wl = c->wr = -1;
    c->lse = 1;
    c->amp = 1.0f;
    c->splits = 1;
    c->workspace = 1;
    c->launches = 1;
}

/* Required keys present, defaults that depend on others, consistency. */
static int case_finish(Case *c, const int seen[K_COUNT], char *err, size_t n)
{
    for (int k = 0; k < REQUIRED_KEYS; k++)
        if (!seen[k]) return errf(err, n, "missing required key '%s'", KEY_NAMES[k]);
    if (!seen[K_HKV]) c->hkv = c->hq;
    if (!seen[K_OV]) c->ov = c->qk;
    if (c->hq % c->hkv) return errf(err, n, "hkv=%d does not divide hq=%d", c->hkv, c->hq);
    if (c->k_rope && c->qk <= REF_ROPE_DEPTH)
        return errf(err, n, "k_rope=1 needs qk > %d (K's last %d columns go to k_rope)", REF_ROPE_DEPTH,
                    REF_ROPE_DEPTH);
    return 0;
}

/* The case syntax for the shared parser (tests/sim/harness.c). */
static void syntax_defaults(void *c) { case_defaults(c); }
static int syntax_set_key(void *c, int k, const char *v, char *err, size_t n) { return set_key(c, k, v, err, n); }
static int syntax_finish(void *c, const int *seen, char *err, size_t n) { return case_finish(c, seen, err, n); }
static void usage(FILE *f);
static const CaseSyntax SYNTAX = {"sim_mha", KEY_NAMES, K_COUNT, sizeof(Case), syntax_defaults, syntax_set_key,
                                  syntax_finish, usage, 1};
static int case_parse_line(const char *line, Case *c, char *err, size_t n) { return case_line(&SYNTAX, line, c, err, n); }

static const char *mask_text(const Case *c, char *buf, size_t n)
{
    if (c->mask == REF_MASK_NONE) snprintf(buf, n, "none");
    else if (c->mask == REF_MASK_CAUSAL) snprintf(buf, n, "causal");
    else snprintf(buf, n, "window:%d,%d", c->wl, c->wr);
    return buf;
}

static void case_format(const Case *c, char *buf, size_t n)
{
    char mt[48];
    size_t o = (size_t)snprintf(buf, n, "target=%s dtype=%s batch=%d sq=%d sk=%d hq=%d hkv=%d qk=%d ov=%d mask=%s",
                                targets_name[c->target], ref_dtype_name(c->dtype),
                                c->batch, c->sq, c->sk, c->hq, c->hkv, c->qk, c->ov, mask_text(c, mt, sizeof mt));
#define MORE(...) (o += o < n ? (size_t)snprintf(buf + o, n - o, __VA_ARGS__) : 0)
    if (c->config[0]) MORE(" config=\"%s\"", c->config);
    if (c->k_rope) MORE(" k_rope=1");
    if (c->descale_text[0]) MORE(" descale=%s", c->descale_text);
    if (c->scale_text[0]) MORE(" scale=%s", c->scale_text);
    if (c->amp_text[0]) MORE(" amp=%s", c->amp_text);
    if (c->strided) MORE(" layout=strided");
    if (!c->lse) MORE(" lse=0");
    if (c->sink == SINK_RAND) MORE(" sink=rand");
    if (c->sink == SINK_NEG_INF) MORE(" sink=-inf");
    if (c->sink == SINK_ALT) MORE(" sink=%g", (double)c->sink_x);
    if (c->mod) MORE(" mod=%s", MOD_NAMES[c->mod]);
    if (c->splits != 1) MORE(" splits=%d", c->splits);
    if (!c->workspace) MORE(" workspace=0");
    if (c->kv_early) MORE(" kv_early=1");
    if (c->softcap_text[0]) MORE(" softcap=%s", c->softcap_text);
    if (c->alibi) MORE(" alibi=1");
    if (c->launches != 1) MORE(" launches=%d", c->launches);
    if (c->prev_grid) MORE(" prev_grid=%d", c->prev_grid);
#undef MORE
}

static const uint64_t FNV_OFFSET = 0xcbf29ce484222325ull;

static void case_id(const Case *c, uint64_t seed, char id[ID_HEX + 1])
{
    char text[CASE_TEXT_MAX + 64];
    case_format(c, text, CASE_TEXT_MAX);
    size_t len = strlen(text);
    snprintf(text + len, sizeof text - len, "\nseed=%" PRIu64, seed);
    uint64_t h = fnv1a(text, strlen(text), FNV_OFFSET);
    snprintf(id, ID_HEX + 1, "%012" PRIx64, (uint64_t)(h & 0xffffffffffffull));
}

/* ---------------------------------------------------------------- inputs and layouts */

/* U(-1, 1) from 53 random bits */
static double uniform(uint64_t *s) { return (double)(splitmix64(s) >> 11) * 0x1p-53 * 2.0 - 1.0; }

/* The tensors of a case: Q K V O and, with k_rope, KR. */
enum { T_Q, T_K, T_V, T_O, T_KR, N_T };

typedef struct Layout {
    int batch, seqlen, heads, depth, elem_bytes;
    int64_t stride[3]; /* elements: batch, seq, head */
    size_t elems;      /* the buffer, padding included */
} Layout;

static Layout layout_of(int batch, int seqlen, int heads, int depth, int elem_bytes, int strided)
{
    Layout l = {batch, seqlen, heads, depth, elem_bytes, {0, 0, 0}, 0};
    int pad = strided != 0;
    l.stride[2] = depth + pad * PAD_HEAD_BYTES / elem_bytes;
    l.stride[1] = (int64_t)heads * l.stride[2] + pad * PAD_SEQ_BYTES / elem_bytes;
    l.stride[0] = (int64_t)seqlen * l.stride[1] + pad * PAD_BATCH_BYTES / elem_bytes;
    l.elems = (size_t)batch * (size_t)l.stride[0];
    return l;
}

static RefDtype out_dtype(const Case *c) { return c->dtype == REF_FP16 ? REF_FP16 : REF_BF16; }

static int case_layouts(const Case *c, Layout t[N_T])
{
    int eb = ref_dtype_bytes(c->dtype), kd = c->k_rope ? c->qk - REF_ROPE_DEPTH : c->qk;
    t[T_Q] = layout_of(c->batch, c->sq, c->hq, c->qk, eb, c->strided);
    t[T_K] = layout_of(c->batch, c->sk, c->hkv, kd, eb, c->strided);
    t[T_V] = layout_of(c->batch, c->sk, c->hkv, c->ov, eb, c->strided);
    t[T_O] = layout_of(c->batch, c->sq, c->hq, c->ov, ref_dtype_bytes(out_dtype(c)), c->strided);
    t[T_KR] = layout_of(c->batch, c->sk, c->hkv, REF_ROPE_DEPTH, eb, c->strided);
    return c->k_rope ? N_T : T_KR;
}

static int64_t elem_at(const Layout *l, int b, int s, int h, int d)
{
    return b * l->stride[0] + s * l->stride[1] + h * l->stride[2] + d;
}

/* Host input buffers: padding 0xFF (NaN in bf16, fp16 and e4m3), elements random. */
static unsigned char *make_input(const Case *c, const Layout *l, uint64_t seed, double amp)
{
    unsigned char *buf = malloc(l->elems * (size_t)l->elem_bytes);
    if (!buf) return NULL;
    memset(buf, 0xFF, l->elems * (size_t)l->elem_bytes);
    uint64_t s = seed;
    for (int b = 0; b < l->batch; b++)
        for (int i = 0; i < l->seqlen; i++)
            for (int h = 0; h < l->heads; h++)
                for (int d = 0; d < l->depth; d++) ref_store(c->dtype, buf, elem_at(l, b, i, h, d), amp * uniform(&s));
    return buf;
}

static uint64_t tensor_seed(const Case *c, uint64_t seed, int tensor)
{
    char text[CASE_TEXT_MAX];
    case_format(c, text, sizeof text);
    uint64_t h = fnv1a(text, strlen(text), FNV_OFFSET);
    uint64_t s = h ^ (seed * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(tensor + 1) << 56);
    splitmix64(&s); /* decorrelate nearby seeds */
    return s;
}

/* ---------------------------------------------------------------- the reference and the checks */

typedef enum { R_PASS, R_FAIL, R_SKIP } Verdict;

typedef struct Result {
    Verdict verdict;
    int launched, evaluated;
    double rel_l2, maxabs, lse_err;
    double rel_l2_rnd; /* against the reference that rounds as the kernel does; < 0: not modelled */
    double lse_tight;  /* max |LSE - ref| / (LSE_EXP2 + LSE_F32 |ref|) */
    double margin;     /* the largest error / bound of the bounded measures (<= 1: pass) */
    long nan, empty_bad, oob;
    int compared; /* 1: cmp_o/cmp_lse hold a comparison, -1: no stored run */
    double cmp_o, cmp_lse;
    double run_s, ref_s;
    char msg[768];
} Result;

static RefMha ref_problem(const Case *c, const Layout t[N_T], unsigned char *const host[N_T])
{
    RefMha p = {0};
    p.dtype = c->dtype;
    const int which[4] = {T_Q, T_K, T_V, T_KR};
    RefTensor *dst[4] = {&p.q, &p.k, &p.v, &p.k_rope};
    for (int i = 0; i < 4; i++) {
        if (which[i] == T_KR && !c->k_rope) continue;
        dst[i]->data = host[which[i]];
        memcpy(dst[i]->stride, t[which[i]].stride, sizeof dst[i]->stride);
    }
    p.batch = c->batch, p.seqlen_q = c->sq, p.seqlen_k = c->sk, p.heads_q = c->hq, p.heads_kv = c->hkv;
    p.qk_depth = c->qk, p.ov_depth = c->ov;
    p.mask = c->mask, p.window_left = c->wl, p.window_right = c->wr;
    p.softmax_scale = c->scale, p.q_descale = c->qd, p.k_descale = c->kd, p.v_descale = c->vd;
    return p;
}

static size_t lse_count(const Case *c) { return (size_t)c->batch * (size_t)c->hq * (size_t)c->sq; }

static double rel_l2_tol(const Case *c) { return c->dtype == REF_E4M3 ? REL_L2_TOL_E4M3 : REL_L2_TOL; }
static double rnd_l2_tol(const Case *c) { return c->dtype == REF_E4M3 ? RND_L2_TOL_E4M3 : RND_L2_TOL; }

/* Bytes of O's buffer outside its elements that are not the 0xFF poison. */
static long o_padding_written(const Layout *o, const unsigned char *raw)
{
    size_t bytes = o->elems * (size_t)o->elem_bytes;
    unsigned char *logical = calloc(bytes, 1);
    if (!logical) return -1;
    for (int b = 0; b < o->batch; b++)
        for (int i = 0; i < o->seqlen; i++)
            for (int h = 0; h < o->heads; h++)
                memset(logical + elem_at(o, b, i, h, 0) * o->elem_bytes, 1, (size_t)o->depth * o->elem_bytes);
    long n = 0;
    for (size_t i = 0; i < bytes; i++) n += !logical[i] && raw[i] != 0xFF;
    free(logical);
    return n;
}

/* O (as the kernel wrote it) and LSE (NULL: not requested) against the reference. */
static void evaluate(const Case *c, const Layout *ol, const unsigned char *o_raw, const float *lse,
                     const double *ref_o, const double *ref_o_rnd, const double *ref_lse, Result *r)
{
    double num = 0, den = 0, num_r = 0, den_r = 0;
    long o_nan = 0;
    r->maxabs = r->lse_err = r->lse_tight = 0;
    r->nan = r->empty_bad = 0;
    RefDtype od = out_dtype(c);
    for (int b = 0; b < c->batch; b++)
        for (int i = 0; i < c->sq; i++)
            for (int h = 0; h < c->hq; h++) {
                size_t li = ((size_t)b * c->hq + h) * c->sq + i;
                const double *ref_row = ref_o + (((size_t)b * c->sq + i) * c->hq + h) * c->ov;
                int empty = isinf(ref_lse[li]);
                for (int d = 0; d < c->ov; d++) {
                    double x = ref_load(od, o_raw, elem_at(ol, b, i, h, d)), y = ref_row[d];
                    if (isnan(x)) {
                        r->nan++, o_nan++;
                        continue;
                    }
                    num += (x - y) * (x - y);
                    den += y * y;
                    if (ref_o_rnd) {
                        double yr = ref_round(od, ref_o_rnd[(size_t)(ref_row - ref_o) + (size_t)d]);
                        num_r += (x - yr) * (x - yr), den_r += yr * yr;
                    }
                    if (fabs(x - y) > r->maxabs) r->maxabs = fabs(x - y);
                    if (empty && x != 0.0) r->empty_bad++;
                }
                if (!lse) continue;
                double g = lse[li];
                if (isnan(g)) r->nan++;
                else if (empty) r->empty_bad += !(isinf(g) && g < 0);
                else {
                    double e = isinf(g) ? INFINITY : fabs(g - ref_lse[li]);
                    r->lse_err = fmax(r->lse_err, e / fmax(1.0, fabs(ref_lse[li])));
                    r->lse_tight = fmax(r->lse_tight, e / (LSE_EXP2 + LSE_F32 * fabs(ref_lse[li])));
                }
            }
    r->rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    r->rel_l2_rnd = !ref_o_rnd ? -1 : den_r > 0 ? sqrt(num_r / den_r) : sqrt(num_r);
    if (o_nan) r->rel_l2 = r->maxabs = INFINITY, r->rel_l2_rnd = ref_o_rnd ? INFINITY : -1; /* unbounded */
    r->margin = fmax(fmax(r->rel_l2 / rel_l2_tol(c), r->lse_err / LSE_TOL), r->lse_tight);
    if (r->rel_l2_rnd >= 0) r->margin = fmax(r->margin, r->rel_l2_rnd / rnd_l2_tol(c));
    if (r->nan || isnan(r->margin)) r->margin = INFINITY;
}

static int numerics_pass(const Case *c, const Result *r)
{
    return !r->nan && !r->empty_bad && !r->oob && r->rel_l2 <= rel_l2_tol(c) && r->lse_err <= LSE_TOL &&
           r->lse_tight <= 1 && r->rel_l2_rnd <= rnd_l2_tol(c);
}

/* ---------------------------------------------------------------- the driver (dlopen) */

/* ---------------------------------------------------------------- one case on the device */

typedef struct Env {
    Opts opt;
    Cu cu;
    fa4_ctx *fa[4]; /* per fa4_target */
} Env;

/* Everything one case holds; freed by run_free. */
typedef struct Run {
    Layout t[N_T];
    int nt;
    unsigned char *host[N_T]; /* inputs; host[T_O] receives O */
    float *lse;
    CUdeviceptr dev[N_T], dlse;
    double *ref_o, *ref_lse;
    double *ref_o_rnd;         /* the rounding-aware reference's O (NULL: not modelled) */
    char cfg[512];             /* the kernel config the runtime ran ("" when unknown) */
    float *sink, *aux;         /* host: sink [hq], the mod's aux table */
    double *sink_d;            /* the sinks as the reference reads them */
    float *alibi;              /* host: ALiBi slopes [hq] */
    double *alibi_d;
    CUdeviceptr dsink, daux, dalibi;
    int naux;
    CUdeviceptr dws;           /* split-KV workspace */
    size_t ws_bytes;
} Run;

static void run_free(Env *env, Run *run)
{
    for (int i = 0; i < N_T; i++) {
        free(run->host[i]);
        if (run->dev[i]) env->cu.MemFree(run->dev[i]);
    }
    if (run->dlse) env->cu.MemFree(run->dlse);
    if (run->dsink) env->cu.MemFree(run->dsink);
    if (run->daux) env->cu.MemFree(run->daux);
    if (run->dalibi) env->cu.MemFree(run->dalibi);
    if (run->dws) env->cu.MemFree(run->dws);
    free(run->sink), free(run->aux), free(run->sink_d), free(run->alibi), free(run->alibi_d);
    free(run->lse), free(run->ref_o), free(run->ref_lse), free(run->ref_o_rnd);
}

static int result_fail(Result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int result_fail(Result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    r->verdict = R_FAIL;
    return -1;
}

#define CU_TRY(r, res, what)                                                                   \
    do {                                                                                       \
        CUresult cu_r_ = (r);                                                                  \
        if (cu_r_) return result_fail(res, "%s: %s", what, cu_error(&env->cu, cu_r_));        \
    } while (0)

/* Sinks and the mod's aux table: host values (seeded like the tensors) and device copies. */
static int stage_features(Env *env, const Case *c, Run *run, Result *res)
{
    uint64_t st = tensor_seed(c, env->opt.seed, N_T);
    if (c->sink) {
        run->sink = malloc(sizeof(float) * (size_t)c->hq);
        run->sink_d = malloc(sizeof(double) * (size_t)c->hq);
        if (!run->sink || !run->sink_d) return result_fail(res, "out of host memory");
        for (int h = 0; h < c->hq; h++) {
            float v = c->sink == SINK_RAND ? (float)(2.0 * uniform(&st)) : c->sink == SINK_NEG_INF ? -INFINITY
                      : h % 2 ? -c->sink_x : c->sink_x;
            run->sink[h] = v;
            run->sink_d[h] = v;
        }
        CU_TRY(env->cu.MemAlloc(&run->dsink, sizeof(float) * (size_t)c->hq), res, "cuMemAlloc (sink)");
        CU_TRY(env->cu.MemcpyHtoD(run->dsink, run->sink, sizeof(float) * (size_t)c->hq), res, "cuMemcpyHtoD (sink)");
    }
    if (c->alibi) {
        run->alibi = malloc(sizeof(float) * (size_t)c->hq);
        run->alibi_d = malloc(sizeof(double) * (size_t)c->hq);
        if (!run->alibi || !run->alibi_d) return result_fail(res, "out of host memory");
        for (int h = 0; h < c->hq; h++) run->alibi_d[h] = run->alibi[h] = (float)exp2(-8.0 * (h + 1) / c->hq);
        CU_TRY(env->cu.MemAlloc(&run->dalibi, sizeof(float) * (size_t)c->hq), res, "cuMemAlloc (alibi)");
        CU_TRY(env->cu.MemcpyHtoD(run->dalibi, run->alibi, sizeof(float) * (size_t)c->hq), res, "cuMemcpyHtoD (alibi)");
    }
    run->naux = c->mod == MOD_ALIBI ? c->hq : c->mod == MOD_RELBIAS ? 2 * RELBIAS_R + 1 : 0;
    if (run->naux) {
        if (!(run->aux = malloc(sizeof(float) * (size_t)run->naux))) return result_fail(res, "out of host memory");
        for (int i = 0; i < run->naux; i++)
            run->aux[i] = c->mod == MOD_ALIBI ? (float)exp2(-8.0 * (i + 1) / c->hq) : (float)(2.0 * uniform(&st));
        CU_TRY(env->cu.MemAlloc(&run->daux, sizeof(float) * (size_t)run->naux), res, "cuMemAlloc (aux)");
        CU_TRY(env->cu.MemcpyHtoD(run->daux, run->aux, sizeof(float) * (size_t)run->naux), res, "cuMemcpyHtoD (aux)");
    }
    return 0;
}

/* Host inputs, device buffers, uploads, poison. */
static int stage_inputs(Env *env, const Case *c, Run *run, Result *res)
{
    run->nt = case_layouts(c, run->t);
    for (int i = 0; i < run->nt; i++) {
        const Layout *l = &run->t[i];
        size_t bytes = l->elems * (size_t)l->elem_bytes;
        run->host[i] = i == T_O ? malloc(bytes)
                                : make_input(c, l, tensor_seed(c, env->opt.seed, i), i == T_Q ? c->amp : 1.0);
        if (!run->host[i]) return result_fail(res, "out of host memory (%zu bytes)", bytes);
        CU_TRY(env->cu.MemAlloc(&run->dev[i], bytes), res, "cuMemAlloc");
        if (i == T_O) CU_TRY(env->cu.MemsetD8(run->dev[i], 0xFF, bytes), res, "cuMemsetD8 (O poison)");
        else CU_TRY(env->cu.MemcpyHtoD(run->dev[i], run->host[i], bytes), res, "cuMemcpyHtoD");
    }
    if (stage_features(env, c, run, res)) return -1;
    size_t lb = lse_count(c) * sizeof(float);
    if (!(run->lse = malloc(lb))) return result_fail(res, "out of host memory");
    if (c->lse) {
        CU_TRY(env->cu.MemAlloc(&run->dlse, lb), res, "cuMemAlloc (lse)");
        CU_TRY(env->cu.MemsetD8(run->dlse, 0xFF, lb), res, "cuMemsetD8 (LSE poison)");
    }
    return 0;
}

static fa4_mha_args case_args(const Case *c, const Run *run)
{
    static const fa4_dtype dt[3] = {[REF_BF16] = FA4_BF16, [REF_FP16] = FA4_FP16, [REF_E4M3] = FA4_E4M3};
    static const fa4_mask mk[3] = {[REF_MASK_NONE] = FA4_MASK_NONE, [REF_MASK_CAUSAL] = FA4_MASK_CAUSAL,
                                   [REF_MASK_WINDOW] = FA4_MASK_WINDOW};
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    a.dtype = dt[c->dtype];
    a.q = (const void *)(uintptr_t)run->dev[T_Q];
    a.k = (const void *)(uintptr_t)run->dev[T_K];
    a.v = (const void *)(uintptr_t)run->dev[T_V];
    a.o = (void *)(uintptr_t)run->dev[T_O];
    a.lse = c->lse ? (float *)(uintptr_t)run->dlse : NULL;
    a.batch = c->batch, a.seqlen_q = c->sq, a.seqlen_k = c->sk, a.heads_q = c->hq, a.heads_kv = c->hkv;
    a.qk_depth = c->qk, a.ov_depth = c->ov;
    memcpy(a.q_stride, run->t[T_Q].stride, sizeof a.q_stride);
    memcpy(a.k_stride, run->t[T_K].stride, sizeof a.k_stride);
    memcpy(a.v_stride, run->t[T_V].stride, sizeof a.v_stride);
    memcpy(a.o_stride, run->t[T_O].stride, sizeof a.o_stride);
    a.softmax_scale = c->scale;
    a.mask = mk[c->mask], a.window_left = c->wl, a.window_right = c->wr;
    a.config = c->config[0] ? c->config : NULL;
    if (c->k_rope) {
        a.k_rope = (const void *)(uintptr_t)run->dev[T_KR];
        memcpy(a.k_rope_stride, run->t[T_KR].stride, sizeof a.k_rope_stride);
    }
    a.q_descale = c->qd, a.k_descale = c->kd, a.v_descale = c->vd;
    a.sink = c->sink ? (const float *)(uintptr_t)run->dsink : NULL;
    a.score_mod = MOD_SRC[c->mod];
    a.score_mod_aux = run->naux ? (const void *)(uintptr_t)run->daux : NULL;
    a.num_splits = c->splits;
    a.workspace = run->dws ? (void *)(uintptr_t)run->dws : NULL;
    a.workspace_size = run->ws_bytes;
    a.kv_early = c->kv_early;
    a.softcap = c->softcap;
    a.alibi_slopes = c->alibi ? (const float *)(uintptr_t)run->dalibi : NULL;
    return a;
}

static int fa4_for(Env *env, fa4_target t, fa4_ctx **out, Result *res)
{
    if (!env->fa[t]) {
        fa4_options o = FA4_OPTIONS_INIT;
        o.target = t;
        if (fa4_create(&env->fa[t], &o) != FA4_OK)
            return result_fail(res, "fa4_create: %s", fa4_last_error(NULL));
    }
    *out = env->fa[t];
    return 0;
}

/* fa4_mha_fwd, synchronize, copy O and LSE back. */
static int launch(Env *env, const Case *c, Run *run, Result *res)
{
    fa4_ctx *fa = NULL;
    if (fa4_for(env, c->target, &fa, res)) return -1;
    fa4_mha_args a = case_args(c, run);
    if (c->splits != 1) {
        int n = 0;
        fa4_status ss = fa4_mha_split_count(fa, &a, &n, &run->ws_bytes);
        if (ss != FA4_OK) return result_fail(res, "fa4_mha_split_count: %s: %s", fa4_status_string(ss), fa4_last_error(fa));
        if (!c->workspace) run->ws_bytes = 0; /* the runtime picks for a call without one */
        if (run->ws_bytes) {
            CU_TRY(env->cu.MemAlloc(&run->dws, run->ws_bytes), res, "cuMemAlloc (workspace)");
            CU_TRY(env->cu.MemsetD8(run->dws, 0xFF, run->ws_bytes), res, "cuMemsetD8 (workspace poison)");
        }
        a = case_args(c, run);
        if (!env->opt.quiet && c->workspace) printf("  splits: %d (workspace %zu bytes)\n", n, run->ws_bytes);
        else if (!env->opt.quiet) /* split_count assumes a workspace; the kernel line names what runs */
            printf("  splits: the runtime's pick without a workspace (sm90a: the kernel's cluster=N)\n");
    }
    if (fa4_mha_config(fa, &a, run->cfg, sizeof run->cfg) != FA4_OK) run->cfg[0] = 0;
    if (!env->opt.quiet && run->cfg[0]) printf("  kernel: %s\n", run->cfg);
    const Layout *o = &run->t[T_O];
    double t0 = now_s();
    char pg[16];
    snprintf(pg, sizeof pg, "%d", c->prev_grid);
    setenv("FA4SIM_PREV_GRID", pg, 1); /* read by the simulator at each launch; a GPU's driver ignores it */
    for (int i = 0; i < c->launches; i++) {
        if (i) { /* the launch before must leave nothing this one could pass off as its own */
            CU_TRY(env->cu.MemsetD8(run->dev[T_O], 0xFF, o->elems * (size_t)o->elem_bytes), res, "cuMemsetD8 (O)");
            if (c->lse) CU_TRY(env->cu.MemsetD8(run->dlse, 0xFF, lse_count(c) * sizeof(float)), res, "cuMemsetD8");
        }
        fa4_status s = fa4_mha_fwd(fa, &a, NULL);
        if (s != FA4_OK) {
            result_fail(res, "fa4_mha_fwd: %s: %s", fa4_status_string(s), fa4_last_error(fa));
            if (s == FA4_ERR_UNSUPPORTED && !env->opt.no_skip) res->verdict = R_SKIP;
            return -1;
        }
        res->launched = 1;
        CU_TRY(env->cu.CtxSynchronize(), res, "cuCtxSynchronize after the kernel");
    }
    res->run_s = now_s() - t0;
    CU_TRY(env->cu.MemcpyDtoH(run->host[T_O], run->dev[T_O], o->elems * (size_t)o->elem_bytes), res, "cuMemcpyDtoH (O)");
    if (c->lse) CU_TRY(env->cu.MemcpyDtoH(run->lse, run->dlse, lse_count(c) * sizeof(float)), res, "cuMemcpyDtoH (LSE)");
    return 0;
}

/* The reference's side of the mods (MOD_SRC), in double. */
typedef struct { const Case *c; const float *aux; } ModCtx;

static double mod_ref(const void *ctx, double s, int b, int h, int q, int k)
{
    const ModCtx *m = ctx;
    switch (m->c->mod) {
    case MOD_SOFTCAP30: return 30.0 * tanh(s / 30.0);
    case MOD_SOFTCAP50: return 50.0 * tanh(s / 50.0);
    case MOD_ALIBI: return s - (double)m->aux[h] * fabs((double)(q - k));
    case MOD_RELBIAS: {
        int d = k - q < -RELBIAS_R ? -RELBIAS_R : k - q > RELBIAS_R ? RELBIAS_R : k - q;
        return s + (double)m->aux[d + RELBIAS_R];
    }
    case MOD_ROWDROP: return (q + h + b) % 3 == 1 ? -INFINITY : s;
    }
    return s;
}

/* The value of config word key= in cfg (the runtime's kernel config), or dflt. */
static int config_int(const char *cfg, const char *key, int dflt)
{
    size_t n = strlen(key);
    for (const char *w = cfg; w && *w; w = strchr(w, ' ') ? strchr(w, ' ') + 1 : NULL)
        if (!strncmp(w, key, n) && w[n] == '=') return atoi(w + n + 1);
    return dflt;
}

/* The rounding model of the kernel the runtime ran (RefRound), read from its config: P.V takes P in the
 * config's dtype (bf16, fp16, e4m3: the cvt.rn before the P.V MMA in the PTX), KV blocks of bn keys visited
 * from the last one down (the PTX's block loop), the running max raised past `rescale` (log2 units).
 * 0 where the model does not describe the run: no config, or split-KV (each split keeps its own max). */
static int rounding_model(const Case *c, const char *cfg, RefRound *r)
{
    memset(r, 0, sizeof *r);
    if (!cfg[0] || c->splits != 1 || config_int(cfg, "split", 0) || config_int(cfg, "cluster", 1) > 1) return 0;
    r->on = 1;
    r->p_type = c->dtype;
    r->block = config_int(cfg, "bn", 128);
    r->rescale_log2 = config_int(cfg, "rescale", 0);
    r->descending = 1;
    return 1;
}

static int reference(const Case *c, Run *run, Result *res)
{
    size_t on = (size_t)c->batch * c->sq * c->hq * c->ov;
    run->ref_o = malloc(on * sizeof(double));
    run->ref_lse = malloc(lse_count(c) * sizeof(double));
    if (!run->ref_o || !run->ref_lse) return result_fail(res, "out of host memory for the reference");
    RefMha p = ref_problem(c, run->t, run->host);
    p.sink = run->sink_d;
    p.softcap = c->softcap;
    p.alibi = run->alibi_d;
    ModCtx mc = {c, run->aux};
    if (c->mod) p.score_mod = mod_ref, p.mod_ctx = &mc;
    char err[256];
    double t0 = now_s();
    if (rounding_model(c, run->cfg, &p.round) && !(p.o_rnd = run->ref_o_rnd = malloc(on * sizeof(double))))
        return result_fail(res, "out of host memory for the reference");
    if (ref_mha_fwd(&p, run->ref_o, run->ref_lse, err, sizeof err)) return result_fail(res, "reference: %s", err);
    res->ref_s = now_s() - t0;
    return 0;
}

/* ---------------------------------------------------------------- dumps */

static void dump_path(const char *dir, const char *id, char *buf, size_t n) { snprintf(buf, n, "%s/%s.bin", dir, id); }

static int dump_write(const Env *env, const Case *c, const char *id, const Run *run, Result *res)
{
    char path[4096], text[CASE_TEXT_MAX];
    dump_path(env->opt.dump_dir, id, path, sizeof path);
    case_format(c, text, sizeof text);
    const Layout *o = &run->t[T_O];
    size_t ob = o->elems * (size_t)o->elem_bytes, ln = c->lse ? lse_count(c) : 0;
    FILE *f = fopen(path, "wb");
    if (!f) return result_fail(res, "--dump: cannot create %s: %s", path, strerror(errno));
    fprintf(f, "fa4sim-dump 1 id=%s seed=%" PRIu64 " o_bytes=%zu lse_floats=%zu\n%s\n", id, env->opt.seed, ob, ln,
            text);
    int ok = fwrite(run->host[T_O], 1, ob, f) == ob && fwrite(run->lse, sizeof(float), ln, f) == ln;
    if (fclose(f) || !ok) return result_fail(res, "--dump: writing %s failed", path);
    return 0;
}

/* Reads a dump of this case; 1 when there is none. */
static int dump_read(const char *path, const char *text, size_t ob, size_t ln, unsigned char *o, float *lse,
                     char *err, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? 1 : errf(err, n, "--compare: cannot open %s: %s", path, strerror(errno));
    char head[256], stored[CASE_TEXT_MAX + 2];
    size_t sob = 0, sln = 0;
    int rc = 0;
    if (!fgets(head, sizeof head, f) || sscanf(head, "fa4sim-dump 1 id=%*s seed=%*s o_bytes=%zu lse_floats=%zu", &sob,
                                                &sln) != 2 || !fgets(stored, sizeof stored, f))
        rc = errf(err, n, "--compare: %s is not a sim_mha dump", path);
    else if (stored[strcspn(stored, "\n")] = 0, strcmp(stored, text))
        rc = errf(err, n, "--compare: %s holds another case: %s", path, stored);
    else if (sob != ob || sln != ln)
        rc = errf(err, n, "--compare: %s holds %zu O bytes and %zu LSE floats; this case has %zu and %zu", path, sob,
                  sln, ob, ln);
    else if (fread(o, 1, ob, f) != ob || fread(lse, sizeof(float), ln, f) != ln)
        rc = errf(err, n, "--compare: %s is truncated", path);
    fclose(f);
    return rc;
}

/* |a - b| where equal infinities and two NaNs count as 0, one NaN as inf. */
static int compare_stored(const Env *env, const Case *c, const char *id, const Run *run, Result *res)
{
    char path[4096], text[CASE_TEXT_MAX], err[768];
    dump_path(env->opt.compare_dir, id, path, sizeof path);
    case_format(c, text, sizeof text);
    const Layout *o = &run->t[T_O];
    size_t ob = o->elems * (size_t)o->elem_bytes, ln = c->lse ? lse_count(c) : 0;
    unsigned char *so = malloc(ob ? ob : 1);
    float *sl = malloc(ln ? ln * sizeof(float) : 1);
    int rc = so && sl ? dump_read(path, text, ob, ln, so, sl, err, sizeof err) : errf(err, sizeof err, "out of memory");
    if (rc == 0) {
        RefDtype od = out_dtype(c);
        res->compared = 1;
        res->cmp_o = res->cmp_lse = 0;
        for (int b = 0; b < c->batch; b++)
            for (int i = 0; i < c->sq; i++)
                for (int h = 0; h < c->hq; h++)
                    for (int d = 0; d < c->ov; d++) {
                        int64_t e = elem_at(o, b, i, h, d);
                        res->cmp_o = fmax(res->cmp_o, abs_diff(ref_load(od, run->host[T_O], e), ref_load(od, so, e)));
                    }
        for (size_t i = 0; i < ln; i++) res->cmp_lse = fmax(res->cmp_lse, abs_diff(run->lse[i], sl[i]));
    } else if (rc == 1) {
        res->compared = -1;
        rc = 0;
    } else {
        result_fail(res, "%s", err);
    }
    free(so), free(sl);
    return rc;
}

/* ---------------------------------------------------------------- run and report */

static void run_case(Env *env, const Case *c, const char *id, Result *res)
{
    Run run;
    memset(&run, 0, sizeof run);
    memset(res, 0, sizeof *res);
    if (stage_inputs(env, c, &run, res) || launch(env, c, &run, res) || reference(c, &run, res)) goto out;
    res->evaluated = 1;
    res->oob = o_padding_written(&run.t[T_O], run.host[T_O]);
    evaluate(c, &run.t[T_O], run.host[T_O], c->lse ? run.lse : NULL, run.ref_o, run.ref_o_rnd, run.ref_lse, res);
    res->verdict = numerics_pass(c, res) ? R_PASS : R_FAIL;
    if (env->opt.dump_dir && dump_write(env, c, id, &run, res)) goto out;
    if (env->opt.compare_dir && compare_stored(env, c, id, &run, res) == 0 && res->compared == 1 &&
        (res->cmp_o > CMP_O_TOL || res->cmp_lse > CMP_LSE_TOL)) {
        res->verdict = R_FAIL;
        snprintf(res->msg, sizeof res->msg, "differs from the stored run by more than %g (O) / %g (LSE)", CMP_O_TOL,
                 CMP_LSE_TOL);
    }
out:
    run_free(env, &run);
}

static void report(const Env *env, const Case *c, const char *id, const Result *r)
{
    static const char *const v[3] = {"PASS", "FAIL", "SKIP"};
    char text[CASE_TEXT_MAX];
    case_format(c, text, sizeof text);
    printf("%s %s %s", v[r->verdict], id, text);
    if (r->evaluated) {
        printf(" relL2=%.3e maxabs=%.3e lse_err=%.3e nan=%ld", r->rel_l2, r->maxabs, r->lse_err, r->nan);
        if (r->rel_l2_rnd >= 0) printf(" relL2_rnd=%.3e", r->rel_l2_rnd);
        printf(" lse_tight=%.2f margin=%.2f", r->lse_tight, r->margin);
        if (r->empty_bad) printf(" empty_bad=%ld", r->empty_bad);
        if (r->oob) printf(" oob=%ld", r->oob);
        if (r->compared == 1) printf(" cmp_o=%.3e cmp_lse=%.3e", r->cmp_o, r->cmp_lse);
        if (r->compared == -1) printf(" cmp=none");
    }
    if (r->verdict == R_FAIL && !r->msg[0] && r->evaluated)
        printf(" (bounds: relL2 <= %g, relL2_rnd <= %g, lse_err <= %g, |LSE - ref| <= %g + %g |ref|, no NaN, "
               "empty rows O=0 LSE=-inf, no writes in padding)", rel_l2_tol(c), rnd_l2_tol(c), LSE_TOL, LSE_EXP2, LSE_F32);
    if (r->msg[0]) printf(" : %s", r->msg);
    printf("\n");
    if (!env->opt.quiet && r->launched) printf("  time: fa4_mha_fwd + synchronize %.3f s (a cold cache compiles), reference %.3f s\n", r->run_s, r->ref_s);
    fflush(stdout);
}

/* ---------------------------------------------------------------- case lists */

/* ---------------------------------------------------------------- --plan */

/* The config fa4_mha_config picks, with aligned placeholder pointers (it
 * reads no memory and, with an explicit target, needs no driver). */
static int plan_cases(const Env *env, const CaseList *l)
{
    int bad = 0;
    fa4_ctx *fa[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < l->n; i++) {
        const Case *c = &((const Case *)l->v)[i];
        Run run;
        memset(&run, 0, sizeof run);
        run.nt = case_layouts(c, run.t);
        for (int t = 0; t < N_T; t++) run.dev[t] = (CUdeviceptr)(0x100000000ull * (t + 1));
        run.dlse = 0x900000000ull;
        fa4_mha_args a = case_args(c, &run);
        char id[ID_HEX + 1], text[CASE_TEXT_MAX], cfg[512];
        case_id(c, env->opt.seed, id);
        case_format(c, text, sizeof text);
        if (!fa[c->target]) {
            fa4_options o = FA4_OPTIONS_INIT;
            o.target = c->target;
            if (fa4_create(&fa[c->target], &o) != FA4_OK) {
                fprintf(stderr, "sim_mha: fa4_create: %s\n", fa4_last_error(NULL));
                return 2;
            }
        }
        fa4_status s = fa4_mha_config(fa[c->target], &a, cfg, sizeof cfg);
        printf("%s %s\n", id, text);
        if (s == FA4_OK) printf("  -> %s\n", cfg);
        else printf("  -> REFUSED %s: %s\n", fa4_status_string(s), fa4_last_error(fa[c->target])), bad++;
    }
    for (int t = 0; t < 4; t++) fa4_destroy(fa[t]);
    printf("sim_mha --plan: %d cases, %d refused\n", l->n, bad);
    return bad ? 1 : 0;
}

/* ---------------------------------------------------------------- --self-test */

static int same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void st_codecs(Checks *k)
{
    const struct { RefDtype t; uint32_t bits; double v; } known[] = {
        {REF_BF16, 0x3F80, 1.0}, {REF_BF16, 0xC000, -2.0}, {REF_BF16, 0x0001, 0x1p-133},
        {REF_BF16, 0x7F7F, 0x1.fep127}, {REF_BF16, 0x7F80, INFINITY}, {REF_BF16, 0x7FC0, NAN},
        {REF_FP16, 0x3C00, 1.0}, {REF_FP16, 0x7BFF, 65504.0}, {REF_FP16, 0x0001, 0x1p-24},
        {REF_FP16, 0x0400, 0x1p-14}, {REF_FP16, 0xFC00, -INFINITY}, {REF_FP16, 0x7E00, NAN},
        {REF_E4M3, 0x38, 1.0}, {REF_E4M3, 0x7E, 448.0}, {REF_E4M3, 0x01, 0x1p-9}, {REF_E4M3, 0x08, 0x1p-6},
        {REF_E4M3, 0xB8, -1.0}, {REF_E4M3, 0x7F, NAN}, {REF_E4M3, 0xFF, NAN}, {REF_E4M3, 0x78, 256.0},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        unsigned char b[2] = {(unsigned char)(known[i].bits & 0xFF), (unsigned char)(known[i].bits >> 8)};
        double v = ref_load(known[i].t, b, 0);
        check(k, same(v, known[i].v), "%s 0x%x decodes to %a, expected %a", ref_dtype_name(known[i].t),
              known[i].bits, v, known[i].v);
    }
    /* every code that is a number encodes back to itself */
    for (int t = REF_BF16; t <= REF_E4M3; t++) {
        int bad = 0;
        uint32_t count = t == REF_E4M3 ? 256 : 65536;
        for (uint32_t bits = 0; bits < count; bits++) {
            unsigned char b[2] = {(unsigned char)(bits & 0xFF), (unsigned char)(bits >> 8)}, e[2] = {0, 0};
            double v = ref_load((RefDtype)t, b, 0);
            if (isnan(v)) continue;
            ref_store((RefDtype)t, e, 0, v);
            bad += memcmp(b, e, (size_t)ref_dtype_bytes((RefDtype)t)) != 0;
        }
        check(k, !bad, "%s: %d codes do not round-trip", ref_dtype_name((RefDtype)t), bad);
    }
    const struct { RefDtype t; double x; uint32_t bits; } rne[] = {
        {REF_BF16, 1.0 + 0x1p-8, 0x3F80},     /* tie to even (down) */
        {REF_BF16, 1.0 + 3 * 0x1p-8, 0x3F82}, /* tie to even (up) */
        {REF_BF16, 1.0 + 0x1p-8 + 0x1p-30, 0x3F81},
        {REF_FP16, 65520.0, 0x7C00},          /* max + half ulp: infinity */
        {REF_FP16, 0x1p-25, 0x0000},          /* half the smallest subnormal: even = 0 */
        {REF_FP16, 0x1.8p-24, 0x0002},
        {REF_E4M3, 1000.0, 0x7E},             /* saturates */
        {REF_E4M3, -1000.0, 0xFE},
        {REF_E4M3, 0x1p-10, 0x00},
        {REF_E4M3, 1.0625, 0x38},             /* 1 + 1/16: tie, even */
        {REF_E4M3, 1.1875, 0x3A},             /* 1 + 3/16: tie, even (up) */
    };
    for (size_t i = 0; i < sizeof rne / sizeof rne[0]; i++) {
        unsigned char e[2] = {0, 0};
        ref_store(rne[i].t, e, 0, rne[i].x);
        uint32_t got = e[0] | (rne[i].t == REF_E4M3 ? 0u : (uint32_t)e[1] << 8);
        check(k, got == rne[i].bits, "%s encode(%a) = 0x%x, expected 0x%x", ref_dtype_name(rne[i].t), rne[i].x, got,
              rne[i].bits);
    }
}

static void st_masks(Checks *k)
{
    const struct { RefMask m; int wl, wr, sq, sk; int counts[6]; } cases[] = {
        {REF_MASK_NONE, -1, -1, 3, 5, {5, 5, 5}},
        {REF_MASK_CAUSAL, -1, -1, 4, 4, {1, 2, 3, 4}},
        {REF_MASK_CAUSAL, -1, -1, 2, 5, {4, 5}},          /* bottom-right: row 0 sees keys 0..3 */
        {REF_MASK_CAUSAL, -1, -1, 5, 2, {0, 0, 0, 1, 2}}, /* the first 3 rows see nothing */
        {REF_MASK_CAUSAL, -1, -1, 1, 6, {6}},
        {REF_MASK_WINDOW, 1, 0, 4, 4, {1, 2, 2, 2}},
        {REF_MASK_WINDOW, 0, 1, 4, 4, {2, 2, 2, 1}},
        {REF_MASK_WINDOW, -1, 0, 4, 4, {1, 2, 3, 4}},     /* = causal */
        {REF_MASK_WINDOW, -1, -1, 3, 4, {4, 4, 4}},       /* = none */
        {REF_MASK_WINDOW, 2, -1, 4, 6, {6, 5, 4, 3}},     /* off 2: row i sees i..5 */
        {REF_MASK_WINDOW, 0, 0, 6, 3, {0, 0, 0, 1, 1, 1}},
        {REF_MASK_WINDOW, 1, 1, 2, 8, {3, 2}},            /* off 6: rows see 5..7, 6..7 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int i = 0; i < cases[c].sq; i++) {
            int lo, hi, n = ref_visible(cases[c].m, cases[c].wl, cases[c].wr, cases[c].sq, cases[c].sk, i, &lo, &hi);
            check(k, n == cases[c].counts[i] && (n ? hi - lo + 1 == n : lo > hi),
                  "mask %d (%d,%d) sq %d sk %d row %d: %d keys [%d, %d], expected %d", (int)cases[c].m, cases[c].wl,
                  cases[c].wr, cases[c].sq, cases[c].sk, i, n, lo, hi, cases[c].counts[i]);
        }
}

/* The textbook formula, written apart from ref_mha.c's loops: every key the
 * mask admits (tested one by one), exp without max subtraction (the inputs
 * are small), K as one tensor of qk columns. */
static void naive(const RefMha *p, const double *q, const double *kf, const double *v, double *o, double *lse)
{
    int g = p->heads_q / p->heads_kv, off = p->seqlen_k - p->seqlen_q;
    double scale = (p->softmax_scale ? p->softmax_scale : 1 / sqrt(p->qk_depth)) * (p->q_descale ? p->q_descale : 1) *
                   (p->k_descale ? p->k_descale : 1);
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++) {
                double l = 0, acc[64] = {0};
                for (int j = 0; j < p->seqlen_k; j++) {
                    int ok = p->mask == REF_MASK_NONE || (p->mask == REF_MASK_CAUSAL && j <= i + off) ||
                             (p->mask == REF_MASK_WINDOW && (p->window_left < 0 || j >= i + off - p->window_left) &&
                              (p->window_right < 0 || j <= i + off + p->window_right));
                    if (!ok) continue;
                    double s = 0;
                    for (int d = 0; d < p->qk_depth; d++)
                        s += q[(((size_t)b * p->seqlen_q + i) * p->heads_q + h) * p->qk_depth + d] *
                             kf[(((size_t)b * p->seqlen_k + j) * p->heads_kv + h / g) * p->qk_depth + d];
                    double e = exp(scale * s);
                    l += e;
                    for (int d = 0; d < p->ov_depth; d++)
                        acc[d] += e * v[(((size_t)b * p->seqlen_k + j) * p->heads_kv + h / g) * p->ov_depth + d];
                }
                for (int d = 0; d < p->ov_depth; d++)
                    o[(((size_t)b * p->seqlen_q + i) * p->heads_q + h) * p->ov_depth + d] =
                        l > 0 ? acc[d] / l * (p->v_descale ? p->v_descale : 1) : 0;
                lse[((size_t)b * p->heads_q + h) * p->seqlen_q + i] = l > 0 ? log(l) : -INFINITY;
            }
}

/* One small problem through ref_mha_fwd (from stored, possibly strided and
 * rope-split tensors) and through naive(); returns the max abs difference of
 * O and LSE (inf where one is -inf and the other not). */
static double st_one(Checks *k, const Case *c, uint64_t seed)
{
    enum { NAIVE_MAX_OV = 64 }; /* naive()'s accumulator */
    if (c->ov > NAIVE_MAX_OV) {
        check(k, 0, "self-test problem with ov %d > %d", c->ov, NAIVE_MAX_OV);
        return INFINITY;
    }
    Layout t[N_T];
    case_layouts(c, t);
    unsigned char *host[N_T] = {0};
    for (int i = 0; i < N_T; i++)
        if (i != T_O) host[i] = make_input(c, &t[i], seed + (uint64_t)i, i == T_Q ? c->amp : 1.0);
    RefMha p = ref_problem(c, t, host);
    if (!c->k_rope) p.k_rope.data = NULL;
    size_t nq = (size_t)c->batch * c->sq * c->hq, nk = (size_t)c->batch * c->sk * c->hkv;
    double *q = malloc(nq * c->qk * sizeof(double)), *kf = malloc(nk * c->qk * sizeof(double));
    double *v = malloc(nk * c->ov * sizeof(double)), *o1 = malloc(nq * c->ov * sizeof(double));
    double *o2 = malloc(nq * c->ov * sizeof(double)), *l1 = malloc(nq * sizeof(double)), *l2 = malloc(nq * sizeof(double));
    int kd = c->k_rope ? c->qk - REF_ROPE_DEPTH : c->qk;
    for (int b = 0; b < c->batch; b++) {
        for (int i = 0; i < c->sq; i++)
            for (int h = 0; h < c->hq; h++)
                for (int d = 0; d < c->qk; d++)
                    q[(((size_t)b * c->sq + i) * c->hq + h) * c->qk + d] = ref_load(c->dtype, host[T_Q], elem_at(&t[T_Q], b, i, h, d));
        for (int j = 0; j < c->sk; j++)
            for (int h = 0; h < c->hkv; h++) {
                size_t r = ((size_t)b * c->sk + j) * c->hkv + h;
                for (int d = 0; d < c->qk; d++)
                    kf[r * c->qk + d] = d < kd ? ref_load(c->dtype, host[T_K], elem_at(&t[T_K], b, j, h, d))
                                               : ref_load(c->dtype, host[T_KR], elem_at(&t[T_KR], b, j, h, d - kd));
                for (int d = 0; d < c->ov; d++) v[r * c->ov + d] = ref_load(c->dtype, host[T_V], elem_at(&t[T_V], b, j, h, d));
            }
    }
    char err[256];
    double worst = 0;
    if (ref_mha_fwd(&p, o1, l1, err, sizeof err)) {
        check(k, 0, "ref_mha_fwd refused a valid problem: %s", err);
        worst = INFINITY;
    } else {
        naive(&p, q, kf, v, o2, l2);
        for (size_t i = 0; i < nq * c->ov; i++) worst = fmax(worst, abs_diff(o1[i], o2[i]));
        for (size_t i = 0; i < nq; i++) worst = fmax(worst, abs_diff(l1[i], l2[i]));
    }
    for (int i = 0; i < N_T; i++) free(host[i]);
    free(q), free(kf), free(v), free(o1), free(o2), free(l1), free(l2);
    return worst;
}

static int st_case(const char *line, Case *c)
{
    char err[512];
    return case_parse_line(line, c, err, sizeof err) == 1 ? 0 : (printf("self-test: '%s': %s\n", line, err), -1);
}

static void st_reference(Checks *k)
{
    static const char *const lines[] = {
        "target=sm100a dtype=bf16 sq=5 sk=7 hq=2 qk=16",
        "target=sm100a dtype=fp16 batch=2 sq=6 sk=6 hq=4 hkv=2 qk=32 mask=causal",
        "target=sm100a dtype=e4m3 sq=3 sk=9 hq=8 hkv=1 qk=16 ov=32 mask=causal descale=0.5,2,0.25",
        "target=sm100a dtype=bf16 sq=7 sk=4 hq=2 qk=16 mask=causal layout=strided", /* empty rows */
        "target=sm100a dtype=bf16 batch=2 sq=6 sk=9 hq=4 hkv=4 qk=16 mask=window:2,1 scale=0.3",
        "target=sm100a dtype=fp16 sq=8 sk=5 hq=2 hkv=1 qk=32 mask=window:-1,1 layout=strided amp=2",
        "target=sm100a dtype=bf16 sq=4 sk=6 hq=3 hkv=1 qk=80 ov=32 k_rope=1 mask=causal",
        "target=sm100a dtype=e4m3 sq=4 sk=4 hq=2 qk=96 ov=48 k_rope=1 layout=strided descale=2,0,3",
        "target=sm90a dtype=bf16 sq=1 sk=11 hq=2 qk=16 mask=window:3,-1",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        Case c;
        if (st_case(lines[i], &c)) {
            check(k, 0, "self-test case %zu does not parse", i);
            continue;
        }
        double d = st_one(k, &c, 1000 + i);
        check(k, d <= 1e-12, "reference vs naive formula differ by %g on: %s", d, lines[i]);
    }
}

/* ref_mha_fwd on a problem with rows that see no key, and the scale/descale
 * and k_rope/strided invariants, checked against each other. */
static void st_invariants(Checks *k)
{
    Case c;
    if (st_case("target=sm100a dtype=bf16 sq=6 sk=3 hq=1 qk=16 mask=causal", &c)) {
        check(k, 0, "invariants: the case does not parse");
        return;
    }
    Layout t[N_T];
    case_layouts(&c, t);
    unsigned char *q = make_input(&c, &t[T_Q], 1, 1), *kk = make_input(&c, &t[T_K], 2, 1), *v = make_input(&c, &t[T_V], 3, 1);
    unsigned char *host[N_T] = {q, kk, v, NULL, NULL};
    RefMha p = ref_problem(&c, t, host);
    double o[6 * 16], lse[6];
    char err[256];
    check(k, ref_mha_fwd(&p, o, lse, err, sizeof err) == 0, "ref_mha_fwd: %s", err);
    for (int i = 0; i < 6; i++) {
        int empty = i < 3, zero = 1;
        for (int d = 0; d < 16; d++) zero &= o[i * 16 + d] == 0.0;
        check(k, empty ? zero && isinf(lse[i]) && lse[i] < 0 : !zero && isfinite(lse[i]),
              "row %d of sq 6 sk 3 causal: empty %d, O zero %d, LSE %g", i, empty, zero, lse[i]);
    }
    /* descales: q_descale 2 = softmax_scale doubled; v_descale 3 = O times 3 */
    double o2[6 * 16], lse2[6];
    p.q_descale = 2, p.v_descale = 3;
    ref_mha_fwd(&p, o2, lse2, err, sizeof err);
    p.q_descale = 0, p.v_descale = 0, p.softmax_scale = 2 / sqrt(16.0);
    ref_mha_fwd(&p, o, lse, err, sizeof err);
    double worst = 0;
    for (int i = 0; i < 6 * 16; i++) worst = fmax(worst, abs_diff(o2[i], 3 * o[i]));
    for (int i = 0; i < 6; i++) worst = fmax(worst, abs_diff(lse2[i], lse[i]));
    check(k, worst <= 1e-12, "descales differ from the scaled problem by %g", worst);
    /* sinks: -inf changes nothing; sink s scales O by l / (l + e^(s - m)) = 1 / (1 + e^(s - LSE)), LSE unchanged */
    double o3[6 * 16], lse3[6], sink_v = -INFINITY;
    p.sink = &sink_v;
    ref_mha_fwd(&p, o3, lse3, err, sizeof err);
    worst = 0;
    for (int i = 0; i < 6 * 16; i++) worst = fmax(worst, fabs(o3[i] - o[i]));
    check(k, worst == 0, "a sink of -inf changed O by %g", worst);
    sink_v = 0.5;
    ref_mha_fwd(&p, o3, lse3, err, sizeof err);
    worst = 0;
    for (int i = 3; i < 6; i++) {
        for (int d = 0; d < 16; d++) worst = fmax(worst, fabs(o3[i * 16 + d] - o[i * 16 + d] / (1 + exp(0.5 - lse[i]))));
        worst = fmax(worst, fabs(lse3[i] - lse[i]));
    }
    check(k, worst <= 1e-12, "sink 0.5: O or LSE off the closed form by %g", worst);
    check(k, isinf(lse3[0]) && o3[0] == 0.0, "a sink changed a row that sees no key");
    p.sink = NULL;
    /* score_mod: softcap50 of these small scores is nearly the identity; rowdrop empties rows */
    Case mc = c;
    mc.mod = MOD_SOFTCAP50;
    ModCtx ctx = {&mc, NULL};
    p.score_mod = mod_ref, p.mod_ctx = &ctx;
    ref_mha_fwd(&p, o3, lse3, err, sizeof err);
    worst = 0;
    for (int i = 3 * 16; i < 6 * 16; i++) worst = fmax(worst, fabs(o3[i] - o[i]));
    check(k, worst > 0 && worst < 1e-2, "softcap50 of scores near 0 moved O by %g", worst);
    mc.mod = MOD_ROWDROP;
    ref_mha_fwd(&p, o3, lse3, err, sizeof err);
    check(k, isinf(lse3[4]) && lse3[4] < 0 && o3[4 * 16] == 0.0 && isfinite(lse3[3]),
          "rowdrop: row 4 (q + h + b = 4) should see no key, row 3 should");
    p.score_mod = NULL;
    /* a bad problem is refused with a message */
    p.heads_kv = 2, p.heads_q = 3;
    check(k, ref_mha_fwd(&p, o, lse, err, sizeof err) == -1 && strstr(err, "heads"), "heads 3/2 accepted");
    free(q), free(kk), free(v);
}

static void st_parser(Checks *k)
{
    char err[512], text[CASE_TEXT_MAX], text2[CASE_TEXT_MAX];
    Case c, d;
    const char *full = "target=sm100a dtype=e4m3 batch=2 sq=130 sk=200 hq=8 hkv=2 qk=192 ov=128 mask=window:64,-1 "
                       "config=\"bn=64 stages=3\" k_rope=1 descale=0.5,2,0.25 scale=0.1 amp=2 layout=strided lse=0";
    check(k, case_parse_line(full, &c, err, sizeof err) == 1, "full case: %s", err);
    case_format(&c, text, sizeof text);
    check(k, !strcmp(text, full), "canonical form\n  %s\nof\n  %s", text, full);
    check(k, case_parse_line(text, &d, err, sizeof err) == 1, "canonical form does not parse: %s", err);
    case_format(&d, text2, sizeof text2);
    check(k, !strcmp(text, text2), "canonical form is not stable");
    check(k, case_parse_line("  # only a comment", &c, err, sizeof err) == 0, "comment line");
    check(k, case_parse_line("sk=5 sq=4 hq=2 qk=64 dtype=bf16 target=sm90a # c", &c, err, sizeof err) == 1 &&
                 c.hkv == 2 && c.ov == 64 && c.batch == 1 && c.mask == REF_MASK_NONE && c.lse == 1,
          "defaults");
    case_format(&c, text, sizeof text);
    check(k, !strcmp(text, "target=sm90a dtype=bf16 batch=1 sq=4 sk=5 hq=2 hkv=2 qk=64 ov=64 mask=none"),
          "canonical order: %s", text);
    char id1[ID_HEX + 1], id2[ID_HEX + 1], id3[ID_HEX + 1];
    case_parse_line("target=sm90a dtype=bf16 sq=4 sk=5 hq=2 qk=64", &d, err, sizeof err);
    case_id(&c, 1, id1), case_id(&d, 1, id2), case_id(&d, 2, id3);
    check(k, !strcmp(id1, id2) && strcmp(id2, id3) && strlen(id1) == ID_HEX, "ids %s %s %s", id1, id2, id3);
    const struct { const char *line, *want; } bad[] = {
        {"target=sm100a dtype=bf16 sq=4 sk=4 hq=1 qk=64 color=red", "unknown key 'color'"},
        {"target=sm100a dtype=bf16 sq=4 sk=4 hq=1 qk=64 sq=5", "given twice"},
        {"target=sm100a dtype=bf16 sq=4 hq=1 qk=64", "missing required key 'sk'"},
        {"target=sm80 dtype=bf16 sq=4 sk=4 hq=1 qk=64", "target=sm80"},
        {"target=sm100a dtype=bf16 sq=4x sk=4 hq=1 qk=64", "sq=4x"},
        {"target=sm100a dtype=bf16 sq=4 sk=4 hq=1 qk=64 mask=window:3", "mask=window:3"},
        {"target=sm100a dtype=bf16 sq=4 sk=4 hq=1 qk=64 mask=window:-2,0", "mask=window:-2,0"},
        {"target=sm100a dtype=bf16 sq=4 sk=4 hq=6 hkv=4 qk=64", "does not divide"},
        {"target=sm100a dtype=bf16 sq=4 sk=4 hq=1 qk=64 k_rope=1", "k_rope=1 needs"},
        {"target=sm100a dtype=bf16 sq=4 sk=4 hq=1 qk=64 descale=1,2", "descale=1,2"},
        {"target=sm100a dtype=bf16 sq=4 sk=4 hq=1 qk=64 config=\"bn=64", "unterminated quote"},
        {"target=sm100a dtype=bf16 sq=4 sk=4 hq=1 qk=64 config=BN;", "config="},
        {"target=sm100a dtype=bf16 sq=4 sk=4 hq=1 qk=64 amp=0", "amp=0"},
        {"target=sm100a dtype=bf16 sq=4 sk=4 hq=1 qk=64 causal", "expected key=value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int r = case_parse_line(bad[i].line, &c, err, sizeof err);
        check(k, r == -1 && strstr(err, bad[i].want), "'%s' gave %d '%s', expected an error with '%s'", bad[i].line, r,
              err, bad[i].want);
    }
}

/* evaluate() on O written as the reference rounded (passes) and with each
 * kind of damage (fails). */
static void st_evaluate(Checks *k)
{
    Case c;
    if (st_case("target=sm100a dtype=bf16 sq=4 sk=2 hq=2 qk=16 mask=causal layout=strided", &c)) {
        check(k, 0, "evaluate: the case does not parse");
        return;
    }
    Layout t[N_T];
    case_layouts(&c, t);
    unsigned char *host[N_T] = {0};
    for (int i = 0; i < T_O; i++) host[i] = make_input(&c, &t[i], 7 + (uint64_t)i, 1);
    RefMha p = ref_problem(&c, t, host);
    size_t on = (size_t)c.sq * c.hq * c.ov, ob = t[T_O].elems * 2;
    double *ro = malloc(on * sizeof(double)), rl[8];
    unsigned char *o = malloc(ob);
    float lse[8];
    char err[256];
    ref_mha_fwd(&p, ro, rl, err, sizeof err);
    memset(o, 0xFF, ob);
    for (int i = 0; i < c.sq; i++)
        for (int h = 0; h < c.hq; h++)
            for (int d = 0; d < c.ov; d++)
                ref_store(REF_BF16, o, elem_at(&t[T_O], 0, i, h, d), ro[((size_t)i * c.hq + h) * c.ov + d]);
    for (int i = 0; i < 8; i++) lse[i] = (float)rl[i];
    Result r;
    memset(&r, 0, sizeof r);
    r.oob = o_padding_written(&t[T_O], o);
    evaluate(&c, &t[T_O], o, lse, ro, NULL, rl, &r);
    check(k, numerics_pass(&c, &r) && r.rel_l2 < 4e-3 && r.lse_err < 1e-6, "rounded reference: relL2 %g lse %g nan %ld "
          "empty %ld oob %ld", r.rel_l2, r.lse_err, r.nan, r.empty_bad, r.oob);
    /* rows 0..1 see no key (sq 4, sk 2, causal): O = 0, LSE = -inf */
    check(k, isinf(rl[0]) && isinf(rl[1]) && isfinite(rl[2]), "expected rows 0, 1 empty");
    ref_store(REF_BF16, o, elem_at(&t[T_O], 0, 0, 1, 3), 0.5);
    evaluate(&c, &t[T_O], o, lse, ro, NULL, rl, &r);
    check(k, !numerics_pass(&c, &r) && r.empty_bad == 1, "non-zero O in an empty row passed");
    ref_store(REF_BF16, o, elem_at(&t[T_O], 0, 0, 1, 3), 0.0);
    lse[0] = 0.0f;
    evaluate(&c, &t[T_O], o, lse, ro, NULL, rl, &r);
    check(k, !numerics_pass(&c, &r) && r.empty_bad == 1, "finite LSE in an empty row passed");
    lse[0] = -INFINITY;
    lse[7] += 0.01f; /* h 1, row 3 */
    evaluate(&c, &t[T_O], o, lse, ro, NULL, rl, &r);
    check(k, !numerics_pass(&c, &r) && r.lse_err > LSE_TOL, "LSE off by 0.01 passed");
    lse[7] = (float)rl[7];
    o[elem_at(&t[T_O], 0, 3, 0, 0) * 2 + 1] = 0xFF; /* an O element's high byte: 0xFFxx is NaN */
    o[elem_at(&t[T_O], 0, 3, 0, 0) * 2] = 0xFF;
    evaluate(&c, &t[T_O], o, lse, ro, NULL, rl, &r);
    check(k, !numerics_pass(&c, &r) && r.nan == 1, "NaN in O passed (nan %ld)", r.nan);
    ref_store(REF_BF16, o, elem_at(&t[T_O], 0, 3, 0, 0), ro[(size_t)3 * c.hq * c.ov]);
    o[elem_at(&t[T_O], 0, 2, 1, c.ov) * 2] = 0; /* first padding byte after a head row */
    r.oob = o_padding_written(&t[T_O], o);
    check(k, r.oob == 1, "a write into O's padding was not seen (oob %ld)", r.oob);
    for (int i = 0; i < T_O; i++) free(host[i]);
    free(ro), free(o);
}

static int self_test(void)
{
    Checks k = {0, 0};
    st_codecs(&k);
    st_masks(&k);
    st_reference(&k);
    st_invariants(&k);
    st_parser(&k);
    st_evaluate(&k);
    printf("sim_mha --self-test: %d checks, %d failed\n", k.run, k.failed);
    return k.failed ? 1 : 0;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fprintf(f, "usage: sim_mha [--seed N] [--cases FILE | CASE WORDS...] [--dump DIR] [--compare DIR]\n"
               "               [--quiet] [--no-skip] [--plan]\n"
               "       sim_mha --self-test\n"
               "CASE WORDS: target=sm90a|sm100a dtype=bf16|fp16|e4m3 sq=N sk=N hq=N qk=N [batch=N hkv=N ov=N\n"
               "            mask=none|causal|window:L,R config=\"bn=64 stages=3\" k_rope=0|1 descale=Q,K,V\n"
               "            scale=X amp=X layout=packed|strided lse=0|1]; each also as --key VALUE.\n"
               "The syntax, the checks and the dump format are described at the top of tests/sim/sim_mha.c.\n");
}

/* One case: run, report; its verdict (case_main counts it). */
static CaseVerdict run_one(void *env_, const void *c_, int *compared)
{
    Env *env = env_;
    const Case *c = c_;
    char id[ID_HEX + 1];
    Result r;
    case_id(c, env->opt.seed, id);
    run_case(env, c, id, &r);
    report(env, c, id, &r);
    *compared = r.compared;
    return r.verdict == R_PASS ? CASE_PASS : r.verdict == R_SKIP ? CASE_SKIP : CASE_FAIL;
}

static void run_done(void *env_, const Tally *t)
{
    Env *env = env_;
    if (env->opt.compare_dir)
        printf("sim_mha: compared %d cases with %s (bounds: O %g, LSE %g); %d had no stored run\n", t->compared,
               env->opt.compare_dir, CMP_O_TOL, CMP_LSE_TOL, t->missing);
    for (int i = 0; i < 3; i++) fa4_destroy(env->fa[i]);
}

static int plan_all(void *env, const CaseList *l) { return plan_cases(env, l); }

int main(int argc, char **argv)
{
    Env env;
    memset(&env, 0, sizeof env);
    env.opt.seed = DEFAULT_SEED;
    const CaseRunner runner = {&SYNTAX, self_test, plan_all, run_one, run_done};
    return case_main(&runner, &env, &env.cu, &env.opt, argc, argv);
}
