/* main.c - the fa4gen command line: flags -> config -> PTX file or plan.
 *
 * Exit status: 0 ok, 1 I/O or internal failure (a failed write to stdout
 * included), 2 invalid input (one line on stderr naming the field, the value
 * and what is allowed; what it echoes is escaped, so it stays one line; a
 * score_mod NVRTC refuses is the one exception: a first line, then one line
 * per diagnostic). A flag the command does not use is invalid input, not
 * ignored, and so is a field given twice (flags may refine a --config text).
 * Every option takes its value as the next argument or after '='.
 *
 * Files: every path the CLI opens by name is a regular file (or, for -d, a
 * directory); a FIFO, device, socket or directory is refused by name before
 * anything is read or written (an input is opened with O_NONBLOCK, so a FIFO
 * never blocks). Output goes to a temporary name beside the file and is
 * renamed into place, so a failed run never creates or truncates it; a
 * symlink is followed (its target is written, the link stays). `-o -` is
 * stdout (mha, mla-sparse, combine). New files get mode 0666 minus the umask;
 * a replaced file keeps its mode. A bundle folder is written into a
 * temporary folder first, so a failed bundle leaves nothing behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aot.h"
#include "cli_tools.h"
#include "fa4gen.h"
#include "score_mod.h"

static const char usage_top[] =
    "usage: fa4gen <command> [options]\n"
    "\n"
    "commands:\n"
    "  mha         emit the PTX of a multi-head attention forward kernel (sm90a, sm100a)\n"
    "  mla-sparse  emit the PTX of a sparse MLA prefill kernel (DeepSeek-V3.2 top-k attention)\n"
    "  combine     emit the split-KV combine kernel (merges what split=1 kernels wrote per split)\n"
    "  mha-bwd     emit the PTX of the attention backward's main kernel: dK, dV, and dQ partials\n"
    "  mha-bwd-pre emit the backward's preprocessing kernel: D = rowsum(dO o O), LSE in log2 units\n"
    "  mha-bwd-dq  emit the backward's dQ conversion kernel (f32 accumulator -> dQ; the sink gradient)\n"
    "  kv-append   emit the KV-cache append kernel (a decode step's new K, V rows into a dense or paged cache)\n"
    "  explain     print the plan of a kernel: fa4gen explain [KIND] <its options> [--json]\n"
    "  bundle      AOT: compile configs into a C source a host links (the runtime takes its kernels\n"
    "              before it generates any), or write one PTX file per config\n"
    "  configs     AOT: every config the runtime can pick for a described workload (shapes, layouts,\n"
    "              GPUs), a bundle list: fa4gen configs ... | fa4gen bundle - -o kernels.c\n"
    "  cache       the runtime's kernel cache: fa4gen cache path | list | clear | prune --max-size N\n"
    "\n"
    "  fa4gen <command> --help   that command's options\n"
    "  fa4gen --version          generator version (release + build id)\n"
    "\n"
    "Every option takes its value as the next argument or after '=': --depth 128, --depth=128.\n";

static const char usage_mha[] =
    "usage: fa4gen mha     --target sm90a|sm100a --dtype bf16|fp16|e4m3 --depth D [options] [-o FILE]\n"
    "       fa4gen explain --target ... [options] [--json]\n"
    "       fa4gen mha     --config '<canonical config>' [options] [-o FILE]\n"
    "\n"
    "options (omitted ones take the plan's best defaults for target, depth and dtype):\n"
    "  --target T          sm90a (Hopper, FlashAttention-3 design) or sm100a (Blackwell, FA4 design;\n"
    "                      ptxas-checked, not run: no Blackwell GPU here)\n"
    "  --dtype T           bf16 | fp16 | e4m3 (e4m3: sm100a only)\n"
    "  --depth D           head dim of Q, K and V; or --qk-depth D and --ov-depth D (not both forms)\n"
    "  --bm N              query rows per CTA (sm90a: 128 or 192; 64: one consumer, for decode tiles)\n"
    "  --bn N              keys per KV tile (multiple of 16)\n"
    "  --group G           query heads per KV head (GQA/MQA); 1 = MHA\n"
    "  --stages S          KV ring depth\n"
    "  --swizzle B         shared-memory swizzle: 32 | 64 | 128 bytes\n"
    "  --mask M            none | causal | window:L,R (causal aligns bottom-right)\n"
    "  --rescale N         conditional O-rescale threshold (log2 units)\n"
    "  --poly P            percent of exp2 done by the FMA polynomial (sm90a: 0)\n"
    "  --qtiles N          sm100a: Q tiles per CTA (1 or 2)\n"
    "  --cta N             sm100a: 2 = the CTA pair: a 2-CTA cluster shares each MMA (M 256, cta_group::2)\n"
    "  --rope-split 0|1    sm100a MLA prefill (qk 192, ov 128): the rope part of K is a separate tensor\n"
    "  --rope-dtype T      its dtype (only with --rope-split 1)\n"
    "  --pingpong 0|1      sm90a: consumer warpgroups take turns issuing wgmma (default 1)\n"
    "  --persistent 0|1    sm90a: min(tiles, SMs) CTAs loop over tiles (default: 1, 0 for causal)\n"
    "  --split 0|1         split-KV: the kernel writes f32 partial O and LSE for its split of the kv blocks\n"
    "                      (the split count is a kernel parameter); `fa4gen combine` merges the splits;\n"
    "                      run with one split it writes the final O and LSE itself\n"
    "  --cluster N         sm90a split-KV: N (2..16) CTAs of a cluster split each tile's kv blocks and merge\n"
    "                      their O in distributed shared memory (implies --split 1; no workspace or combine)\n"
    "  --early 0|1         split-KV, dense or paged K/V (not cta 2): stream the first tile's first K/V blocks (rows before\n"
    "                      seqlen_k - seqlen_q) before griddepcontrol.wait, blocks in ascending order\n"
    "                      (fa4_mha_args.kv_early: the caller's promise that no kernel still running writes\n"
    "                      those rows, nor, paged, their table entries or lengths)\n"
    "  --prefetch N        split-KV, dense or paged K/V (not cta 2): prefetch into L2, before griddepcontrol.wait,\n"
    "                      the next N (0..16) K/V blocks the first tile loads -- a hint, it asks nothing of the\n"
    "                      caller (default 2; 0 with --early 1; paged reads the table twice)\n"
    "  --sink 0|1          a per-head sink logit joins the softmax denominator (kernel parameter p_sink)\n"
    "  --varlen 0|1        packed [total, heads, depth] tensors with cu_seqlens_q/k (p_cu_seqlens_q ...)\n"
    "  --page P            paged K, V: P rows per page (16..256, a power of two) via a block table\n"
    "  --softcap 0|1       built-in soft-cap: s = cap tanh(s / cap), the cap a launch argument (not with a score_mod)\n"
    "  --alibi 0|1         built-in ALiBi: s -= slope[h] |i + Sk - Sq - j|, slopes a launch argument\n"
    "  --score-mod FILE    CUDA C defining __device__ float score_mod(float s, int b, int h, int q, int k,\n"
    "                      const void *aux), applied to every scaled score before the mask; mha compiles\n"
    "                      it with NVRTC (needs libnvrtc), explain needs only its hash (config word mod=).\n"
    "                      One self-contained source: no #include, #embed, #line or __has_include\n"
    "  --config TEXT       the canonical one-line form (as printed by explain); other options then refine it\n"
    "  -o FILE             write the PTX to FILE (default, or FILE -: stdout)\n"
    "  --json              explain: print the plan as JSON\n";

static const char usage_mla[] =
    "usage: fa4gen mla-sparse --target sm90a|sm100a --depth 576|512 [options] [-o FILE]\n"
    "       fa4gen explain mla-sparse --target ... [options] [--json]\n"
    "       fa4gen mla-sparse --config '<canonical config>' [options] [-o FILE]\n"
    "\n"
    "Sparse MLA prefill (DeepSeek-V3.2): each query token attends to its top-k kv rows, one kv head,\n"
    "V = the first 512 columns of kv. Options (omitted ones take the plan's defaults):\n"
    "  --target T          sm90a (Hopper) or sm100a (Blackwell: tcgen05, TMA gather4)\n"
    "  --dtype T           the kv dtype: bf16, or e4m3 (sm100a: fp8 kv with bf16 q and out)\n"
    "  --depth D           d_qk: 576 (512 nope + 64 rope) or 512; or --qk-depth D\n"
    "  --ov-depth D        512 (the only V depth; may be left out)\n"
    "  --group G           1 (one kv head)\n"
    "  --swizzle B         128\n"
    "  --mask M            none (the index list says which keys a token sees)\n"
    "  --rescale N         conditional O-rescale threshold (log2 units)\n"
    "  --poly P            0\n"
    "  --tma-store 0|1     O through shared memory and a TMA store (out strides multiples of 16 B) instead\n"
    "                      of per-thread stores (sm90a: 1, the runtime's pick when the strides allow; sm100a: 0)\n"
    "  sm90a only:\n"
    "  --bm N, --bn N      64 heads per CTA, 64 kv rows per block\n"
    "  --stages S          2\n"
    "  --pingpong 0|1, --persistent 0|1   0 (this kernel has neither)\n"
    "  sm100a only:\n"
    "  --cta-group N       1: one CTA per token and 64 heads (h_q > 64: one CTA per 64 heads);\n"
    "                      2: a CTA pair per token, 64 heads each (cta_group::2)\n"
    "  --b-topk N          top-k positions per KV block (cta-group 1: 64; 2: 128 or 64)\n"
    "  --num-mbars N       KV ring slots, each with a full and an empty mbarrier\n"
    "  --q-smem-depth D    Q columns the MMA reads from shared memory (d_qk - q-tmem-depth)\n"
    "  --q-tmem-depth D    Q columns it reads from TMEM (cta-group 2; default 0)\n"
    "  --config TEXT       the canonical one-line form (as printed by explain); other options then refine it\n"
    "  -o FILE             write the PTX to FILE (default, or FILE -: stdout)\n"
    "  --json              explain: print the plan as JSON\n";

static const char usage_combine[] =
    "usage: fa4gen combine --target sm90a|sm100a --dtype bf16|fp16 --ov-depth D [-o FILE]\n"
    "       fa4gen explain combine --target ... [--json]\n"
    "       fa4gen combine --config 'combine target=T dtype=T ov=D' [-o FILE]\n"
    "\n"
    "The split-KV combine kernel: merges the f32 partial O and LSE a split=1 kernel wrote per split\n"
    "into O and LSE. Options:\n"
    "  --target T          sm90a or sm100a\n"
    "  --dtype T           O's dtype: bf16 or fp16 (an e4m3 split kernel's O is bf16)\n"
    "  --ov-depth D        O's depth: a multiple of 16 up to 1024\n"
    "  --config TEXT       the canonical one-line form (as printed by explain); other options then refine it\n"
    "  -o FILE             write the PTX to FILE (default, or FILE -: stdout)\n"
    "  --json              explain: print the plan as JSON\n";

static const char usage_kv_append[] =
    "usage: fa4gen kv-append --target sm90a|sm100a --dtype bf16|fp16|e4m3 --depth D [-o FILE]\n"
    "       fa4gen explain kv-append --target ... [--json]\n"
    "       fa4gen kv-append --config 'kv-append target=T dtype=T qk=D ov=D' [-o FILE]\n"
    "\n"
    "The KV-cache append kernel (fa4_kv_append): writes new K, V rows [batch, s_new, heads_kv, depth] into a\n"
    "dense or paged cache at each sequence's length, and the lengths after the append. The cache layout is a\n"
    "launch argument. Options:\n"
    "  --target T          sm90a or sm100a\n"
    "  --dtype T           the cache's dtype: bf16 | fp16 | e4m3 (a byte copy)\n"
    "  --depth D           K's and V's depth; or --qk-depth D and --ov-depth D (multiples of 16 up to 1024)\n"
    "  --config TEXT       the canonical one-line form (as printed by explain); other options then refine it\n"
    "  -o FILE             write the PTX to FILE (default, or FILE -: stdout)\n"
    "  --json              explain: print the plan as JSON\n";

/* the three backward kinds: %s is the kind's name */
static const char usage_bwd[] =
    "usage: fa4gen %s --target sm90a|sm100a --dtype bf16|fp16 --depth D [options] [-o FILE]\n"
    "       fa4gen explain %s --target ... [options] [--json]\n"
    "       fa4gen %s --config '<canonical config>' [options] [-o FILE]\n"
    "\n"
    "The attention backward (docs/kernels/mha-bwd.md) is three kernels the runtime launches in turn:\n"
    "mha-bwd-pre (D = rowsum(dO o O), -LSE log2 e, the dQ accumulator zeroed), mha-bwd (per KV tile: S and P\n"
    "recomputed, dK and dV in registers, dQ added to the f32 accumulator) and mha-bwd-dq (dQ scaled and\n"
    "converted; the sink gradient summed). The helper kernels take the main kernel's options, which shape\n"
    "the workspace they share. Options (omitted ones take the plan's defaults):\n"
    "  --target T          sm90a (wgmma, dK/dV in registers) or sm100a (tcgen05, S/dP/dK/dV in TMEM; d64, d128)\n"
    "  --dtype T           bf16 | fp16\n"
    "  --depth D           head dim: 64, 128 or 256 (sm100a: 64, 128); or --qk-depth D and --ov-depth D (equal)\n"
    "  --bm N              query rows per inner step (d64: 128; d128, d256: 64)\n"
    "  --bn N              keys per CTA (d64, d128: 128; d256: 64)\n"
    "  --group G           query heads per KV head (GQA/MQA: dK, dV summed over the group)\n"
    "  --stages S          Q/dO ring depth\n"
    "  --swizzle B         128\n"
    "  --mask M            none | causal | window:L,R (causal aligns bottom-right)\n"
    "  --sink 0|1          the forward had a per-head sink: its gradient is summed (dsink)\n"
    "  --softcap 0|1       the forward's built-in soft-cap (cap tanh(s / cap), the cap a launch argument): dS takes\n"
    "                      its derivative 1 - tanh^2 (mha-bwd)\n"
    "  --varlen 0|1        packed [total, heads, depth] tensors with cu_seqlens_q/k\n"
    "  --config TEXT       the canonical one-line form (as printed by explain); other options then refine it\n"
    "  -o FILE             write the PTX to FILE (default, or FILE -: stdout)\n"
    "  --json              explain: print the plan as JSON\n";

static const char usage_explain[] =
    "usage: fa4gen explain [KIND] <that command's options> [--json]\n"
    "\n"
    "Prints the plan of the kernel those options make: canonical config, symbol and hash, tiles, the\n"
    "shared-memory map, TMEM columns, warp roles with their register budgets, named barriers, tensor\n"
    "maps, transaction bytes, the launch shape and the kernel's parameters; --json gives the same as\n"
    "JSON. Without a kind: mha, or the kind --config names. fa4gen <kind> --help lists the options.\n";

/* Said after a kernel command's options. */
static const char usage_values[] =
    "\n"
    "Values are exact words: numbers are decimal as the canonical form prints them (optional '-', no\n"
    "spaces, '+' or leading zeros), range-checked; window:L,R has no spaces, L and R in 0..1073741824 or -1\n"
    "(unbounded). Each field is given once (a depth sets qk and ov); flags refine one --config.\n"
    "\n"
    "The kernel symbol is fa4_<kind>_<target>_<hash>, hash = FNV-1a 64 of the canonical\n"
    "config and the generator version: `fa4gen explain` prints all three. The runtime's disk cache\n"
    "and AOT bundles key on the build id (`fa4gen --version`: version + a hash of the generator's sources).\n";

typedef struct {
    Config cfg;
    ConfigGiven given;  /* the fields --config and the flags gave, and how (conflicts, unread keys) */
    char *mod_src;      /* --score-mod FILE's text (owned) */
    const char *mod_name;
    const char *out;    /* -o FILE; NULL: stdout */
    const char *bundle_dir;
    int json;
} Cli;

/* CLI flag -> config key. */
static const char *const flag_keys[][2] = {
    {"--target", "target"}, {"--dtype", "dtype"},       {"--depth", "depth"},     {"--qk-depth", "qk"},
    {"--ov-depth", "ov"},   {"--bm", "bm"},             {"--bn", "bn"},           {"--group", "group"},
    {"--stages", "stages"}, {"--swizzle", "swizzle"},   {"--mask", "mask"},       {"--qtiles", "qtiles"},
    {"--cta", "cta"},       {"--rescale", "rescale"},   {"--poly", "poly"},       {"--rope-split", "rope_split"},
    {"--rope-dtype", "rope_dtype"}, {"--pingpong", "pingpong"},   {"--persistent", "persistent"},
    {"--b-topk", "b_topk"}, {"--num-mbars", "num_mbars"}, {"--q-smem-depth", "q_smem_depth"},
    {"--q-tmem-depth", "q_tmem_depth"}, {"--cta-group", "cta_group"}, {"--tma-store", "tma_store"},
    {"--sink", "sink"},     {"--split", "split"},     {"--cluster", "cluster"},     {"--early", "early"},  {"--prefetch", "prefetch"},     {"--varlen", "varlen"}, {"--page", "page"},
    {"--softcap", "softcap"}, {"--alibi", "alibi"},
};

/* One line on stderr: control and non-ASCII bytes of what it echoes become \xNN. */
static void say(const char *fmt, ...) FA4_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
    char msg[1024], line[4200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t o = 0;
    for (const unsigned char *c = (const unsigned char *)msg; *c && o + 5 < sizeof line; c++) {
        if (*c >= 0x20 && *c < 0x7f) line[o++] = (char)*c;
        else o += (size_t)snprintf(line + o, sizeof line - o, "\\x%02x", *c);
    }
    line[o] = 0;
    fprintf(stderr, "fa4gen: %s\n", line);
}

static int invalid(const char *msg)
{
    say("%s", msg);
    return 2;
}

/* ---------------------------------------------------------------- files by name */

/* What a path that is not a regular file is, for the refusal that names it. */
static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* An input named on the command line, opened for reading. O_NONBLOCK, so a FIFO's open does not
 * wait for a writer; anything but a regular file is refused by name. The fd (blocking again), or
 * -1 after one line with the exit status in *rc: missing_rc when it cannot be opened, 2 when it
 * is not a regular file. */
static int open_input(const char *what, const char *name, int missing_rc, int *rc)
{
    struct stat st;
    if (!name[0]) {
        say("%s: the file name is empty; give a file", what);
        *rc = 2;
        return -1;
    }
    int fd = open(name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        say("%s: cannot read '%s': %s", what, name, strerror(errno));
        *rc = missing_rc;
        return -1;
    }
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        say("%s: '%s' is %s; give a regular file", what, name, file_kind(st.st_mode));
        close(fd);
        *rc = 2;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        say("%s: cannot read '%s': %s", what, name, strerror(errno));
        close(fd);
        *rc = 1;
        return -1;
    }
    return fd;
}

/* An output path, checked before anything is made: a new name, a regular file or a symlink to
 * one (the file is replaced by a rename, which a FIFO, device or directory cannot take). */
static int check_output(const char *what, const char *path, const char *stdout_hint)
{
    struct stat st;
    if (!path[0]) {
        say("%s: the file name is empty; give a file%s", what, stdout_hint);
        return 2;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        say("%s: '%s' is %s; give a regular file or a new name%s", what, path, file_kind(st.st_mode), stdout_hint);
        return 2;
    }
    return 0;
}

/* --score-mod FILE: the source text (a regular file, no NUL bytes, at most 1 MiB, no #include or
 * other way to read another file); its hash becomes the config's mod=. */
static int read_mod(Cli *cli, const char *name)
{
    enum { MOD_MAX = 1 << 20 };
    int rc = 0, fd = open_input("--score-mod", name, 2, &rc);
    if (fd < 0) return rc;
    char *src = malloc(MOD_MAX + 1), err[512];
    size_t n = 0;
    ssize_t k = 1;
    while (src && n < MOD_MAX + 1 && (k = read(fd, src + n, MOD_MAX + 1 - n)) != 0) {
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) break;
        n += (size_t)k;
    }
    close(fd);
    int bad = !src || k < 0 ? 1 : n > MOD_MAX ? 2 : memchr(src, 0, n) ? 3 : 0;
    if (bad) {
        free(src);
        say(bad == 1 ? "--score-mod: cannot read '%s'" : bad == 2 ? "--score-mod: '%s' is larger than 1 MiB"
                                                                  : "--score-mod: '%s' holds a NUL byte; a mod is CUDA C text", name);
        return bad == 1 ? 1 : 2;
    }
    src[n] = 0;
    if (score_mod_check_source(src, err, sizeof err)) {
        say("--score-mod '%s': %s", name, err);
        free(src);
        return 2;
    }
    free(cli->mod_src);
    cli->mod_src = src;
    cli->mod_name = name;
    return 0;
}

/* ---------------------------------------------------------------- flags */

/* Options of command cmd that take no value; every other one takes exactly one. */
static int flag_alone(const char *cmd, const char *a)
{
    return !strcmp(a, "--json") || !strcmp(a, "--help") || !strcmp(a, "-h") ||
           (cmd && !strcmp(cmd, "configs") && cli_configs_flag_alone(a));
}

/* argv with every --opt=value split into --opt and value, so both spellings reach one parser.
 * Only arguments where an option stands are split (a value may hold '='). The vector and the
 * split names are malloc'd in *keep (free with free_args); NULL after a message. */
typedef struct { char **argv; char **names; int argc, n_names; } Args;

static void free_args(Args *a)
{
    for (int i = 0; i < a->n_names; i++) free(a->names[i]);
    free(a->names);
    free(a->argv);
}

static int split_args(int argc, char **argv, Args *out)
{
    memset(out, 0, sizeof *out);
    out->argv = calloc(2 * (size_t)argc + 1, sizeof *out->argv);
    out->names = calloc((size_t)argc + 1, sizeof *out->names);
    if (!out->argv || !out->names) return free_args(out), 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        if (i >= 2 && !strncmp(a, "--", 2) && eq) {
            char *name = strndup(a, (size_t)(eq - a));
            if (!name) return free_args(out), 1;
            out->names[out->n_names++] = name;
            if (flag_alone(argv[1], name)) {
                say("%s: takes no value (given '%s')", name, a);
                return free_args(out), 2;
            }
            out->argv[out->argc++] = name;
            out->argv[out->argc++] = (char *)eq + 1;
            continue;
        }
        out->argv[out->argc++] = (char *)a;
        if (i >= 2 && a[0] == '-' && a[1] && !flag_alone(argv[1], a) && i + 1 < argc) /* its value, as given */
            out->argv[out->argc++] = argv[++i];
    }
    return 0;
}

/* What a command takes besides the config flags. */
enum { USE_OUT = 1, USE_JSON = 2, USE_DIR = 4, USE_CONFIG = 8 };

/* Every option is one the command takes (checked first, so a refusal does not depend on order). */
static int check_uses(int argc, char **argv, int first, int uses, const char *cmd)
{
    char err[512];
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        int takes = !strcmp(a, "--json") ? USE_JSON : !strcmp(a, "-o") ? USE_OUT : !strcmp(a, "-d") ? USE_DIR
                    : a[0] == '-' ? USE_CONFIG : 0;
        if (takes && !(uses & takes)) {
            snprintf(err, sizeof err, "%s: '%s' is not an option of this command%s", cmd, a,
                     takes == USE_CONFIG ? " (every config comes from the list)"
                     : takes == USE_OUT  ? " (mha, mla-sparse and combine write PTX with -o; explain prints to stdout)"
                     : takes == USE_JSON ? " (only explain prints JSON)"
                                         : " (only bundle writes a folder)");
            return invalid(err);
        }
        if (takes != USE_JSON && takes) i++; /* skip the value */
    }
    return 0;
}

/* --config TEXT, at most once: read before the flags, so that they refine it whatever their order. */
static int parse_config_text(Cli *cli, int argc, char **argv, int first)
{
    char err[512];
    const char *text = NULL;
    for (int i = first; i < argc; i++) {
        if (strcmp(argv[i], "--config")) continue;
        if (i + 1 >= argc) return invalid("--config: missing value; give the canonical config text");
        if (text) {
            say("--config: given twice ('%.60s' and '%.60s'); give one config and refine it with flags", text,
                argv[i + 1]);
            return 2;
        }
        text = argv[++i];
        if (config_parse_given(text, &cli->cfg, &cli->given, err, sizeof err)) return invalid(err);
    }
    return 0;
}

/* -o FILE or -d DIR, each at most once; "-o -" is stdout. */
static int parse_path(Cli *cli, const char *flag, const char *v, const char **seen)
{
    if (*seen) {
        say("%s: given twice ('%s' and '%s'); give one", flag, *seen, v);
        return 2;
    }
    *seen = v;
    if (!strcmp(flag, "-d")) {
        if (!v[0]) return invalid("-d: the directory name is empty; give a directory (it is created if missing)");
        cli->bundle_dir = v;
        return 0;
    }
    int rc = strcmp(v, "-") ? check_output("-o", v, ", or - for stdout") : 0;
    cli->out = strcmp(v, "-") ? v : NULL;
    return rc;
}

/* One config flag: its key set once (a second flag for the same field is a conflict). */
static int parse_config_flag(Cli *cli, ConfigGiven *flags, const char *a, const char *v, const char *cmd)
{
    char err[512], how[80];
    const char *key = NULL;
    for (size_t k = 0; k < sizeof flag_keys / sizeof flag_keys[0]; k++)
        if (!strcmp(a, flag_keys[k][0])) key = flag_keys[k][1];
    if (!key) {
        snprintf(err, sizeof err, "'%s' is not an option; see fa4gen %s --help", a, cmd);
        return invalid(err);
    }
    snprintf(how, sizeof how, "%s %.60s", a, v);
    if (config_give(&cli->cfg, flags, key, v, how, err, sizeof err)) return invalid(err);
    return 0;
}

static int parse_flags(Cli *cli, int argc, char **argv, int first, int uses, const char *cmd)
{
    ConfigGiven flags;
    const char *out_seen = NULL, *dir_seen = NULL;
    config_init(&cli->cfg);
    memset(&cli->given, 0, sizeof cli->given);
    memset(&flags, 0, sizeof flags);
    int rc = check_uses(argc, argv, first, uses, cmd);
    if (!rc) rc = parse_config_text(cli, argc, argv, first);
    for (int i = first; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            cli->json = 1;
            continue;
        }
        if (a[0] != '-') { /* a word where an option stands */
            say("'%s' is not an option; see fa4gen %s --help", a, cmd);
            return 2;
        }
        if (i + 1 >= argc) {
            say("%s: missing value", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--config")) continue;
        if (!strcmp(a, "-o") || !strcmp(a, "-d")) {
            rc = parse_path(cli, a, v, a[1] == 'o' ? &out_seen : &dir_seen);
        } else if (!strcmp(a, "--score-mod")) {
            char hex[20], err[512], how[80];
            snprintf(how, sizeof how, "--score-mod %.60s", v);
            if (!(rc = read_mod(cli, v))) {
                snprintf(hex, sizeof hex, "%016llx", (unsigned long long)score_mod_hash(cli->mod_src));
                if (config_give(&cli->cfg, &flags, "mod", hex, how, err, sizeof err)) rc = invalid(err);
            }
        } else {
            rc = parse_config_flag(cli, &flags, a, v, cmd);
        }
    }
    config_given_merge(&cli->given, &flags);
    return rc;
}

/* ---------------------------------------------------------------- output */

static int write_all(int fd, const char *data, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t k = write(fd, data + done, len - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = EIO;
            return -1;
        }
        done += (size_t)k;
    }
    return 0;
}

static mode_t current_umask(void)
{
    mode_t m = umask(0);
    umask(m);
    return m;
}
static mode_t new_file_mode(void) { return 0666 & ~current_umask(); }

/* Write data to path through a temporary file beside it and a rename; a symlink is followed (its
 * target is replaced, the link stays). Anything but a regular file or a new name is refused. */
static int write_atomic(const char *path, const char *data, size_t len)
{
    char tmp[4096], *real = NULL;
    struct stat st;
    int exists = stat(path, &st) == 0; /* follows links */
    if (exists && !S_ISREG(st.st_mode)) { /* check_output said so already, unless it changed since */
        say("cannot write '%s': it is %s, not a regular file", path, file_kind(st.st_mode));
        return 2;
    }
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        /* the link's target, so that the rename replaces it and not the link */
        if (exists) real = realpath(path, NULL);
        if (!real) {
            say("-o: '%s' is a symlink to a missing file; give the target path", path);
            return 1;
        }
        path = real;
    }
    int rc = 1;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) {
        say("-o: path is too long");
        goto out;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        say("cannot create a file next to '%s': %s", path, strerror(errno));
        goto out;
    }
    int ok = fchmod(fd, exists ? (st.st_mode & 07777) : new_file_mode()) == 0 && write_all(fd, data, len) == 0 &&
             fsync(fd) == 0;
    ok = (close(fd) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        say("cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    free(real);
    return rc;
}

/* ---------------------------------------------------------------- mha, mla-sparse, combine, explain */

/* NVRTC refused the mod: a first line, then its diagnostics one per line (score_mod_compile has
 * mapped them to the user's line numbers and echoes nothing but the user's own lines). */
static void say_compile_error(const Cli *cli, const char *err, const char *log)
{
    int count = 0;
    for (const char *l = log; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) count++;
    if (!strncmp(err, "score_mod: ", 11)) err += 11;
    say("--score-mod '%s': %s%s", cli->mod_name ? cli->mod_name : "", err, count ? ":" : " (NVRTC gave no log)");
    for (const char *l = log; l && *l;) {
        size_t k = strcspn(l, "\n");
        say("  %.*s", (int)k, l);
        l += k + (l[k] == '\n');
    }
}

/* NVRTC's PTX of --score-mod for the config's target; 0, or the exit status after a message. */
static int compile_mod(const Cli *cli, char **mod_ptx, ScoreModLink *link)
{
    char err[512];
    *mod_ptx = NULL;
    if (!cli->mod_src) return 0;
    if (score_mod_link_from_env(link, err, sizeof err)) return invalid(err);
    if (*link == MOD_LINK)
        return invalid("FA4GEN_SCORE_MOD_LINK=link: the CLI writes one self-contained PTX file; use splice or call "
                       "(the runtime links)");
    if ((unsigned)cli->cfg.target >= TARGET_COUNT) return invalid("target: not a target");
    char *log = NULL;
    int rc = score_mod_compile(cli->mod_src, target_get(cli->cfg.target), mod_ptx, &log, err, sizeof err);
    if (rc == MOD_NO_NVRTC) {
        say("%s", err);
        return 1;
    }
    if (rc) {
        say_compile_error(cli, err, log);
        free(log);
        return 2;
    }
    return 0;
}

static int generate(const Cli *cli, Plan *plan, char **ptx, size_t *len)
{
    char err[512], *mod_ptx;
    ScoreModLink link = MOD_SPLICE;
    int rc = compile_mod(cli, &mod_ptx, &link);
    if (rc) return rc;
    if (fa4gen_generate_mod(&cli->cfg, mod_ptx, (int)link, plan, ptx, len, err, sizeof err)) {
        free(mod_ptx);
        say("%s", err);
        return strncmp(err, "internal", 8) ? 2 : 1;
    }
    free(mod_ptx);
    return 0;
}

static int cmd_emit(const Cli *cli)
{
    Plan *plan = malloc(sizeof *plan);
    char *ptx = NULL;
    size_t len = 0;
    if (!plan) return 1;
    int rc = generate(cli, plan, &ptx, &len);
    if (!rc) {
        if (cli->out) rc = write_atomic(cli->out, ptx, len);
        else rc = fwrite(ptx, 1, len, stdout) == len ? 0 : 1;
    }
    free(ptx);
    free(plan);
    return rc;
}

static int cmd_explain(const Cli *cli)
{
    char err[512];
    Plan *plan = malloc(sizeof *plan);
    if (!plan) return 1;
    int rc = 0;
    if (plan_make(&cli->cfg, plan, err, sizeof err)) {
        say("%s", err);
        rc = 2;
    } else {
        char *text = cli->json ? plan_explain_json(plan) : plan_explain_text(plan);
        if (!text) rc = 1;
        else fputs(text, stdout);
        free(text);
    }
    free(plan);
    return rc;
}

/* ---------------------------------------------------------------- bundle lists */

/* The lines of a bundle list, read whole (no line-length limit). */
typedef struct { char **text; int *lineno; int n; } Lines;

static void lines_free(Lines *l)
{
    for (int i = 0; i < l->n; i++) free(l->text[i]);
    free(l->text);
    free(l->lineno);
}

/* One line of a list without its end: LF or CRLF. A CR anywhere else (a CR-only file, a CR
 * inside a line) would end or change a config without a word, so it is refused. */
static int list_line_end(const char *name, int lineno, char *line, size_t len)
{
    int lf = len && line[len - 1] == '\n';
    if (lf) line[--len] = 0;
    if (lf && len && line[len - 1] == '\r') line[--len] = 0;
    if (memchr(line, '\r', len)) {
        say("bundle: %s line %d: holds a carriage return (CR) that does not end the line; lines end with LF or CRLF",
            name, lineno);
        return 2;
    }
    return 0;
}

/* Keeps the config lines: not blank, not a comment (first non-blank '#'). Name "-": standard input
 * (a pipe from fa4gen configs, or a file; read to its end). */
static int read_list(const char *name, Lines *out)
{
    memset(out, 0, sizeof *out);
    int rc = 0, fd = strcmp(name, "-") ? open_input("bundle: the list", name, 1, &rc) : dup(0);
    if (fd < 0 && !strcmp(name, "-")) {
        say("bundle: cannot read the list from standard input: %s", strerror(errno));
        return 1;
    }
    if (!strcmp(name, "-")) name = "stdin"; /* for messages */
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    if (!f) {
        if (fd >= 0) {
            say("bundle: cannot read '%s': %s", name, strerror(errno));
            close(fd);
            rc = 1;
        }
        return rc;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int cap_lines = 0, oom = 0;
    for (int lineno = 1; (got = getline(&line, &cap, f)) >= 0; lineno++) {
        if (memchr(line, 0, (size_t)got)) {
            say("bundle: %s line %d: holds a NUL byte; a list is text", name, lineno);
            rc = 2;
            break;
        }
        if ((rc = list_line_end(name, lineno, line, (size_t)got))) break;
        const char *w = line + strspn(line, " \t");
        if (!*w || *w == '#') continue;
        if (out->n == cap_lines) {
            cap_lines = cap_lines ? 2 * cap_lines : 16;
            char **t = realloc(out->text, (size_t)cap_lines * sizeof *t);
            if (t) out->text = t;
            int *ln = realloc(out->lineno, (size_t)cap_lines * sizeof *ln);
            if (ln) out->lineno = ln;
            if (!t || !ln) { rc = oom = 1; break; }
        }
        if (!(out->text[out->n] = strdup(line))) { rc = oom = 1; break; }
        out->lineno[out->n++] = lineno;
    }
    if (!rc && ferror(f)) {
        say("bundle: cannot read '%s': %s", name, strerror(errno));
        rc = 1;
    }
    free(line);
    fclose(f);
    if (oom) say("bundle: out of memory reading '%s'", name);
    if (rc) {
        lines_free(out);
        memset(out, 0, sizeof *out); /* the caller frees it again */
    }
    return rc;
}

/* The bundle's C name: --name, or FILE's base name with every other character an '_'. */
static int bundle_name(const char *given, const char *out, char *name, size_t n)
{
    if (given) {
        int ok = strlen(given) < n && !(given[0] >= '0' && given[0] <= '9') && given[0];
        for (const char *c = given; *c && ok; c++)
            ok = *c == '_' || (*c >= '0' && *c <= '9') || ((*c | 32) >= 'a' && (*c | 32) <= 'z');
        if (!ok) {
            say("bundle: --name '%s' is not a C identifier (letters, digits, '_'; not a digit first)", given);
            return 2;
        }
        snprintf(name, n, "%s", given);
        return 0;
    }
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
    size_t k = 0;
    if (*base >= '0' && *base <= '9') name[k++] = '_';
    for (const char *c = base; *c && *c != '.' && k + 1 < n; c++)
        name[k++] = ((*c >= '0' && *c <= '9') || ((*c | 32) >= 'a' && (*c | 32) <= 'z')) ? *c : '_';
    name[k] = 0;
    if (!k) snprintf(name, n, "bundle");
    return 0;
}

/* --targets T,T: each a target's name, once. */
static int parse_targets(const char *v, AotRequest *r)
{
    r->n_targets = 0;
    for (const char *t = v; *t;) {
        size_t k = strcspn(t, ",");
        int id = -1;
        for (int j = 0; j < TARGET_COUNT; j++)
            if (strlen(target_name[j]) == k && !strncmp(t, target_name[j], k)) id = j;
        for (int j = 0; j < r->n_targets && id >= 0; j++)
            if ((int)r->targets[j] == id) {
                say("bundle: --targets '%s': a target is named twice", v);
                return 2;
            }
        if (id < 0) {
            say("bundle: --targets '%s': give targets from sm90a, sm100a, comma-separated, each once", v);
            return 2;
        }
        r->targets[r->n_targets++] = (TargetId)id;
        t += k + (t[k] == ',');
    }
    if (!r->n_targets) return invalid("bundle: --targets: empty; give sm90a, sm100a or both");
    return 0;
}

/* One option of bundle -o; a second -o, --name, --jobs or --targets is a conflict. */
static int bundle_c_option(const char *a, const char *v, AotRequest *r, const char **out, const char **given_name,
                           int *jobs, const char **seen)
{
    if (*seen) {
        say("bundle: %s: given twice ('%s' and '%s'); give it once", a, *seen, v);
        return 2;
    }
    *seen = v;
    if (!strcmp(a, "-o")) {
        *out = v;
        if (!strcmp(v, "-"))
            return invalid("bundle: -o '-': a bundle is a C source written to a file, not stdout; give FILE.c");
        return check_output("bundle: -o", v, "");
    }
    if (!strcmp(a, "--name")) {
        *given_name = v;
        return 0;
    }
    if (!strcmp(a, "--jobs")) {
        if (parse_int(v, jobs) || *jobs < 1 || *jobs > 256) {
            say("bundle: --jobs '%s': give a number of configs compiled at once, 1..256", v);
            return 2;
        }
        return 0;
    }
    return parse_targets(v, r);
}

/* bundle [LIST] [--config TEXT]... [--targets T,T] [--name NAME] [--jobs N] -o FILE.c */
static int cmd_bundle_c(int argc, char **argv)
{
    static const char *const once[] = {"-o", "--targets", "--name", "--jobs"};
    const char *seen[4] = {0};
    AotRequest r = {0};
    const char *list = NULL, *out = NULL, *given_name = NULL;
    char name[64], err[512];
    int rc = 0, n_cfg = 0, jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
    AotConfig *cfgs = calloc((size_t)argc, sizeof *cfgs);
    Lines l = {0};
    if (!cfgs) return 1;
    for (int i = 2, takes = 0; i < argc && !rc; i += 1 + takes) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int k = -1;
        for (int j = 0; j < 4; j++)
            if (!strcmp(a, once[j])) k = j;
        takes = k >= 0 || !strcmp(a, "--config");
        if (takes && !v) {
            snprintf(err, sizeof err, "bundle: %s: missing value", a);
            rc = invalid(err);
        } else if (k >= 0) {
            rc = bundle_c_option(a, v, &r, &out, &given_name, &jobs, &seen[k]);
        } else if (!strcmp(a, "--config")) {
            cfgs[n_cfg++] = (AotConfig){v, "--config", 0};
        } else if ((a[0] == '-' && a[1]) || list) {
            snprintf(err, sizeof err, "bundle: '%s' is not an option of this command (bundle -o takes LIST, --config, "
                     "--targets, --name, --jobs; see fa4gen bundle --help)", a);
            rc = invalid(err);
        } else {
            list = a;
        }
    }
    if (!rc && !out) rc = invalid("bundle: -o FILE.c is required");
    if (!rc) rc = bundle_name(given_name, out, name, sizeof name);
    if (!rc && list && !(rc = read_list(list, &l))) {
        AotConfig *more = realloc(cfgs, ((size_t)n_cfg + (size_t)l.n + 1) * sizeof *cfgs);
        if (!more) rc = 1;
        else cfgs = more;
        for (int i = 0; i < l.n && !rc; i++)
            cfgs[n_cfg++] = (AotConfig){l.text[i], strcmp(list, "-") ? list : "stdin", l.lineno[i]};
    }
    if (!rc) {
        r.configs = cfgs;
        r.n_configs = n_cfg;
        r.name = name;
        r.jobs = jobs;
        r.say = say;
        char *text = NULL;
        size_t len = 0;
        rc = aot_bundle(&r, &text, &len);
        if (!rc) rc = write_atomic(out, text, len);
        if (!rc) fprintf(stderr, "fa4gen: bundle: wrote %s (fa4_bundle_%s)\n", out, name);
        free(text);
    }
    lines_free(&l);
    free(cfgs);
    return rc;
}

/* bundle LIST -d DIR: one kernel per config line; every config is checked
 * before any file is written, every file is written into a temporary folder
 * (inside DIR, or beside it when DIR does not exist yet) and only then moved
 * into place, all or none. A line that names the same kernel as an earlier
 * one is reported and written once. */
static const char usage_bundle[] =
    "usage: fa4gen bundle [LIST] [--config TEXT]... [--targets T,T] [--name NAME] [--jobs N] -o FILE.c\n"
    "       fa4gen bundle LIST -d DIR\n"
    "\n"
    "-o FILE.c   compile every config (a LIST line, canonical or any subset of its key=value words, or a\n"
    "            --config) with the toolkit's ptxas into a cubin, pack it with its PTX into a fatbin\n"
    "            (fatbinary), and write a C source holding them, a table by config hash and a\n"
    "            constructor that registers it: a host that links it gets these kernels before anything\n"
    "            is generated (FA4GEN_DISABLE_JIT=1: only these). Tools: FA4GEN_PTXAS, FA4GEN_FATBINARY,\n"
    "            $CUDA_HOME/bin, /usr/local/cuda/bin, PATH. FILE.c is a file (not -, not a FIFO or device).\n"
    "  --targets T,T   compile each config for each of these targets (sm90a, sm100a) instead of its own; a\n"
    "                  config a target cannot build (a word it lacks, a depth it refuses) is skipped with one\n"
    "                  note on stderr, and the bundle holds the rest (exit 0 if at least one kernel is built)\n"
    "  --name NAME     the table is fa4_bundle_NAME (default: FILE's base name)\n"
    "  --jobs N        configs compiled at once (default: the CPUs online); a line per finished kernel\n"
    "-d DIR      write one PTX file per config into DIR (no compile), created when missing\n"
    "\n"
    "LIST: one config per line (LF or CRLF line ends), blank lines and '#' comments skipped; LIST - reads\n"
    "standard input (fa4gen configs ... | fa4gen bundle - -o kernels.c). A line naming the same kernel as an\n"
    "earlier one is reported and made once. Options take their value after a space or '='; each at most\n"
    "once, --config as often as wanted.\n";

/* DIR/<symbol>.ptx of every kernel, before anything is written: absent, a regular file or a
 * symlink (a rename replaces those); a directory or another node there would stop the move
 * half-way. */
static int check_dests(const char *dir, Plan *const *plans, int n)
{
    char path[4200];
    struct stat st;
    for (int i = 0; i < n; i++) {
        if (!plans[i]) continue;
        snprintf(path, sizeof path, "%s/%s.ptx", dir, plans[i]->symbol);
        if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
            say("bundle: -d '%s' holds '%s.ptx', which is %s; a kernel's file goes there, so move it away or give "
                "another -d", dir, plans[i]->symbol, file_kind(st.st_mode));
            return 2;
        }
    }
    return 0;
}

static void kernel_path(char *buf, size_t n, const char *dir, const Plan *p, const char *suffix)
{
    snprintf(buf, n, "%s/%s.ptx%s", dir, p->symbol, suffix);
}

/* rm -r of the flat folder a bundle wrote (its kernels and the files they replaced). */
static void remove_dir(const char *dir, Plan *const *plans, int n)
{
    char path[4200];
    for (int i = 0; i < n; i++)
        if (plans[i]) {
            kernel_path(path, sizeof path, dir, plans[i], "");
            unlink(path);
            kernel_path(path, sizeof path, dir, plans[i], ".old");
            unlink(path);
        }
    rmdir(dir);
}

/* Moves every kernel's file from tmp into dir. A file one replaces is kept (a hard link in tmp)
 * until all are in, so a failure half-way puts every earlier one back as it was. */
static int move_into(const char *tmp, const char *dir, Plan *const *plans, int n)
{
    char from[4200], to[4200], old[4200];
    unsigned char *had = calloc((size_t)n + 1, 1);
    int i, rc = 0;
    if (!had) return 1;
    for (i = 0; i < n; i++) {
        if (!plans[i]) continue;
        kernel_path(from, sizeof from, tmp, plans[i], "");
        kernel_path(to, sizeof to, dir, plans[i], "");
        kernel_path(old, sizeof old, tmp, plans[i], ".old");
        had[i] = link(to, old) == 0;
        if ((!had[i] && errno != ENOENT) || rename(from, to)) {
            say("bundle: cannot write '%s': %s", to, strerror(errno));
            if (had[i]) unlink(old);
            had[i] = 0;
            rc = 1;
            break;
        }
    }
    for (int j = 0; j < (rc ? i : n); j++) {
        if (!plans[j]) continue;
        kernel_path(to, sizeof to, dir, plans[j], "");
        kernel_path(old, sizeof old, tmp, plans[j], ".old");
        if (rc && had[j]) rename(old, to); /* back as it was */
        else if (rc) unlink(to);
        else if (had[j]) unlink(old);
    }
    free(had);
    return rc;
}

/* Plans every line of the list; a line naming an earlier line's kernel is reported (after all
 * passed, so a refusal stays one line) and dropped. */
static int plan_lines(const char *list, const Lines *l, Plan **plans)
{
    char err[512];
    int *dup_of = malloc(((size_t)l->n + 1) * sizeof *dup_of);
    if (!dup_of) return 1;
    for (int i = 0; i < l->n; i++) {
        dup_of[i] = -1;
        if (!(plans[i] = malloc(sizeof *plans[i]))) return free(dup_of), 1;
        if (aot_plan_text(l->text[i], -1, plans[i], err, sizeof err)) {
            say("bundle: %s line %d: %s", list, l->lineno[i], err);
            return free(dup_of), 2;
        }
        for (int j = 0; j < i && dup_of[i] < 0; j++)
            if (plans[j] && !strcmp(plans[j]->canonical, plans[i]->canonical)) dup_of[i] = j;
    }
    for (int i = 0; i < l->n; i++)
        if (dup_of[i] >= 0) {
            say("bundle: %s line %d: the same kernel as line %d (%s); written once", list, l->lineno[i],
                l->lineno[dup_of[i]], plans[i]->symbol);
            free(plans[i]);
            plans[i] = NULL;
        }
    free(dup_of);
    return 0;
}

/* Every kernel's PTX into the folder tmp. */
static int write_kernels(const char *tmp, Plan *const *plans, int n)
{
    char path[4200];
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (!plans[i]) continue;
        Cli one = {0};
        one.cfg = plans[i]->cfg;
        char *ptx = NULL;
        size_t len = 0;
        rc = generate(&one, plans[i], &ptx, &len);
        if (!rc) {
            kernel_path(path, sizeof path, tmp, plans[i], "");
            rc = write_atomic(path, ptx, len);
        }
        free(ptx);
    }
    return rc;
}

static int cmd_bundle_dir(int argc, char **argv)
{
    if (argc < 3 || (argv[2][0] == '-' && argv[2][1]))
        return invalid("bundle: give a config list and -o FILE.c (a C source of compiled kernels) or -d DIR (PTX files)");
    Cli cli = {0};
    const char *list = argv[2], *dir;
    int rc = parse_flags(&cli, argc, argv, 3, USE_DIR, "bundle");
    if (rc) return rc;
    if (!(dir = cli.bundle_dir))
        return invalid("bundle: -o FILE.c (a C source of compiled kernels) or -d DIR (PTX files) is required");
    Lines l;
    if ((rc = read_list(list, &l))) return rc;
    Plan **plans = calloc((size_t)l.n + 1, sizeof *plans);
    char tmp[4096], path[4200];
    int n = 0, made = 0;
    rc = plans ? plan_lines(list, &l, plans) : 1;
    struct stat st;
    int fresh = stat(dir, &st) != 0; /* DIR itself is created by the final rename */
    if (!rc && !fresh && !S_ISDIR(st.st_mode)) {
        say("bundle: -d '%s' is %s; give a directory (it is created when missing)", dir, file_kind(st.st_mode));
        rc = 2;
    }
    if (!rc && !fresh) rc = check_dests(dir, plans, l.n);
    if (!rc && snprintf(tmp, sizeof tmp, fresh ? "%s.tmp.XXXXXX" : "%s/.fa4gen-bundle.XXXXXX", dir) >= (int)sizeof tmp) {
        say("bundle: -d: path is too long");
        rc = 1;
    }
    if (!rc && !(made = mkdtemp(tmp) != NULL)) {
        say("bundle: cannot create a folder %s '%s': %s", fresh ? "beside" : "in", dir, strerror(errno));
        rc = 1;
    }
    if (!rc) rc = write_kernels(tmp, plans, l.n);
    if (!rc && fresh && (chmod(tmp, 0777 & ~current_umask()) || rename(tmp, dir))) {
        say("bundle: cannot create '%s': %s", dir, strerror(errno));
        rc = 1;
    }
    if (!rc && !fresh) rc = move_into(tmp, dir, plans, l.n);
    for (int i = 0; i < l.n && !rc; i++)
        if (plans[i]) {
            kernel_path(path, sizeof path, dir, plans[i], "");
            printf("%s  %s\n", path, plans[i]->canonical);
            n++;
        }
    if (made && (rc || !fresh)) remove_dir(tmp, plans, l.n); /* fresh and ok: tmp is DIR now */
    for (int i = 0; i < l.n && plans; i++) free(plans[i]);
    free(plans);
    lines_free(&l);
    if (!rc) fprintf(stderr, "fa4gen: bundle: %d kernels\n", n);
    return rc;
}

static int cmd_bundle(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_bundle, stdout);
            return 0;
        }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-o")) return cmd_bundle_c(argc, argv);
    return cmd_bundle_dir(argc, argv);
}

/* ---------------------------------------------------------------- commands */

/* The parsed command: the kind the command names (a --config naming another is a conflict),
 * the given fields against the kernel they make, then emit or explain. */
static int run_cli(Cli *cli, const char *cmd, int kind, const char *explain_kind)
{
    char err[512];
    const char *want = kind >= 0 ? cmd : explain_kind, *named = NULL;
    if (want && config_given_has(&cli->given, "kind", &named) && strcmp(named, want)) {
        say("kind: --config names %s but the command is %s%s; use fa4gen %s%s, or a %s config", named,
            kind >= 0 ? "" : "explain ", want, kind >= 0 ? "" : "explain ", named, want);
        return 2;
    }
    if (want && config_set(&cli->cfg, "kind", want, err, sizeof err)) return invalid(err);
    if (config_check_given(&cli->cfg, &cli->given, err, sizeof err)) return invalid(err);
    return kind >= 0 ? cmd_emit(cli) : cmd_explain(cli);
}

/* The help of a command: `fa4gen KIND --help`, `fa4gen explain [KIND] --help`. */
static void help_of(const char *cmd, const char *explain_kind)
{
    const char *k = !strcmp(cmd, "explain") ? explain_kind : cmd;
    if (!k) {
        fputs(usage_explain, stdout);
        return;
    }
    if (!strncmp(k, "mha-bwd", 7))
        printf(usage_bwd, k, k, k);
    else
        fputs(!strcmp(k, "mla-sparse") ? usage_mla : !strcmp(k, "combine") ? usage_combine
              : !strcmp(k, "kv-append") ? usage_kv_append : usage_mha, stdout);
    fputs(usage_values, stdout);
}

static int run_args(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage_top, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("fa4gen %s\n", fa4gen_build_id());
        return 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "bundle")) return cmd_bundle(argc, argv);
    if (!strcmp(cmd, "configs")) return cli_configs(argc, argv, say);
    if (!strcmp(cmd, "cache")) return cli_cache(argc, argv, say);
    int kind = -1; /* a kernel kind's name is the command that emits it */
    for (int k = 0; k < KIND_COUNT; k++)
        if (!strcmp(cmd, kind_name[k])) kind = k;
    if (kind < 0 && strcmp(cmd, "explain")) {
        char kinds[96] = "";
        for (int k = 0; k < KIND_COUNT; k++) snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s, ", kind_name[k]);
        say("'%s' is not a command; use %sexplain, bundle, configs or cache (fa4gen --help)", cmd, kinds);
        return 2;
    }
    /* explain KIND ...: the kind stands first */
    const char *explain_kind = !strcmp(cmd, "explain") && argc > 2 && argv[2][0] != '-' ? argv[2] : NULL;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help_of(cmd, explain_kind);
            return 0;
        }
    Cli cli = {0};
    int first = explain_kind ? 3 : 2;
    int rc = parse_flags(&cli, argc, argv, first, kind >= 0 ? USE_OUT | USE_CONFIG : USE_JSON | USE_CONFIG, cmd);
    if (!rc) rc = run_cli(&cli, cmd, kind, explain_kind);
    free(cli.mod_src);
    return rc;
}

static int run(int argc, char **argv)
{
    Args a;
    int rc = split_args(argc, argv, &a);
    if (rc) return rc;
    rc = run_args(a.argc, a.argv);
    free_args(&a);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = run(argc, argv);
    /* what went to stdout (PTX, a plan, help, a bundle's listing) must have arrived */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        say("cannot write to stdout: %s", strerror(errno ? errno : EIO));
        if (!rc) rc = 1;
    }
    return rc;
}
