/* sim_mla.c - runs sparse MLA prefill cases (fa4_mla_sparse_fwd, runtime/fa4.h)
 * through libfa4rt's public path and checks them against the fp64 host
 * reference (tests/sim/ref_mla.c). The same binary runs on the CPU simulator
 * (LD_LIBRARY_PATH=build/sim FA4GEN_COMPILER=driver-ptx FA4SIM_CC=90, whose
 * libcuda.so.1 executes PTX) and on a real GPU (the system's libcuda.so.1): the
 * driver is dlopened and only the calls below are resolved.
 *
 *   sim_mla [--seed N] [--cases FILE | CASE WORDS...] [--dump DIR] [--compare DIR]
 *           [--quiet] [--no-skip]
 *   sim_mla --self-test
 *
 * ---- Case syntax -------------------------------------------------------------
 * A case is a line of key=value words (in a --cases file: one per line, '#'
 * starts a comment, blank lines are ignored). On the command line the same
 * words are separate arguments (`sim_mla target=sm90a sq=2 skv=256 ...`), and
 * each key may also be written as a flag, `--sq 2` or `--sq=2`. A value may be
 * double-quoted to hold spaces (config="a=1 b=2"). Keys are parsed strictly: an
 * unknown key, a repeated key, a missing required key or a malformed value is
 * an error naming it, and nothing runs.
 *
 *   target=sm90a|sm100a     required; fa4_options.target (a device of another compute
 *                           capability refuses the case: SKIP)
 *   sq=N skv=N              required; s_q 1..65536, s_kv 1..1048576
 *   hq=N                    required; h_q 1..1024
 *   dqk=576|512             required; d_qk (V is always the first 512 columns)
 *   topk=N                  required; 1..65536
 *   sink=0|1                default 0; 1: attn_sink [h_q] given, random per head: one head
 *                           -inf, one +large (1e4..2e4: out about 0), one -large (out as
 *                           without a sink), the rest U(0, 10) (about the rows' lse, where a
 *                           sink matters); random heads, the specials need h_q >= 4
 *   topk_length=0|1|wild    default 0; 1: topk_length [s_q] given, random in [0, topk], one
 *                           row 0 and another topk when s_q >= 2. Positions at or past a
 *                           row's length hold indices drawn like the others (mostly valid):
 *                           a kernel that reads them is wrong. wild: every int32 has a meaning
 *                           (fa4.h: below 0 an empty row, past topk all topk): rows take in
 *                           turn -1, -2^31, topk + 1, 2^31 - 1, 0, a random negative, a random
 *                           value past topk and one in [0, topk], from a random first row
 *   invalid=F               default 0; in [0, 1]: round(F * topk) random positions of every
 *                           row are made invalid, the kinds taken in turn over the case:
 *                           -2^31, -1, s_kv, 2^31-1, a large positive (s_kv+1 .. 2^31-2) and a
 *                           random negative (-2^31+1 .. -2)
 *   dup=0|1                 default 0; 0: a row's valid indices are distinct (needs
 *                           topk - round(F * topk) <= skv); 1: about 1/8 of the valid
 *                           positions (at least one per row with two) below topk_length copy
 *                           another valid position's index
 *   empty_rows=N            default 0; N random query rows (<= sq) whose every index is invalid
 *                           (the kinds in turn, as above)
 *   layout=packed|strided|odd  default packed (every stride passed as 0); strided: q padded after
 *                           each head row (32 B) and token (64 B), kv after each row (32 B),
 *                           indices after each row (16 B), out as q; padding is NaN in q and
 *                           kv, a valid index in indices, and poison (0xFF) in out; odd: as
 *                           strided, but out padded by 2 elements (4 B) after each head row and
 *                           token, so its strides are no multiple of 16 bytes (sm90a: no TMA store)
 *   scale=X                 default 0 (the runtime's 1/sqrt(d_qk)); sm_scale, finite >= 0
 *   config="WORDS"          default none; fa4_mla_sparse_args.config
 *   seed=N                  default --seed (1); the input seed of this case
 *   lse=0|1 max_logits=0|1  default 1; 0: that output is not requested (NULL)
 *   kv=bf16|e4m3            default bf16; e4m3: fp8 kv bytes (kv_dtype FA4_E4M3), e4m3 of U(-4, 4)
 *   kv_scale=none|row|N     default none (unit scales); row: one f32 scale per kv row; N (a multiple of
 *                           64): one per N columns; scales U(1/8, 1/2), one in 8 of them 0 (= 1)
 *
 * The canonical text of a case lists target sq skv hq dqk topk, then the other
 * keys that differ from their defaults, in the order above (values as given).
 * Results print it.
 *
 * ---- Inputs ------------------------------------------------------------------
 * q and kv are U(-1, 1) rounded to nearest even into bf16; indices, sinks and
 * lengths as above; each from its own splitmix64 stream seeded by
 * FNV-1a(canonical case text), the input seed and the tensor: the same bytes on
 * every machine. Every device buffer has 256 B guards on both sides (kv: at least
 * two rows, so index -1 and index s_kv land in it) filled with 0xFF: NaN in bf16
 * and fp32, so a kernel that reads a row it must skip gets NaN into its sums
 * ("contributes nothing, whatever its row holds"); index guards and padding hold a
 * valid index (s_kv / 2), so reading past a row of indices changes the result.
 * out, lse and max_logits, guards and padding included, are poisoned with 0xFF
 * before the launch.
 *
 * ---- Checks (the bounds of the issue) -----------------------------------------
 *   relL2    = ||out - ref||_2 / ||ref||_2 over every element        <= 1e-2
 *   elem_bad = elements with |out - ref| > 1e-2 + 1e-2 * |ref|       must be 0
 *              (an elementwise atol + rtol test, FlashMLA-like: its check_is_allclose is
 *              also an abs + rel test per element; the values here are ours)
 *   lse_err, max_err = max |x - ref| / max(1, |ref|) over finite rows  <= 1e-4 each
 *   inf_bad  = rows where lse or max_logits is infinite and the reference is not, or the
 *              reverse, or of the other sign: must be 0 (empty rows: lse +inf,
 *              max_logits -inf, exactly)
 *   empty_bad= elements of out in a row with no valid index that are not exactly 0
 *   nan      = NaN values in out, lse or max_logits: must be 0
 *   oob      = bytes written outside out's elements (its padding and guards) or outside
 *              lse / max_logits (their guards): must be 0
 *   maxabs   = max |out - ref| (printed, not bounded)
 * Each case prints one line, PASS|FAIL|SKIP <id> <case> relL2=.. maxabs=.. elem_bad=N
 * lse_err=.. max_err=.. nan=N ... and, for a failure, the worst element or row.
 * A refusal before the launch, FA4_ERR_UNSUPPORTED or FA4_ERR_INVALID_ARGUMENT (the
 * runtime refuses shapes the contract allows, e.g. an h_q or topk its kernel does not
 * tile, with the latter), is a SKIP printing fa4_last_error; any other status is a
 * FAIL with it; --no-skip makes SKIP a FAIL. The
 * run ends with exactly `sim_mla: N passed, N failed, N skipped`. Exit status 1
 * when any case failed, 2 for a usage error or a setup failure (no driver, a bad
 * case).
 *
 * ---- Ids, dumps, comparisons ---------------------------------------------------
 * A case's id is the low 48 bits of FNV-1a 64 over "<canonical case>\nseed=<N>" (N
 * the input seed), as 12 hex digits: the same case and seed have the same id on
 * every machine. --dump DIR writes DIR/<id>.bin for every case that launched: a
 * text header of two lines ("fa4sim-mla-dump 1 id=<id> seed=<N> out_bytes=<n>
 * lse_floats=<m> max_floats=<k>", then the canonical case), then out's elements
 * and padding exactly as the kernel left them, then the lse and the max_logits
 * floats (host byte order). --compare DIR reads DIR/<id>.bin back (a dump of
 * another run of this binary, e.g. on an H100) and prints cmp_o (max |Δout|),
 * cmp_ulp (max |Δout| in bf16 ulps of max(|a|, |b|, 2^-6)), cmp_lse and cmp_max
 * (max |Δ| / max(1, |a|, |b|)); the case fails when cmp_ulp > CMP_O_ULPS (4) or
 * cmp_lse / cmp_max > CMP_STAT_TOL (1e-5), bounds set from a measurement (below). A
 * case with no stored run prints cmp=none and is not failed for it.
 *
 * Without --quiet each case also prints what its inputs hold (valid positions,
 * empty rows, duplicates, invalid indices by kind) and its times (lines starting
 * with two blanks); --quiet leaves the result lines and the summary.
 * --self-test checks the case parser, the input generator (every kind of invalid
 * index, empty rows, duplicates, lengths, sinks, padding, determinism) and the
 * pass/fail logic on a reference-rounded output with each kind of damage; it
 * needs no GPU. The reference itself is checked by build/sim/test_ref_mla.
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
#include "ref_mla.h"

/* ---------------------------------------------------------------- tolerances */

#define REL_L2_TOL 1e-2 /* out: ||out - ref|| / ||ref|| */
#define ELEM_ATOL 1e-2  /* out: |out - ref| <= ELEM_ATOL + ELEM_RTOL |ref| per element */
#define ELEM_RTOL 1e-2
#define STAT_TOL 1e-4   /* lse, max_logits: |x - ref| / max(1, |ref|) */
/* --compare: two runs of one kernel on the same inputs (simulator vs a GPU) may
 * differ by accumulation order and exp2 approximations only. Measured (simulator
 * under scheduler seeds 1, 2, 7 vs an H100, the sm90a kernel, the 27 cases of
 * cases_mla_sm90.txt and 15 more: h_q 8..256, s_q 64, topk 2048, s_kv 65536,
 * sm_scale up to 8): out differs by at most 2 bf16 ulps (one case; 1 ulp in the
 * others, 6 bit-identical), ulps taken at max(|a|, |b|, 2^-6) since out's
 * elements are averages of hundreds of U(-1, 1) values and one near 0 carries
 * the absolute error of its sum; lse by 1.2e-6 and max_logits by 1.4e-6,
 * relative to max(1, |value|) like the checks (absolute differences grow with
 * sm_scale: 2.7e-4 at scale 8). The bounds allow twice the ulps and about seven
 * times the statistics' differences. */
#define CMP_O_ULPS 4.0
#define CMP_O_FLOOR 0x1p-6
#define CMP_STAT_TOL 1e-5

enum {
    ID_HEX = 12,           /* digits of a case id */
    CASE_TEXT_MAX = 512,
    MAX_SQ = 65536,
    MAX_SKV = 1 << 20,
    MAX_HQ = 1024,
    MAX_TOPK = 65536,
    DV = REF_MLA_DV,
    GUARD_BYTES = 256,     /* before and after every device buffer (kv: at least 2 rows) */
    PAD_HEAD_ELEMS = 16,   /* strided: bf16 elements after each head row (32 B) */
    PAD_SEQ_ELEMS = 32,    /* after each token of q and out (64 B) */
    PAD_KV_ELEMS = 16,     /* after each kv row (32 B) */
    PAD_IDX_ELEMS = 4,     /* after each row of indices (16 B) */
    PAD_ODD_ELEMS = 2,     /* odd: out's pad after each head row and token (4 B: no TMA store) */
    N_KINDS = 6,           /* kinds of invalid index */
};

static const uint64_t DEFAULT_SEED = 1;

/* ---------------------------------------------------------------- cases */

typedef struct Case {
    fa4_target target;
    int sq, skv, hq, dqk, topk;
    int sink, tklen, dup, empty_rows, strided, lse, maxl;
    int kv8;      /* kv=e4m3: fp8 kv bytes */
    int kv_scale; /* kv_scale=: 0 none, -1 one per row, else columns per scale */
    double invalid;
    float scale;
    int has_seed;
    uint64_t seed;
    char config[WORD_MAX];
    char invalid_text[64], scale_text[64]; /* as given, for the canonical text */
} Case;

enum { K_TARGET, K_SQ, K_SKV, K_HQ, K_DQK, K_TOPK, K_SINK, K_TKLEN, K_INVALID, K_DUP, K_EMPTY, K_LAYOUT, K_SCALE,
       K_CONFIG, K_SEED, K_LSE, K_MAXL, K_KV, K_KVSCALE, K_COUNT };
static const char *const targets_name[] = {[FA4_TARGET_SM90A] = "sm90a", [FA4_TARGET_SM100A] = "sm100a",
                                            [FA4_TARGET_SM103A] = "sm103a"};
static const char *const KEY_NAMES[K_COUNT] = {"target", "sq",         "skv",     "hq",     "dqk",   "topk",
                                               "sink",   "topk_length", "invalid", "dup",    "empty_rows",
                                               "layout", "scale",      "config",  "seed",   "lse",   "max_logits",
                                               "kv",     "kv_scale"};
enum { REQUIRED_KEYS = K_SINK }; /* keys before K_SINK are required */

/* A finite number in [lo, hi]. */
static int parse_real(const char *key, const char *v, double lo, double hi, double *out, char *err, size_t n)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x) || x < lo || x > hi || !isfinite((float)x))
        return errf(err, n, "%s=%s: expected a finite number in [%g, %g]", key, v, lo, hi);
    *out = x;
    return 0;
}

/* Kernel config words: lower-case key=value words, no quotes. Stored with single spaces. */
static int set_key(Case *c, int k, const char *v, char *err, size_t n)
{
    static const char *const targets[] = {"sm90a", "sm100a", "sm103a"}, *const depths[] = {"512", "576"},
                             *const layouts[] = {"packed", "strided", "odd"}, *const bits[] = {"0", "1"};
    const char *key = KEY_NAMES[k];
    int x;
    double d = 0; /* parse_real sets it on success; zeroed for the compiler, which cannot see that */
    switch (k) {
    case K_TARGET:
        if (word_choice(key, v, targets, 3, &x, err, n)) return -1;
        c->target = (fa4_target)(FA4_TARGET_SM90A + x); /* the words in fa4_target's order */
        return 0;
    case K_SQ: return word_int(key, v, 1, MAX_SQ, &c->sq, err, n);
    case K_SKV: return word_int(key, v, 1, MAX_SKV, &c->skv, err, n);
    case K_HQ: return word_int(key, v, 1, MAX_HQ, &c->hq, err, n);
    case K_DQK:
        if (word_choice(key, v, depths, 2, &x, err, n)) return -1;
        c->dqk = x ? 576 : 512;
        return 0;
    case K_TOPK: return word_int(key, v, 1, MAX_TOPK, &c->topk, err, n);
    case K_SINK: return word_choice(key, v, bits, 2, &c->sink, err, n);
    case K_TKLEN: {
        static const char *const lens[] = {"0", "1", "wild"};
        return word_choice(key, v, lens, 3, &c->tklen, err, n);
    }
    case K_INVALID:
        snprintf(c->invalid_text, sizeof c->invalid_text, "%s", v);
        return parse_real(key, v, 0.0, 1.0, &c->invalid, err, n);
    case K_DUP: return word_choice(key, v, bits, 2, &c->dup, err, n);
    case K_EMPTY: return word_int(key, v, 0, MAX_SQ, &c->empty_rows, err, n);
    case K_LAYOUT: return word_choice(key, v, layouts, 3, &c->strided, err, n);
    case K_SCALE:
        snprintf(c->scale_text, sizeof c->scale_text, "%s", v);
        if (parse_real(key, v, 0.0, 1e30, &d, err, n)) return -1;
        c->scale = (float)d;
        return 0;
    case K_CONFIG: return word_config(v, c->config, sizeof c->config, err, n);
    case K_SEED:
        if (parse_u64(v, &c->seed)) return errf(err, n, "seed=%s: expected an unsigned integer", v);
        c->has_seed = 1;
        return 0;
    case K_LSE: return word_choice(key, v, bits, 2, &c->lse, err, n);
    case K_MAXL: return word_choice(key, v, bits, 2, &c->maxl, err, n);
    case K_KV: {
        static const char *const kvs[] = {"bf16", "e4m3"};
        return word_choice(key, v, kvs, 2, &c->kv8, err, n);
    }
    case K_KVSCALE:
        if (!strcmp(v, "none")) return c->kv_scale = 0, 0;
        if (!strcmp(v, "row")) return c->kv_scale = -1, 0;
        if (word_int(key, v, 64, 576, &c->kv_scale, err, n)) return -1;
        if (c->kv_scale % 64) return errf(err, n, "kv_scale=%s: use none, row or a multiple of 64", v);
        return 0;
    }
    return errf(err, n, "internal: key %d", k);
}

static void case_defaults(Case *c)
{
    memset(c, 0, sizeof *c);
    c->lse = c->maxl = 1;
}

/* Invalid positions of a row that is not empty. */
static int invalid_per_row(const Case *c) { return (int)lround(c->invalid * c->topk); }

/* Required keys present, consistency. */
static int case_finish(Case *c, const int seen[K_COUNT], char *err, size_t n)
{
    for (int k = 0; k < REQUIRED_KEYS; k++)
        if (!seen[k]) return errf(err, n, "missing required key '%s'", KEY_NAMES[k]);
    if (c->empty_rows > c->sq) return errf(err, n, "empty_rows=%d: more than sq=%d rows", c->empty_rows, c->sq);
    int nvalid = c->topk - invalid_per_row(c);
    if (!c->dup && nvalid > c->skv)
        return errf(err, n, "dup=0 needs at most skv=%d distinct valid indices per row; topk=%d with %d invalid has %d "
                    "(use dup=1 or more invalid)", c->skv, c->topk, invalid_per_row(c), nvalid);
    return 0;
}

/* The case syntax for the shared parser (tests/sim/harness.c). */
static void syntax_defaults(void *c) { case_defaults(c); }
static int syntax_set_key(void *c, int k, const char *v, char *err, size_t n) { return set_key(c, k, v, err, n); }
static int syntax_finish(void *c, const int *seen, char *err, size_t n) { return case_finish(c, seen, err, n); }
static void usage(FILE *f);
static const CaseSyntax SYNTAX = {"sim_mla", KEY_NAMES, K_COUNT, sizeof(Case), syntax_defaults, syntax_set_key,
                                  syntax_finish, usage, 0};
static int case_parse_line(const char *line, Case *c, char *err, size_t n) { return case_line(&SYNTAX, line, c, err, n); }

static void case_format(const Case *c, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "target=%s sq=%d skv=%d hq=%d dqk=%d topk=%d",
                                targets_name[c->target], c->sq, c->skv, c->hq, c->dqk,
                                c->topk);
#define MORE(...) (o += o < n ? (size_t)snprintf(buf + o, n - o, __VA_ARGS__) : 0)
    if (c->sink) MORE(" sink=1");
    if (c->tklen) MORE(c->tklen == 2 ? " topk_length=wild" : " topk_length=1");
    if (c->invalid_text[0]) MORE(" invalid=%s", c->invalid_text);
    if (c->dup) MORE(" dup=1");
    if (c->empty_rows) MORE(" empty_rows=%d", c->empty_rows);
    if (c->strided) MORE(c->strided == 2 ? " layout=odd" : " layout=strided");
    if (c->scale_text[0]) MORE(" scale=%s", c->scale_text);
    if (c->config[0]) MORE(" config=\"%s\"", c->config);
    if (c->has_seed) MORE(" seed=%" PRIu64, c->seed);
    if (!c->lse) MORE(" lse=0");
    if (!c->maxl) MORE(" max_logits=0");
    if (c->kv8) MORE(" kv=e4m3");
    if (c->kv_scale) c->kv_scale < 0 ? MORE(" kv_scale=row") : MORE(" kv_scale=%d", c->kv_scale);
#undef MORE
}

/* The input seed: the case's seed= or the run's --seed. */
static uint64_t input_seed(const Case *c, uint64_t run_seed) { return c->has_seed ? c->seed : run_seed; }

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

/* ---------------------------------------------------------------- random streams */

/* U(-1, 1) from 53 random bits */
static double uniform(uint64_t *s) { return (double)(splitmix64(s) >> 11) * 0x1p-53 * 2.0 - 1.0; }
/* U(0, 1) */
static double unit(uint64_t *s) { return (double)(splitmix64(s) >> 11) * 0x1p-53; }
/* uniform in [0, n), n >= 1 (the modulo bias is irrelevant here and the same everywhere) */
static uint64_t below(uint64_t *s, uint64_t n) { return splitmix64(s) % n; }

enum { S_Q, S_KV, S_IDX, S_SINK, S_LEN, N_STREAMS };

static uint64_t stream_seed(const Case *c, uint64_t seed, int stream)
{
    char text[CASE_TEXT_MAX];
    case_format(c, text, sizeof text);
    uint64_t h = fnv1a(text, strlen(text), FNV_OFFSET);
    uint64_t s = h ^ (seed * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(stream + 1) << 56);
    splitmix64(&s); /* decorrelate nearby seeds */
    return s;
}

/* ---------------------------------------------------------------- buffers and the problem */

/* A device buffer and its host image: front guard, body (the tensor, padding included), back guard. */
typedef struct Buf {
    size_t front, body, back; /* bytes */
    unsigned char *host;
    CUdeviceptr dev;
} Buf;

static size_t buf_bytes(const Buf *b) { return b->front + b->body + b->back; }
static unsigned char *buf_body(const Buf *b) { return b->host + b->front; }

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Element strides, all effective (never 0). */
typedef struct Geom {
    int64_t qs, qh, kvs, is, os, oh;
} Geom;

static Geom geom_of(const Case *c)
{
    Geom g;
    int pad = c->strided != 0;
    g.qh = c->dqk + pad * PAD_HEAD_ELEMS;
    g.qs = (int64_t)c->hq * g.qh + pad * PAD_SEQ_ELEMS;
    g.kvs = c->dqk + pad * PAD_KV_ELEMS;
    g.is = c->topk + pad * PAD_IDX_ELEMS;
    g.oh = DV + (c->strided == 2 ? PAD_ODD_ELEMS : pad * PAD_HEAD_ELEMS);
    g.os = (int64_t)c->hq * g.oh + (c->strided == 2 ? PAD_ODD_ELEMS : pad * PAD_SEQ_ELEMS);
    return g;
}

enum { B_Q, B_KV, B_IDX, B_SINK, B_LEN, B_OUT, B_LSE, B_MAXL, B_KVS, N_BUF };
static const char *const BUF_NAMES[N_BUF] = {"q", "kv", "indices", "attn_sink", "topk_length", "out", "lse",
                                             "max_logits", "kv_scale"};

/* What the inputs hold (printed without --quiet, checked by --self-test). */
typedef struct Stats {
    long positions, valid, past_len, dups;
    long kinds[N_KINDS];
    int empty_rows, zero_len_rows, full_len_rows;
} Stats;

/* Host images of every buffer of a case (device handles filled by stage_inputs). */
typedef struct Problem {
    Geom g;
    Buf b[N_BUF];
    int has[N_BUF];
    Stats st;
} Problem;

static void problem_free(Problem *p)
{
    for (int i = 0; i < N_BUF; i++) free(p->b[i].host);
}

static int buf_alloc(Buf *b, size_t body, size_t guard)
{
    b->front = b->back = guard;
    b->body = body;
    b->host = malloc(buf_bytes(b));
    if (!b->host) return -1;
    memset(b->host, 0xFF, buf_bytes(b));
    return 0;
}

static uint16_t *bf16_at(const Buf *b, int64_t e) { return (uint16_t *)(void *)buf_body(b) + e; }
static int32_t *i32_at(const Buf *b, int64_t e) { return (int32_t *)(void *)buf_body(b) + e; }
static float *f32_at(const Buf *b, int64_t e) { return (float *)(void *)buf_body(b) + e; }

/* An invalid index of kind k (0..N_KINDS-1). */
static int32_t invalid_index(int k, int skv, uint64_t *s)
{
    switch (k) {
    case 0: return INT32_MIN;
    case 1: return -1;
    case 2: return skv;
    case 3: return INT32_MAX;
    case 4: return (int32_t)(skv + 1 + (int64_t)below(s, (uint64_t)INT32_MAX - 2 - (uint64_t)skv)); /* s_kv+1 .. 2^31-2 */
    default: return (int32_t)(-2 - (int64_t)below(s, (uint64_t)INT32_MAX - 1));                      /* -2^31+1 .. -2 */
    }
}

/* Which kind an index is, or -1 for a valid one (0 <= i < skv). */
static int index_kind(int32_t i, int skv)
{
    if (i == INT32_MIN) return 0;
    if (i == -1) return 1;
    if (i == skv) return 2;
    if (i == INT32_MAX) return 3;
    if (i > skv) return 4;
    if (i < 0) return 5;
    return -1;
}

/* The positions of row r that count: topk_length[r] read as fa4.h says (below 0: none, past topk: topk). */
static int row_len(const Case *c, const int32_t *len, int r)
{
    if (!len) return c->topk;
    return len[r] < 0 ? 0 : len[r] > c->topk ? c->topk : len[r];
}

/* Partial Fisher-Yates: the first k entries of a (a permutation of n values) become a random k-subset. */
static void partial_shuffle(int32_t *a, int n, int k, uint64_t *s)
{
    for (int i = 0; i < k; i++) {
        int j = i + (int)below(s, (uint64_t)(n - i));
        int32_t t = a[i];
        a[i] = a[j], a[j] = t;
    }
}

static int32_t *iota_new(int n)
{
    int32_t *a = malloc(sizeof *a * (size_t)(n ? n : 1));
    if (a)
        for (int i = 0; i < n; i++) a[i] = i;
    return a;
}

/* The indices of every row (see the case syntax), and their statistics. */
static int make_indices(const Case *c, Problem *p, uint64_t seed, const int32_t *len)
{
    uint64_t s = seed;
    const Buf *b = &p->b[B_IDX];
    int32_t *keys = iota_new(c->skv), *pos = iota_new(c->topk), *rows = iota_new(c->sq);
    char *empty = calloc((size_t)c->sq, 1), *bad = calloc((size_t)c->topk, 1);
    int32_t *valid_pos = malloc(sizeof *valid_pos * (size_t)c->topk);
    if (!keys || !pos || !rows || !empty || !bad || !valid_pos) {
        free(keys), free(pos), free(rows), free(empty), free(bad), free(valid_pos);
        return -1;
    }
    /* padding after each row: a valid index */
    for (int r = 0; r < c->sq; r++)
        for (int64_t t = c->topk; t < p->g.is; t++) *i32_at(b, (int64_t)r * p->g.is + t) = c->skv / 2;
    partial_shuffle(rows, c->sq, c->empty_rows, &s);
    for (int i = 0; i < c->empty_rows; i++) empty[rows[i]] = 1;
    int kind = 0, ninv = invalid_per_row(c);
    Stats *st = &p->st;
    for (int r = 0; r < c->sq; r++) {
        int32_t *row = i32_at(b, (int64_t)r * p->g.is);
        if (empty[r]) {
            for (int t = 0; t < c->topk; t++) row[t] = invalid_index(kind++ % N_KINDS, c->skv, &s);
            continue;
        }
        /* which positions are invalid */
        memset(bad, 0, (size_t)c->topk);
        for (int t = 0; t < c->topk; t++) pos[t] = t;
        partial_shuffle(pos, c->topk, ninv, &s);
        for (int i = 0; i < ninv; i++) bad[pos[i]] = 1;
        /* the others: distinct keys while there are enough, else drawn with replacement (dup=1 only) */
        int need = c->topk - ninv, distinct = need <= c->skv;
        if (distinct) partial_shuffle(keys, c->skv, need, &s);
        for (int t = 0, k = 0; t < c->topk; t++) {
            if (bad[t]) row[t] = invalid_index(kind++ % N_KINDS, c->skv, &s);
            else row[t] = distinct ? keys[k++] : (int32_t)below(&s, (uint64_t)c->skv);
        }
        if (!c->dup) continue;
        /* copy ~1/8 of the counted valid positions from another counted valid position */
        int lim = row_len(c, len, r), nv = 0;
        for (int t = 0; t < lim; t++)
            if (!bad[t]) valid_pos[nv++] = t;
        if (nv < 2) continue;
        int ndup = nv / 8 > 1 ? nv / 8 : 1;
        for (int i = 0; i < ndup; i++) {
            int a = valid_pos[below(&s, (uint64_t)nv)], z;
            do z = valid_pos[below(&s, (uint64_t)nv)];
            while (z == a);
            row[a] = row[z];
        }
    }
    /* statistics, from the indices as stored */
    char *seen = calloc((size_t)c->skv, 1);
    if (!seen) {
        free(keys), free(pos), free(rows), free(empty), free(bad), free(valid_pos);
        return -1;
    }
    for (int r = 0; r < c->sq; r++) {
        const int32_t *row = i32_at(b, (int64_t)r * p->g.is);
        int lim = row_len(c, len, r), any = 0;
        st->zero_len_rows += lim == 0;
        st->full_len_rows += len && lim == c->topk;
        for (int t = 0; t < c->topk; t++) {
            int k = index_kind(row[t], c->skv);
            st->positions++;
            if (k >= 0) st->kinds[k]++;
            else if (t >= lim) st->past_len++;
            else {
                st->valid++, any = 1;
                st->dups += seen[row[t]];
                seen[row[t]] = 1;
            }
        }
        for (int t = 0; t < lim; t++)
            if (index_kind(row[t], c->skv) < 0) seen[row[t]] = 0;
        st->empty_rows += !any;
    }
    free(seen);
    free(keys), free(pos), free(rows), free(empty), free(bad), free(valid_pos);
    return 0;
}

/* Host images of every buffer of the case: inputs generated, outputs poisoned. */
static int make_problem(const Case *c, uint64_t seed, Problem *p)
{
    memset(p, 0, sizeof *p);
    p->g = geom_of(c);
    const Geom *g = &p->g;
    size_t kvb = c->kv8 ? 1 : 2, kv_guard = round_up((size_t)(2 * g->kvs) * kvb, GUARD_BYTES);
    int nscale = c->kv_scale > 0 ? c->dqk / c->kv_scale : 1;
    size_t stats = (size_t)c->sq * (size_t)c->hq * sizeof(float);
    const struct { size_t body, guard; int has; } spec[N_BUF] = {
        [B_Q] = {(size_t)c->sq * (size_t)g->qs * 2, GUARD_BYTES, 1},
        [B_KV] = {(size_t)c->skv * (size_t)g->kvs * kvb, kv_guard, 1},
        [B_IDX] = {(size_t)c->sq * (size_t)g->is * 4, GUARD_BYTES, 1},
        [B_SINK] = {(size_t)c->hq * 4, GUARD_BYTES, c->sink},
        [B_LEN] = {(size_t)c->sq * 4, GUARD_BYTES, c->tklen},
        [B_OUT] = {(size_t)c->sq * (size_t)g->os * 2, GUARD_BYTES, 1},
        [B_LSE] = {stats, GUARD_BYTES, c->lse},
        [B_MAXL] = {stats, GUARD_BYTES, c->maxl},
        [B_KVS] = {(size_t)c->skv * (size_t)nscale * 4, GUARD_BYTES, c->kv8 && c->kv_scale},
    };
    for (int i = 0; i < N_BUF; i++) {
        p->has[i] = spec[i].has;
        if (spec[i].has && buf_alloc(&p->b[i], spec[i].body, spec[i].guard)) return problem_free(p), -1;
    }
    /* index guards: a valid index, like the padding */
    {
        Buf *b = &p->b[B_IDX];
        for (size_t o = 0; o + 4 <= b->front; o += 4) memcpy(b->host + o, &(int32_t){c->skv / 2}, 4);
        for (size_t o = b->front + b->body; o + 4 <= buf_bytes(b); o += 4) memcpy(b->host + o, &(int32_t){c->skv / 2}, 4);
    }
    uint64_t s = stream_seed(c, seed, S_Q);
    for (int r = 0; r < c->sq; r++)
        for (int h = 0; h < c->hq; h++)
            for (int d = 0; d < c->dqk; d++)
                *bf16_at(&p->b[B_Q], r * g->qs + h * g->qh + d) = ref_mla_bf16_encode(uniform(&s));
    s = stream_seed(c, seed, S_KV);
    if (c->kv8) {
        /* e4m3 of U(-1, 1) x 4 (the scales bring it back to about U(-1, 1)); scales U(1/8, 1/2), one in 8 of
         * them 0 (= 1) */
        uint8_t *kv8 = (uint8_t *)buf_body(&p->b[B_KV]);
        for (int r = 0; r < c->skv; r++)
            for (int d = 0; d < c->dqk; d++) kv8[(int64_t)r * g->kvs + d] = ref_mla_e4m3_encode(4 * uniform(&s));
        if (c->kv_scale)
            for (int64_t i = 0; i < (int64_t)c->skv * nscale; i++)
                *f32_at(&p->b[B_KVS], i) = below(&s, 8) ? (float)(0.125 + 0.375 * unit(&s)) : 0.0f;
    } else {
        for (int r = 0; r < c->skv; r++)
            for (int d = 0; d < c->dqk; d++) *bf16_at(&p->b[B_KV], r * g->kvs + d) = ref_mla_bf16_encode(uniform(&s));
    }
    int32_t *len = NULL;
    if (c->tklen) {
        s = stream_seed(c, seed, S_LEN);
        len = i32_at(&p->b[B_LEN], 0);
        for (int r = 0; r < c->sq; r++) len[r] = (int32_t)below(&s, (uint64_t)c->topk + 1);
        if (c->tklen == 2) { /* the bit patterns outside [0, topk], in turn from a random row */
            int r0 = (int)below(&s, (uint64_t)c->sq);
            for (int i = 0; i < c->sq; i++) {
                int32_t *l = &len[(r0 + i) % c->sq];
                switch (i % 8) {
                case 0: *l = -1; break;
                case 1: *l = INT32_MIN; break;
                case 2: *l = c->topk + 1; break;
                case 3: *l = INT32_MAX; break;
                case 4: *l = 0; break;
                case 5: *l = (int32_t)(-1 - (int64_t)below(&s, (uint64_t)INT32_MAX)); break;
                case 6: *l = (int32_t)(c->topk + 1 + (int64_t)below(&s, (uint64_t)INT32_MAX - (uint64_t)c->topk)); break;
                default: break; /* drawn in [0, topk] above */
                }
            }
        } else if (c->sq >= 2) {
            int a = (int)below(&s, (uint64_t)c->sq), z;
            do z = (int)below(&s, (uint64_t)c->sq);
            while (z == a);
            len[a] = 0, len[z] = c->topk;
        }
    }
    if (c->sink) {
        s = stream_seed(c, seed, S_SINK);
        int32_t *heads = iota_new(c->hq);
        if (!heads) return problem_free(p), -1;
        partial_shuffle(heads, c->hq, c->hq, &s);
        for (int i = 0; i < c->hq; i++) {
            float v;
            switch (i) {
            case 1: v = -INFINITY; break;
            case 2: v = (float)(1e4 * (1 + unit(&s))); break;
            case 3: v = (float)(-1e4 * (1 + unit(&s))); break;
            default: v = (float)(10 * unit(&s)); break;
            }
            *f32_at(&p->b[B_SINK], heads[i]) = v;
        }
        free(heads);
    }
    if (make_indices(c, p, stream_seed(c, seed, S_IDX), len)) return problem_free(p), -1;
    return 0;
}

/* The reference's view of the problem: the strides the kernel is given (0 when packed). */
static RefMla ref_problem(const Case *c, const Problem *p)
{
    RefMla r;
    memset(&r, 0, sizeof r);
    int st = c->strided;
    r.q = bf16_at(&p->b[B_Q], 0);
    r.q_stride_s = st ? p->g.qs : 0, r.q_stride_h = st ? p->g.qh : 0;
    r.kv = c->kv8 ? NULL : bf16_at(&p->b[B_KV], 0);
    r.kv8 = c->kv8 ? (const uint8_t *)buf_body(&p->b[B_KV]) : NULL;
    r.kv_scale = c->kv8 && c->kv_scale ? f32_at(&p->b[B_KVS], 0) : NULL;
    r.kv_scale_block = c->kv_scale > 0 ? c->kv_scale : 0;
    r.kv_stride_s = st ? p->g.kvs : 0;
    r.indices = i32_at(&p->b[B_IDX], 0);
    r.indices_stride_s = st ? p->g.is : 0;
    r.topk_length = c->tklen ? i32_at(&p->b[B_LEN], 0) : NULL;
    r.attn_sink = c->sink ? f32_at(&p->b[B_SINK], 0) : NULL;
    r.s_q = c->sq, r.s_kv = c->skv, r.h_q = c->hq, r.d_qk = c->dqk, r.topk = c->topk;
    r.sm_scale = c->scale ? (double)c->scale : (double)(float)(1.0 / sqrt((double)c->dqk));
    r.out_stride_s = r.out_stride_h = 0; /* the reference's out is packed doubles */
    return r;
}

/* ---------------------------------------------------------------- the checks */

typedef enum { R_PASS, R_FAIL, R_SKIP } Verdict;

typedef struct Result {
    Verdict verdict;
    int launched, evaluated;
    double rel_l2, maxabs, lse_err, max_err;
    double elem_worst; /* max |out - ref| / (ELEM_ATOL + ELEM_RTOL |ref|) */
    long nan, elem_bad, inf_bad, empty_bad, oob;
    int compared; /* 1: cmp_* hold a comparison, -1: no stored run */
    double cmp_o, cmp_ulp, cmp_lse, cmp_max;
    double run_s, ref_s;
    char worst[256]; /* the worst element or row, for a failure */
    char msg[768];
} Result;

/* Bytes of a buffer outside its logical elements (guards, padding) that are not the 0xFF poison. */
static long out_padding_written(const Case *c, const Problem *p)
{
    const Buf *b = &p->b[B_OUT];
    size_t bytes = buf_bytes(b);
    unsigned char *logical = calloc(bytes, 1);
    if (!logical) return -1;
    for (int r = 0; r < c->sq; r++)
        for (int h = 0; h < c->hq; h++)
            memset(logical + b->front + (size_t)(r * p->g.os + h * p->g.oh) * 2, 1, (size_t)DV * 2);
    long n = 0;
    for (size_t i = 0; i < bytes; i++) n += !logical[i] && b->host[i] != 0xFF;
    free(logical);
    return n;
}

static long guards_written(const Buf *b)
{
    long n = 0;
    for (size_t i = 0; i < b->front; i++) n += b->host[i] != 0xFF;
    for (size_t i = b->front + b->body; i < buf_bytes(b); i++) n += b->host[i] != 0xFF;
    return n;
}

/* One fp32 statistic (lse or max_logits) against the reference: NaN, inf mismatches, relative error. */
static void eval_stat(const char *name, float got, double ref, int s, int h, long *nan, long *inf_bad, double *err,
                      char *worst, size_t wn)
{
    double g = got;
    if (isnan(g)) {
        ++*nan;
        if (!worst[0]) snprintf(worst, wn, "%s[s=%d,h=%d] = NaN, ref %.9g", name, s, h, ref);
        return;
    }
    if (isinf(g) || isinf(ref)) {
        if (g != ref) {
            ++*inf_bad;
            if (!worst[0]) snprintf(worst, wn, "%s[s=%d,h=%d] = %.9g, ref %.9g", name, s, h, g, ref);
        }
        return;
    }
    double e = fabs(g - ref) / fmax(1.0, fabs(ref));
    if (e > *err) *err = e;
}

/* out, lse and max_logits (as the kernel left them) against the reference. */
static void evaluate(const Case *c, const Problem *p, const double *ref_o, const double *ref_lse,
                     const double *ref_max, Result *r)
{
    double num = 0, den = 0, worst_ratio = 0;
    long o_nan = 0;
    r->maxabs = r->lse_err = r->max_err = 0;
    r->nan = r->elem_bad = r->inf_bad = r->empty_bad = 0;
    r->worst[0] = 0;
    char worst_elem[256] = "", first[256] = "";
    for (int s = 0; s < c->sq; s++)
        for (int h = 0; h < c->hq; h++) {
            size_t row = (size_t)s * c->hq + h;
            const double *ref_row = ref_o + row * DV;
            int empty = isinf(ref_lse[row]);
            for (int d = 0; d < DV; d++) {
                double x = ref_mla_bf16_decode(*bf16_at(&p->b[B_OUT], s * p->g.os + h * p->g.oh + d)), y = ref_row[d];
                if (isnan(x)) {
                    r->nan++, o_nan++;
                    if (!first[0]) snprintf(first, sizeof first, "out[s=%d,h=%d,d=%d] = NaN, ref %.6g", s, h, d, y);
                    continue;
                }
                double e = fabs(x - y), bound = ELEM_ATOL + ELEM_RTOL * fabs(y);
                num += (x - y) * (x - y);
                den += y * y;
                if (e > r->maxabs) r->maxabs = e;
                if (e > bound) r->elem_bad++;
                if (e / bound > worst_ratio) {
                    worst_ratio = e / bound;
                    snprintf(worst_elem, sizeof worst_elem, "out[s=%d,h=%d,d=%d] = %.6g, ref %.6g", s, h, d, x, y);
                }
                if (empty && x != 0.0) {
                    r->empty_bad++;
                    if (!first[0])
                        snprintf(first, sizeof first, "out[s=%d,h=%d,d=%d] = %.6g in a row with no valid index", s, h,
                                 d, x);
                }
            }
            if (c->lse)
                eval_stat("lse", *f32_at(&p->b[B_LSE], (int64_t)row), ref_lse[row], s, h, &r->nan, &r->inf_bad,
                          &r->lse_err, first, sizeof first);
            if (c->maxl)
                eval_stat("max_logits", *f32_at(&p->b[B_MAXL], (int64_t)row), ref_max[row], s, h, &r->nan,
                          &r->inf_bad, &r->max_err, first, sizeof first);
        }
    r->elem_worst = worst_ratio;
    r->rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    if (o_nan) r->rel_l2 = r->maxabs = INFINITY; /* an unwritten element is an unbounded error */
    r->oob = out_padding_written(c, p);
    if (c->lse) r->oob += guards_written(&p->b[B_LSE]);
    if (c->maxl) r->oob += guards_written(&p->b[B_MAXL]);
    /* the worst: a NaN / inf / empty-row finding first, else the element worst against its bound */
    snprintf(r->worst, sizeof r->worst, "%s", first[0] ? first : worst_elem);
}

static int numerics_pass(const Result *r)
{
    return !r->nan && !r->inf_bad && !r->empty_bad && !r->oob && !r->elem_bad && r->rel_l2 <= REL_L2_TOL &&
           r->lse_err <= STAT_TOL && r->max_err <= STAT_TOL;
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
    Problem p;
    int made;
    double *ref_o, *ref_lse, *ref_max;
} Run;

static void run_free(Env *env, Run *run)
{
    for (int i = 0; i < N_BUF; i++)
        if (run->p.b[i].dev) env->cu.MemFree(run->p.b[i].dev);
    if (run->made) problem_free(&run->p);
    free(run->ref_o), free(run->ref_lse), free(run->ref_max);
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

static void print_stats(const Case *c, const Stats *st)
{
    printf("  inputs: %ld of %ld positions valid, %ld duplicates, %d rows with no valid index", st->valid,
           st->positions, st->dups, st->empty_rows);
    if (c->tklen)
        printf("; topk_length: %d rows 0, %d rows topk, %ld valid indices past it", st->zero_len_rows,
               st->full_len_rows, st->past_len);
    printf("; invalid by kind: -2^31 %ld, -1 %ld, s_kv %ld, 2^31-1 %ld, large %ld, negative %ld\n", st->kinds[0],
           st->kinds[1], st->kinds[2], st->kinds[3], st->kinds[4], st->kinds[5]);
}

/* Host images, device buffers, uploads (outputs: their poison). */
static int stage_inputs(Env *env, const Case *c, Run *run, Result *res)
{
    if (make_problem(c, input_seed(c, env->opt.seed), &run->p)) return result_fail(res, "out of host memory");
    run->made = 1;
    if (!env->opt.quiet) print_stats(c, &run->p.st);
    for (int i = 0; i < N_BUF; i++) {
        if (!run->p.has[i]) continue;
        Buf *b = &run->p.b[i];
        char what[64];
        snprintf(what, sizeof what, "cuMemAlloc (%s)", BUF_NAMES[i]);
        CU_TRY(env->cu.MemAlloc(&b->dev, buf_bytes(b)), res, what);
        snprintf(what, sizeof what, "cuMemcpyHtoD (%s)", BUF_NAMES[i]);
        CU_TRY(env->cu.MemcpyHtoD(b->dev, b->host, buf_bytes(b)), res, what);
    }
    return 0;
}

static void *dev_body(const Problem *p, int i)
{
    return p->has[i] ? (void *)(uintptr_t)(p->b[i].dev + p->b[i].front) : NULL;
}

static fa4_mla_sparse_args case_args(const Case *c, const Problem *p)
{
    fa4_mla_sparse_args a = FA4_MLA_SPARSE_ARGS_INIT;
    a.q = dev_body(p, B_Q);
    a.kv = dev_body(p, B_KV);
    a.indices = dev_body(p, B_IDX);
    a.out = dev_body(p, B_OUT);
    a.lse = dev_body(p, B_LSE);
    a.max_logits = dev_body(p, B_MAXL);
    a.attn_sink = dev_body(p, B_SINK);
    a.topk_length = dev_body(p, B_LEN);
    a.s_q = c->sq, a.s_kv = c->skv, a.h_q = c->hq, a.d_qk = c->dqk, a.topk = c->topk;
    if (c->strided) {
        a.q_stride[0] = p->g.qs, a.q_stride[1] = p->g.qh;
        a.kv_stride = p->g.kvs;
        a.indices_stride = p->g.is;
        a.out_stride[0] = p->g.os, a.out_stride[1] = p->g.oh;
    }
    a.sm_scale = c->scale;
    a.config = c->config[0] ? c->config : NULL;
    if (c->kv8) {
        a.kv_dtype = FA4_E4M3;
        a.kv_scale = dev_body(p, B_KVS);
        a.kv_scale_block = c->kv_scale > 0 ? c->kv_scale : 0;
    }
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

/* fa4_mla_sparse_fwd, synchronize, copy the outputs back (guards included). */
static int launch(Env *env, const Case *c, Run *run, Result *res)
{
    fa4_ctx *fa = NULL;
    if (fa4_for(env, c->target, &fa, res)) return -1;
    fa4_mla_sparse_args a = case_args(c, &run->p);
    double t0 = now_s();
    fa4_status s = fa4_mla_sparse_fwd(fa, &a, NULL);
    if (s != FA4_OK) {
        result_fail(res, "fa4_mla_sparse_fwd: %s: %s", fa4_status_string(s), fa4_last_error(fa));
        if ((s == FA4_ERR_UNSUPPORTED || s == FA4_ERR_INVALID_ARGUMENT) && !env->opt.no_skip) res->verdict = R_SKIP;
        return -1;
    }
    res->launched = 1;
    CU_TRY(env->cu.CtxSynchronize(), res, "cuCtxSynchronize after the kernel");
    res->run_s = now_s() - t0;
    const int outs[3] = {B_OUT, B_LSE, B_MAXL};
    for (int i = 0; i < 3; i++) {
        Buf *b = &run->p.b[outs[i]];
        if (run->p.has[outs[i]]) CU_TRY(env->cu.MemcpyDtoH(b->host, b->dev, buf_bytes(b)), res, "cuMemcpyDtoH");
    }
    return 0;
}

static int reference(const Case *c, Run *run, Result *res)
{
    size_t rows = (size_t)c->sq * (size_t)c->hq;
    run->ref_o = malloc(rows * DV * sizeof(double));
    run->ref_lse = malloc(rows * sizeof(double));
    run->ref_max = malloc(rows * sizeof(double));
    if (!run->ref_o || !run->ref_lse || !run->ref_max) return result_fail(res, "out of host memory for the reference");
    RefMla p = ref_problem(c, &run->p);
    char err[256];
    double t0 = now_s();
    if (ref_mla_sparse_fwd(&p, run->ref_o, run->ref_lse, run->ref_max, err, sizeof err))
        return result_fail(res, "reference: %s", err);
    res->ref_s = now_s() - t0;
    return 0;
}

/* ---------------------------------------------------------------- dumps */

static void dump_path(const char *dir, const char *id, char *buf, size_t n) { snprintf(buf, n, "%s/%s.bin", dir, id); }

static size_t stat_count(const Case *c, int on) { return on ? (size_t)c->sq * (size_t)c->hq : 0; }

static int dump_write(const Env *env, const Case *c, const char *id, const Run *run, Result *res)
{
    char path[4096], text[CASE_TEXT_MAX];
    dump_path(env->opt.dump_dir, id, path, sizeof path);
    case_format(c, text, sizeof text);
    const Buf *o = &run->p.b[B_OUT];
    size_t ln = stat_count(c, c->lse), mn = stat_count(c, c->maxl);
    FILE *f = fopen(path, "wb");
    if (!f) return result_fail(res, "--dump: cannot create %s: %s", path, strerror(errno));
    fprintf(f, "fa4sim-mla-dump 1 id=%s seed=%" PRIu64 " out_bytes=%zu lse_floats=%zu max_floats=%zu\n%s\n", id,
            input_seed(c, env->opt.seed), o->body, ln, mn, text);
    int ok = fwrite(buf_body(o), 1, o->body, f) == o->body &&
             (!ln || fwrite(buf_body(&run->p.b[B_LSE]), sizeof(float), ln, f) == ln) &&
             (!mn || fwrite(buf_body(&run->p.b[B_MAXL]), sizeof(float), mn, f) == mn);
    if (fclose(f) || !ok) return result_fail(res, "--dump: writing %s failed", path);
    return 0;
}

/* Reads a dump of this case; 1 when there is none. */
static int dump_read(const char *path, const char *text, size_t ob, size_t ln, size_t mn, unsigned char *o, float *lse,
                     float *mx, char *err, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? 1 : errf(err, n, "--compare: cannot open %s: %s", path, strerror(errno));
    char head[256], stored[CASE_TEXT_MAX + 2];
    size_t sob = 0, sln = 0, smn = 0;
    int rc = 0;
    if (!fgets(head, sizeof head, f) ||
        sscanf(head, "fa4sim-mla-dump 1 id=%*s seed=%*s out_bytes=%zu lse_floats=%zu max_floats=%zu", &sob, &sln,
               &smn) != 3 ||
        !fgets(stored, sizeof stored, f))
        rc = errf(err, n, "--compare: %s is not a sim_mla dump", path);
    else if (stored[strcspn(stored, "\n")] = 0, strcmp(stored, text))
        rc = errf(err, n, "--compare: %s holds another case: %s", path, stored);
    else if (sob != ob || sln != ln || smn != mn)
        rc = errf(err, n, "--compare: %s holds %zu out bytes, %zu lse and %zu max_logits floats; this case has %zu, %zu "
                  "and %zu", path, sob, sln, smn, ob, ln, mn);
    else if (fread(o, 1, ob, f) != ob || fread(lse, sizeof(float), ln, f) != ln || fread(mx, sizeof(float), mn, f) != mn)
        rc = errf(err, n, "--compare: %s is truncated", path);
    fclose(f);
    return rc;
}

/* |a - b| where equal infinities and two NaNs count as 0, one NaN as inf. */
/* diff relative to max(1, |a|, |b|): the measure of the lse / max_logits checks */
static double rel_diff(double a, double b)
{
    double d = abs_diff(a, b);
    return d == 0.0 || isinf(d) ? d : d / fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* The bf16 ulp at magnitude x (x > 0, normal). */
static double bf16_ulp(double x)
{
    int e;
    frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
    return ldexp(1.0, e - 1 - 7);
}

static int compare_stored(const Env *env, const Case *c, const char *id, const Run *run, Result *res)
{
    char path[4096], text[CASE_TEXT_MAX], err[768];
    dump_path(env->opt.compare_dir, id, path, sizeof path);
    case_format(c, text, sizeof text);
    const Problem *p = &run->p;
    size_t ob = p->b[B_OUT].body, ln = stat_count(c, c->lse), mn = stat_count(c, c->maxl);
    unsigned char *so = malloc(ob ? ob : 1);
    float *sl = malloc(ln ? ln * sizeof(float) : 1), *sm = malloc(mn ? mn * sizeof(float) : 1);
    int rc = so && sl && sm ? dump_read(path, text, ob, ln, mn, so, sl, sm, err, sizeof err)
                            : errf(err, sizeof err, "out of memory");
    if (rc == 0) {
        res->compared = 1;
        res->cmp_o = res->cmp_ulp = res->cmp_lse = res->cmp_max = 0;
        const uint16_t *stored = (const uint16_t *)(const void *)so;
        for (int s = 0; s < c->sq; s++)
            for (int h = 0; h < c->hq; h++)
                for (int d = 0; d < DV; d++) {
                    int64_t e = s * p->g.os + h * p->g.oh + d;
                    double a = ref_mla_bf16_decode(*bf16_at(&p->b[B_OUT], e)), b = ref_mla_bf16_decode(stored[e]);
                    double dd = abs_diff(a, b);
                    res->cmp_o = fmax(res->cmp_o, dd);
                    res->cmp_ulp = fmax(res->cmp_ulp, dd / bf16_ulp(fmax(fmax(fabs(a), fabs(b)), CMP_O_FLOOR)));
                }
        for (size_t i = 0; i < ln; i++) res->cmp_lse = fmax(res->cmp_lse, rel_diff(*f32_at(&p->b[B_LSE], (int64_t)i), sl[i]));
        for (size_t i = 0; i < mn; i++) res->cmp_max = fmax(res->cmp_max, rel_diff(*f32_at(&p->b[B_MAXL], (int64_t)i), sm[i]));
    } else if (rc == 1) {
        res->compared = -1;
        rc = 0;
    } else {
        result_fail(res, "%s", err);
    }
    free(so), free(sl), free(sm);
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
    evaluate(c, &run.p, run.ref_o, run.ref_lse, run.ref_max, res);
    res->verdict = numerics_pass(res) ? R_PASS : R_FAIL;
    if (env->opt.dump_dir && dump_write(env, c, id, &run, res)) goto out;
    if (env->opt.compare_dir && compare_stored(env, c, id, &run, res) == 0 && res->compared == 1 &&
        (res->cmp_ulp > CMP_O_ULPS || res->cmp_lse > CMP_STAT_TOL || res->cmp_max > CMP_STAT_TOL)) {
        res->verdict = R_FAIL;
        snprintf(res->msg, sizeof res->msg, "differs from the stored run by more than %g bf16 ulps (out) / %g (lse, "
                 "max_logits)", CMP_O_ULPS, CMP_STAT_TOL);
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
        printf(" relL2=%.3e maxabs=%.3e elem_bad=%ld lse_err=%.3e max_err=%.3e nan=%ld", r->rel_l2, r->maxabs,
               r->elem_bad, r->lse_err, r->max_err, r->nan);
        if (r->inf_bad) printf(" inf_bad=%ld", r->inf_bad);
        if (r->empty_bad) printf(" empty_bad=%ld", r->empty_bad);
        if (r->oob) printf(" oob=%ld", r->oob);
        if (r->compared == 1)
            printf(" cmp_o=%.3e cmp_ulp=%.2f cmp_lse=%.3e cmp_max=%.3e", r->cmp_o, r->cmp_ulp, r->cmp_lse, r->cmp_max);
        if (r->compared == -1) printf(" cmp=none");
        /* margin: the largest error / bound of the bounded measures (a NaN or a bad row: inf) */
        double margin = fmax(fmax(r->rel_l2 / REL_L2_TOL, r->elem_worst), fmax(r->lse_err, r->max_err) / STAT_TOL);
        printf(" margin=%.2f", r->nan || r->inf_bad || r->empty_bad || r->oob || isnan(margin) ? INFINITY : margin);
    }
    if (r->verdict == R_FAIL && r->evaluated && !numerics_pass(r))
        printf(" (bounds: relL2 <= %g, |out-ref| <= %g + %g|ref|, lse/max_logits err <= %g, infinities exact, no NaN, "
               "empty rows out=0, no writes outside the outputs) worst: %s",
               REL_L2_TOL, ELEM_ATOL, ELEM_RTOL, STAT_TOL, r->worst);
    if (r->msg[0]) printf(" : %s", r->msg);
    printf("\n");
    if (!env->opt.quiet && r->launched)
        printf("  time: fa4_mla_sparse_fwd + synchronize %.3f s (a cold cache compiles), reference %.3f s\n", r->run_s,
               r->ref_s);
    fflush(stdout);
}

/* ---------------------------------------------------------------- case lists */

/* ---------------------------------------------------------------- --self-test */

static int st_case(const char *line, Case *c)
{
    char err[512];
    return case_parse_line(line, c, err, sizeof err) == 1 ? 0 : (printf("self-test: '%s': %s\n", line, err), -1);
}

static void st_parser(Checks *k)
{
    char err[512], text[CASE_TEXT_MAX], text2[CASE_TEXT_MAX];
    Case c, d;
    const char *full = "target=sm100a sq=8 skv=4096 hq=40 dqk=512 topk=512 sink=1 topk_length=1 invalid=0.25 dup=1 "
                       "empty_rows=2 layout=strided scale=0.5 config=\"a=1 b=2\" seed=7 lse=0 max_logits=0";
    check(k, case_parse_line(full, &c, err, sizeof err) == 1, "full case: %s", err);
    case_format(&c, text, sizeof text);
    check(k, !strcmp(text, full), "canonical form\n  %s\nof\n  %s", text, full);
    check(k, case_parse_line(text, &d, err, sizeof err) == 1, "canonical form does not parse: %s", err);
    case_format(&d, text2, sizeof text2);
    check(k, !strcmp(text, text2), "canonical form is not stable");
    check(k, c.target == FA4_TARGET_SM100A && c.sq == 8 && c.skv == 4096 && c.hq == 40 && c.dqk == 512 &&
                 c.topk == 512 && c.sink && c.tklen && c.invalid == 0.25 && c.dup && c.empty_rows == 2 && c.strided &&
                 c.scale == 0.5f && !strcmp(c.config, "a=1 b=2") && c.has_seed && c.seed == 7 && !c.lse && !c.maxl,
          "full case fields");
    check(k, case_parse_line("  # only a comment", &c, err, sizeof err) == 0, "comment line");
    check(k, case_parse_line("topk=64 dqk=576 hq=64 skv=64 sq=1 target=sm90a # c", &c, err, sizeof err) == 1 &&
                 !c.sink && !c.tklen && c.invalid == 0 && !c.dup && !c.empty_rows && !c.strided && c.scale == 0 &&
                 !c.config[0] && !c.has_seed && c.lse && c.maxl,
          "defaults");
    case_format(&c, text, sizeof text);
    check(k, !strcmp(text, "target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64"), "canonical order: %s", text);
    char id1[ID_HEX + 1], id2[ID_HEX + 1], id3[ID_HEX + 1];
    case_parse_line("target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64", &d, err, sizeof err);
    case_id(&c, 1, id1), case_id(&d, 1, id2), case_id(&d, 2, id3);
    check(k, !strcmp(id1, id2) && strcmp(id2, id3) && strlen(id1) == ID_HEX, "ids %s %s %s", id1, id2, id3);
    case_parse_line("target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 seed=5", &d, err, sizeof err);
    check(k, input_seed(&d, 1) == 5 && input_seed(&c, 9) == 9, "seed= overrides --seed");
    const struct { const char *line, *want; } bad[] = {
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 color=red", "unknown key 'color'"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 sq=2", "given twice"},
        {"target=sm90a sq=1 hq=64 dqk=576 topk=64", "missing required key 'skv'"},
        {"target=sm80 sq=1 skv=64 hq=64 dqk=576 topk=64", "target=sm80"},
        {"target=sm90a sq=1x skv=64 hq=64 dqk=576 topk=64", "sq=1x"},
        {"target=sm90a sq=0 skv=64 hq=64 dqk=576 topk=64", "sq=0"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=128 topk=64", "dqk=128"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 invalid=1.5", "invalid=1.5"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 invalid=-0.1", "invalid=-0.1"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 invalid=nan", "invalid=nan"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 sink=2", "sink=2"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 dup=yes", "dup=yes"},
        {"target=sm90a sq=2 skv=64 hq=64 dqk=576 topk=64 empty_rows=3", "empty_rows=3"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=128", "dup=0 needs"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 layout=tiled", "layout=tiled"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 scale=-1", "scale=-1"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 seed=-1", "seed=-1"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 config=\"bn=64", "unterminated quote"},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 config=BN;", "config="},
        {"target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=64 sink", "expected key=value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int r = case_parse_line(bad[i].line, &c, err, sizeof err);
        check(k, r == -1 && strstr(err, bad[i].want), "'%s' gave %d '%s', expected an error with '%s'", bad[i].line, r,
              err, bad[i].want);
    }
    /* dup=0 with topk > skv is fine when enough positions are invalid */
    check(k, case_parse_line("target=sm90a sq=1 skv=64 hq=64 dqk=576 topk=128 invalid=0.5", &c, err, sizeof err) == 1,
          "topk 128, skv 64, half invalid: %s", err);
}

/* The generator: what the case words promise is in the buffers. */
static void st_generator(Checks *k)
{
    Case c;
    Problem p, p2;
    const char *line = "target=sm90a sq=8 skv=300 hq=8 dqk=576 topk=128 sink=1 topk_length=1 invalid=0.3 dup=1 "
                       "empty_rows=2 layout=strided";
    if (st_case(line, &c) || make_problem(&c, 1, &p)) {
        check(k, 0, "generator: case or problem");
        return;
    }
    const Stats *st = &p.st;
    for (int i = 0; i < N_KINDS; i++) check(k, st->kinds[i] > 0, "no invalid index of kind %d", i);
    check(k, st->positions == 8 * 128, "positions %ld", st->positions);
    check(k, st->dups > 0 && st->past_len > 0, "dups %ld, valid past topk_length %ld", st->dups, st->past_len);
    check(k, st->zero_len_rows >= 1 && st->full_len_rows >= 1, "lengths 0: %d rows, topk: %d rows", st->zero_len_rows,
          st->full_len_rows);
    RefMla r = ref_problem(&c, &p);
    int all_invalid = 0, inv_ok = 1, no_key = 0;
    for (int s = 0; s < c.sq; s++) {
        const int32_t *row = i32_at(&p.b[B_IDX], s * p.g.is);
        int bad = 0, any = 0;
        for (int t = 0; t < c.topk; t++) bad += index_kind(row[t], c.skv) >= 0, any |= ref_mla_valid(&r, s, t);
        all_invalid += bad == c.topk, no_key += !any;
        inv_ok &= bad == c.topk || bad == invalid_per_row(&c);
        check(k, bad == c.topk ? !any : 1, "row %d: every index invalid but the reference sees one", s);
        for (int64_t t = c.topk; t < p.g.is; t++)
            check(k, row[t] == c.skv / 2, "row %d: index padding %d holds %d", s, (int)t, row[t]);
    }
    check(k, all_invalid == 2, "%d rows with every index invalid, expected 2 (empty_rows=2)", all_invalid);
    check(k, inv_ok, "a row that is not empty has other than round(0.3 * 128) = %d invalid positions",
          invalid_per_row(&c));
    check(k, st->empty_rows == no_key && no_key >= 2, "%d empty rows counted, %d rows where the reference sees no "
          "key", st->empty_rows, no_key);
    int inf_lo = 0, big = 0, small = 0, regular = 0;
    for (int h = 0; h < c.hq; h++) {
        float v = *f32_at(&p.b[B_SINK], h);
        inf_lo += isinf(v) && v < 0, big += v >= 1e4f, small += isfinite(v) && v <= -1e4f, regular += v >= 0 && v < 10;
    }
    check(k, inf_lo == 1 && big == 1 && small == 1 && regular == c.hq - 3, "sinks: -inf %d, +large %d, -large %d, "
          "regular %d", inf_lo, big, small, regular);
    /* padding and guards: NaN in q and kv */
    const uint16_t *q = bf16_at(&p.b[B_Q], 0), *kv = bf16_at(&p.b[B_KV], 0);
    check(k, isnan(ref_mla_bf16_decode(q[c.dqk])) && isnan(ref_mla_bf16_decode(q[c.hq * p.g.qh])) &&
                 isnan(ref_mla_bf16_decode(kv[c.dqk])) && isnan(ref_mla_bf16_decode(kv[-1])) &&
                 isnan(ref_mla_bf16_decode(kv[-p.g.kvs])) && isnan(ref_mla_bf16_decode(kv[(int64_t)c.skv * p.g.kvs])),
          "padding, kv row -1 and kv row s_kv are NaN");
    check(k, p.b[B_KV].front >= (size_t)(2 * p.g.kvs * 2) && p.b[B_KV].back >= (size_t)(2 * p.g.kvs * 2) &&
                 p.b[B_KV].front % GUARD_BYTES == 0,
          "kv guards hold two rows, 256 B aligned");
    double qmax = 0;
    for (int d = 0; d < c.dqk; d++) qmax = fmax(qmax, fabs(ref_mla_bf16_decode(q[d])));
    check(k, qmax > 0.9 && qmax <= 1.0, "q values not U(-1, 1): max |q| %g", qmax);
    /* the same case and seed: the same bytes; another seed: others */
    if (!make_problem(&c, 1, &p2)) {
        int same = 1;
        for (int i = 0; i < N_BUF; i++)
            if (p.has[i]) same &= !memcmp(p.b[i].host, p2.b[i].host, buf_bytes(&p.b[i]));
        check(k, same, "the same case and seed gave other inputs");
        problem_free(&p2);
    }
    if (!make_problem(&c, 2, &p2)) {
        check(k, memcmp(p.b[B_Q].host, p2.b[B_Q].host, buf_bytes(&p.b[B_Q])) &&
                     memcmp(p.b[B_IDX].host, p2.b[B_IDX].host, buf_bytes(&p.b[B_IDX])),
              "seed 2 gave the inputs of seed 1");
        problem_free(&p2);
    }
    problem_free(&p);
    /* dup=0: distinct valid indices in every row; no topk_length: no position past it */
    if (st_case("target=sm90a sq=4 skv=70 hq=2 dqk=512 topk=64 invalid=0.1", &c) || make_problem(&c, 3, &p)) {
        check(k, 0, "generator: dup=0 case");
        return;
    }
    check(k, p.st.dups == 0 && p.st.past_len == 0 && p.st.empty_rows == 0 && p.st.valid == 4 * (64 - 6),
          "dup=0: dups %ld, past %ld, empty %d, valid %ld", p.st.dups, p.st.past_len, p.st.empty_rows, p.st.valid);
    check(k, !p.has[B_SINK] && !p.has[B_LEN] && p.has[B_LSE] && p.has[B_MAXL], "optional buffers");
    problem_free(&p);
    /* topk > skv with dup=1: drawn with replacement */
    if (st_case("target=sm90a sq=2 skv=16 hq=2 dqk=512 topk=64 dup=1", &c) || make_problem(&c, 3, &p)) {
        check(k, 0, "generator: topk > skv case");
        return;
    }
    check(k, p.st.valid == 128 && p.st.dups >= 128 - 32, "topk 64 > skv 16: valid %ld, dups %ld", p.st.valid, p.st.dups);
    problem_free(&p);
    /* topk_length=wild: -1, -2^31, topk + 1, 2^31 - 1, 0, another negative and another past topk, each read as the
     * contract says by the reference (below 0: an empty row, past topk: every position) */
    if (st_case("target=sm90a sq=9 skv=300 hq=2 dqk=512 topk=64 topk_length=wild", &c) || make_problem(&c, 5, &p)) {
        check(k, 0, "generator: topk_length=wild case");
        return;
    }
    const int32_t *len = i32_at(&p.b[B_LEN], 0);
    int m1 = 0, min = 0, over1 = 0, imax = 0, zero = 0, neg = 0, over = 0, ok = 1;
    RefMla rw = ref_problem(&c, &p);
    for (int s = 0; s < c.sq; s++) {
        m1 += len[s] == -1, min += len[s] == INT32_MIN, over1 += len[s] == 65, imax += len[s] == INT32_MAX;
        zero += len[s] == 0, neg += len[s] < 0, over += len[s] > 64;
        for (int t = 0; t < c.topk; t++) ok &= ref_mla_valid(&rw, s, t) == (len[s] > t && t < 64);
    }
    check(k, m1 && min && over1 && imax && zero && neg >= 3 && over >= 3, "wild lengths: -1 %d, -2^31 %d, topk+1 %d, "
          "2^31-1 %d, 0 %d, negative %d, past topk %d", m1, min, over1, imax, zero, neg, over);
    check(k, ok, "the reference reads a wild length other than clamped to [0, topk]");
    check(k, p.st.zero_len_rows == neg + zero && p.st.full_len_rows >= over, "rows of length 0: %d, of topk: %d",
          p.st.zero_len_rows, p.st.full_len_rows);
    problem_free(&p);
}

/* evaluate() on outputs written as the reference rounded (passes) and with each kind of damage (fails). */
static void st_evaluate(Checks *k)
{
    Case c;
    Problem p;
    if (st_case("target=sm90a sq=4 skv=96 hq=3 dqk=576 topk=64 sink=1 topk_length=1 invalid=0.25 empty_rows=1 "
                "layout=strided", &c) || make_problem(&c, 11, &p)) {
        check(k, 0, "evaluate: case or problem");
        return;
    }
    size_t rows = (size_t)c.sq * c.hq;
    double *ro = malloc(rows * DV * sizeof(double)), rl[12], rm[12];
    RefMla r = ref_problem(&c, &p);
    char err[256];
    check(k, ro && ref_mla_sparse_fwd(&r, ro, rl, rm, err, sizeof err) == 0, "reference: %s", err);
    int e_s = -1, e_h = 0, f_s = -1, f_h = 0; /* an empty and a full row */
    for (int s = 0; s < c.sq; s++)
        for (int h = 0; h < c.hq; h++) {
            if (isinf(rl[s * c.hq + h]) && e_s < 0) e_s = s, e_h = h;
            if (isfinite(rl[s * c.hq + h]) && f_s < 0) f_s = s, f_h = h;
        }
    check(k, e_s >= 0 && f_s >= 0, "the problem has an empty row and a full one");
    if (e_s < 0 || f_s < 0) goto out;
    Buf *ob = &p.b[B_OUT];
    float *lse = f32_at(&p.b[B_LSE], 0), *mx = f32_at(&p.b[B_MAXL], 0);
#define OUT(s, h, d) (*bf16_at(ob, (s) * p.g.os + (h) * p.g.oh + (d)))
    for (int s = 0; s < c.sq; s++)
        for (int h = 0; h < c.hq; h++)
            for (int d = 0; d < DV; d++) OUT(s, h, d) = ref_mla_bf16_encode(ro[((size_t)s * c.hq + h) * DV + d]);
    for (size_t i = 0; i < rows; i++) lse[i] = (float)rl[i], mx[i] = (float)rm[i];
    Result res;
    memset(&res, 0, sizeof res);
    evaluate(&c, &p, ro, rl, rm, &res);
    check(k, numerics_pass(&res) && res.rel_l2 < 4e-3 && res.lse_err < 1e-6 && res.max_err < 1e-6,
          "rounded reference: relL2 %g elem %ld lse %g max %g nan %ld inf %ld empty %ld oob %ld", res.rel_l2,
          res.elem_bad, res.lse_err, res.max_err, res.nan, res.inf_bad, res.empty_bad, res.oob);
    int fs = f_s, fh = f_h, es = e_s, eh = e_h;
    size_t fr = (size_t)fs * c.hq + fh, er = (size_t)es * c.hq + eh;
    uint16_t keep;
    /* each damage, then undone */
#define EXPECT_FAIL(cond, what)                                                                             \
    do {                                                                                                    \
        evaluate(&c, &p, ro, rl, rm, &res);                                                                 \
        check(k, !numerics_pass(&res) && (cond), "%s passed (or was counted wrong): %s", what, res.worst); \
    } while (0)
    keep = OUT(fs, fh, 5), OUT(fs, fh, 5) = 0x7FC0;
    EXPECT_FAIL(res.nan == 1 && isinf(res.rel_l2), "NaN in out");
    OUT(fs, fh, 5) = keep;
    keep = OUT(es, eh, 7), OUT(es, eh, 7) = ref_mla_bf16_encode(1e-6);
    EXPECT_FAIL(res.empty_bad == 1, "a non-zero out in an empty row");
    OUT(es, eh, 7) = keep;
    /* one element off by just over atol + rtol |ref|: relL2 stays small, the elementwise test fails */
    {
        double y = ro[fr * DV + 9], bump = ELEM_ATOL + ELEM_RTOL * fabs(y) + 0.01;
        keep = OUT(fs, fh, 9), OUT(fs, fh, 9) = ref_mla_bf16_encode(y + bump);
        EXPECT_FAIL(res.elem_bad == 1 && res.rel_l2 <= REL_L2_TOL, "one element off by 1e-2 + 1e-2|ref| + 0.01");
        OUT(fs, fh, 9) = keep;
    }
    lse[er] = 0.0f;
    EXPECT_FAIL(res.inf_bad == 1, "a finite lse in an empty row");
    lse[er] = -INFINITY;
    EXPECT_FAIL(res.inf_bad == 1, "lse -inf in an empty row (must be +inf)");
    lse[er] = INFINITY;
    mx[er] = INFINITY;
    EXPECT_FAIL(res.inf_bad == 1, "max_logits +inf in an empty row (must be -inf)");
    mx[er] = -INFINITY;
    lse[fr] = INFINITY;
    EXPECT_FAIL(res.inf_bad == 1, "lse +inf in a row with keys");
    lse[fr] = (float)(rl[fr] + 2e-4 * fmax(1.0, fabs(rl[fr])));
    EXPECT_FAIL(res.lse_err > STAT_TOL, "lse off by 2e-4");
    lse[fr] = (float)(rl[fr] + 5e-5 * fmax(1.0, fabs(rl[fr])));
    evaluate(&c, &p, ro, rl, rm, &res);
    check(k, numerics_pass(&res), "lse off by 5e-5 failed (lse_err %g)", res.lse_err);
    lse[fr] = (float)rl[fr];
    mx[fr] = (float)(rm[fr] + 2e-4 * fmax(1.0, fabs(rm[fr])));
    EXPECT_FAIL(res.max_err > STAT_TOL, "max_logits off by 2e-4");
    mx[fr] = NAN;
    EXPECT_FAIL(res.nan == 1, "max_logits NaN");
    mx[fr] = (float)rm[fr];
    /* writes outside the outputs: out's head padding, its guard, lse's guard */
    {
        unsigned char *pad = (unsigned char *)&OUT(fs, fh, DV), *g0 = ob->host, *lg = p.b[B_LSE].host + buf_bytes(&p.b[B_LSE]) - 1;
        *pad = 0;
        EXPECT_FAIL(res.oob == 1, "a write into out's padding");
        *pad = 0xFF, *g0 = 0;
        EXPECT_FAIL(res.oob == 1, "a write before out");
        *g0 = 0xFF, *lg = 0;
        EXPECT_FAIL(res.oob == 1, "a write after lse");
        *lg = 0xFF;
    }
    evaluate(&c, &p, ro, rl, rm, &res);
    check(k, numerics_pass(&res), "undone damage still fails: %s", res.worst);
    /* every valid index dropped from one row is an error of order 1 */
    {
        double y0 = ro[fr * DV];
        for (int d = 0; d < DV; d++) OUT(fs, fh, d) = 0;
        evaluate(&c, &p, ro, rl, rm, &res);
        check(k, !numerics_pass(&res) && (res.elem_bad > 0 || fabs(y0) < ELEM_ATOL), "a zeroed row passed");
    }
#undef EXPECT_FAIL
#undef OUT
out:
    free(ro);
    problem_free(&p);
}

/* compare's ulp measure */
static void st_compare(Checks *k)
{
    check(k, bf16_ulp(1.0) == 0x1p-7 && bf16_ulp(0.75) == 0x1p-8 && bf16_ulp(0x1p-6) == 0x1p-13,
          "bf16 ulp of 1, 0.75, 2^-6");
    check(k, abs_diff(INFINITY, INFINITY) == 0 && abs_diff(NAN, NAN) == 0 && isinf(abs_diff(NAN, 1)) && abs_diff(1, 0.5) == 0.5,
          "diff of infinities and NaN");
    check(k, rel_diff(200, 200.002) > 0.99e-5 && rel_diff(200, 200.002) < 1.01e-5 && rel_diff(0.5, 0.25) == 0.25 &&
                 isinf(rel_diff(-INFINITY, 3)) && rel_diff(INFINITY, INFINITY) == 0,
          "relative diff of the statistics");
}

static int self_test(void)
{
    Checks k = {0, 0};
    st_parser(&k);
    st_generator(&k);
    st_evaluate(&k);
    st_compare(&k);
    printf("sim_mla --self-test: %d checks, %d failed\n", k.run, k.failed);
    return k.failed ? 1 : 0;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fprintf(f, "usage: sim_mla [--seed N] [--cases FILE | CASE WORDS...] [--dump DIR] [--compare DIR]\n"
               "               [--quiet] [--no-skip]\n"
               "       sim_mla --self-test\n"
               "CASE WORDS: target=sm90a|sm100a sq=N skv=N hq=N dqk=576|512 topk=N [sink=0|1 topk_length=0|1\n"
               "            invalid=F dup=0|1 empty_rows=N layout=packed|strided|odd scale=X config=\"...\" seed=N\n"
               "            lse=0|1 max_logits=0|1]; each also as --key VALUE.\n"
               "The syntax, the inputs, the checks and the dump format are described at the top of\n"
               "tests/sim/sim_mla.c.\n");
}

/* One case: run, report; its verdict (case_main counts it). */
static CaseVerdict run_one(void *env_, const void *c_, int *compared)
{
    Env *env = env_;
    const Case *c = c_;
    char id[ID_HEX + 1];
    Result r;
    case_id(c, input_seed(c, env->opt.seed), id);
    run_case(env, c, id, &r);
    report(env, c, id, &r);
    *compared = r.compared;
    return r.verdict == R_PASS ? CASE_PASS : r.verdict == R_SKIP ? CASE_SKIP : CASE_FAIL;
}

static void run_done(void *env_, const Tally *t)
{
    Env *env = env_;
    if (env->opt.compare_dir)
        printf("sim_mla: compared %d cases with %s (bounds: out %g bf16 ulps, lse and max_logits %g); %d had no "
               "stored run\n", t->compared, env->opt.compare_dir, CMP_O_ULPS, CMP_STAT_TOL, t->missing);
    for (int i = 0; i < 3; i++) fa4_destroy(env->fa[i]);
}

int main(int argc, char **argv)
{
    Env env;
    memset(&env, 0, sizeof env);
    env.opt.seed = DEFAULT_SEED;
    const CaseRunner runner = {&SYNTAX, self_test, NULL, run_one, run_done};
    return case_main(&runner, &env, &env.cu, &env.opt, argc, argv);
}
