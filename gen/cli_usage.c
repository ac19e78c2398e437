/* cli_usage.c - the fa4gen command line's help texts: the command list, each kernel command's options
 * (mha, mla-sparse, combine, kv-append, the three backward kinds), explain's and bundle's; help_of picks
 * the one `fa4gen KIND --help` prints. (configs' and cache's live with them in gen/cli_tools.c.) */
#include <stdio.h>
#include <string.h>

#include "cli_usage.h"

const char usage_top[] =
    "usage: fa4gen <command> [options]\n"
    "\n"
    "commands:\n"
    "  mha         emit the PTX of a multi-head attention forward kernel (sm90a, sm100a, sm103a)\n"
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
    "usage: fa4gen mha     --target sm90a|sm100a|sm103a --dtype bf16|fp16|e4m3 --depth D [options] [-o FILE]\n"
    "       fa4gen explain --target ... [options] [--json]\n"
    "       fa4gen mha     --config '<canonical config>' [options] [-o FILE]\n"
    "\n"
    "options (omitted ones take the plan's best defaults for target, depth and dtype):\n"
    "  --target T          sm90a (Hopper, FlashAttention-3 design) or sm100a (Blackwell, FA4 design;\n"
    "                      ptxas-checked, not run: no Blackwell GPU here); sm103a: the sm100a kernel for\n"
    "                      the B300 (.target sm_103a, compute capability 10.3); 'sm100a' below means both\n"
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
    "  --dynamic 0|1       sm90a, persistent dense unsplit: a CTA takes each next tile from a per-launch\n"
    "                      counter (kernel parameter tile_ctr: two u32, zero at launch; the kernel zeroes\n"
    "                      them again as it ends) instead of the static walk\n"
    "  --occupancy 1|2     sm90a, bm 64: CTAs an SM (.minnctapersm); at 2 each gets half the registers (a\n"
    "                      consumer 232) and half the SM's shared memory, and a persistent grid 2 x SMs\n"
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
    "                      caller (default 2; 0 with --early 1; paged reads the table twice). sm90a dense\n"
    "                      unsplit forward: the first tile's Q and N K/V blocks, only while the previous grid\n"
    "                      still runs (a watch warp passes the wait; default 1)\n"
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
    "usage: fa4gen mla-sparse --target sm90a|sm100a|sm103a --depth 576|512 [options] [-o FILE]\n"
    "       fa4gen explain mla-sparse --target ... [options] [--json]\n"
    "       fa4gen mla-sparse --config '<canonical config>' [options] [-o FILE]\n"
    "\n"
    "Sparse MLA prefill (DeepSeek-V3.2): each query token attends to its top-k kv rows, one kv head,\n"
    "V = the first 512 columns of kv. Options (omitted ones take the plan's defaults):\n"
    "  --target T          sm90a (Hopper) or sm100a (Blackwell: tcgen05, TMA gather4); sm103a: the sm100a\n"
    "                      kernel for the B300 (.target sm_103a); 'sm100a' below means both\n"
    "  --dtype T           the kv dtype: bf16, or e4m3 (sm100a: fp8 kv with bf16 q and out)\n"
    "  --depth D           d_qk: 576 (512 nope + 64 rope) or 512; or --qk-depth D\n"
    "  --ov-depth D        512 (the only V depth; may be left out)\n"
    "  --group G           1 (one kv head)\n"
    "  --swizzle B         128\n"
    "  --mask M            none (the index list says which keys a token sees)\n"
    "  --rescale N         conditional O-rescale threshold (log2 units)\n"
    "  --poly P            0\n"
    "  --tma-store 0|1     O through shared memory and a TMA store (out strides multiples of 16 B) instead\n"
    "                      of per-thread stores (default 1; the runtime passes 0 when the strides do not allow it)\n"
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
    "usage: fa4gen combine --target sm90a|sm100a|sm103a --dtype bf16|fp16 --ov-depth D [-o FILE]\n"
    "       fa4gen explain combine --target ... [--json]\n"
    "       fa4gen combine --config 'combine target=T dtype=T ov=D' [-o FILE]\n"
    "\n"
    "The split-KV combine kernel: merges the f32 partial O and LSE a split=1 kernel wrote per split\n"
    "into O and LSE. Options:\n"
    "  --target T          sm90a, sm100a or sm103a (B300: the sm100a kernel for .target sm_103a)\n"
    "  --dtype T           O's dtype: bf16 or fp16 (an e4m3 split kernel's O is bf16)\n"
    "  --ov-depth D        O's depth: a multiple of 16 up to 1024\n"
    "  --config TEXT       the canonical one-line form (as printed by explain); other options then refine it\n"
    "  -o FILE             write the PTX to FILE (default, or FILE -: stdout)\n"
    "  --json              explain: print the plan as JSON\n";

static const char usage_kv_append[] =
    "usage: fa4gen kv-append --target sm90a|sm100a|sm103a --dtype bf16|fp16|e4m3 --depth D [-o FILE]\n"
    "       fa4gen explain kv-append --target ... [--json]\n"
    "       fa4gen kv-append --config 'kv-append target=T dtype=T qk=D ov=D' [-o FILE]\n"
    "\n"
    "The KV-cache append kernel (fa4_kv_append): writes new K, V rows [batch, s_new, heads_kv, depth] into a\n"
    "dense or paged cache at each sequence's length, and the lengths after the append. The cache layout is a\n"
    "launch argument. Options:\n"
    "  --target T          sm90a, sm100a or sm103a (B300: the sm100a kernel for .target sm_103a)\n"
    "  --dtype T           the cache's dtype: bf16 | fp16 | e4m3 (a byte copy)\n"
    "  --depth D           K's and V's depth; or --qk-depth D and --ov-depth D (multiples of 16 up to 1024)\n"
    "  --config TEXT       the canonical one-line form (as printed by explain); other options then refine it\n"
    "  -o FILE             write the PTX to FILE (default, or FILE -: stdout)\n"
    "  --json              explain: print the plan as JSON\n";

/* the three backward kinds: %s is the kind's name */
static const char usage_bwd[] =
    "usage: fa4gen %s --target sm90a|sm100a|sm103a --dtype bf16|fp16 --depth D [options] [-o FILE]\n"
    "       fa4gen explain %s --target ... [options] [--json]\n"
    "       fa4gen %s --config '<canonical config>' [options] [-o FILE]\n"
    "\n"
    "The attention backward (docs/kernels/mha-bwd.md) is three kernels the runtime launches in turn:\n"
    "mha-bwd-pre (D = rowsum(dO o O), -LSE log2 e, the dQ accumulator zeroed), mha-bwd (per KV tile: S and P\n"
    "recomputed, dK and dV in registers, dQ added to the f32 accumulator) and mha-bwd-dq (dQ scaled and\n"
    "converted; the sink gradient summed). The helper kernels take the main kernel's options, which shape\n"
    "the workspace they share. Options (omitted ones take the plan's defaults):\n"
    "  --target T          sm90a (wgmma, dK/dV in registers) or sm100a (tcgen05, S/dP/dK/dV in TMEM; d64, d128);\n"
    "                      sm103a: the sm100a kernel for the B300 (.target sm_103a); 'sm100a' below means both\n"
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
    "  --cta 1|2           sm100a d128: 2 = a cluster of two CTAs owns 256 keys, every MMA cta_group::2 and one set of\n"
    "                      dQ adds per pair (not with varlen or deterministic=1)\n"
    "  --config TEXT       the canonical one-line form (as printed by explain); other options then refine it\n"
    "  -o FILE             write the PTX to FILE (default, or FILE -: stdout)\n"
    "  --json              explain: print the plan as JSON\n";

static const char usage_explain[] =
    "usage: fa4gen explain [KIND] <that command's options> [--json]\n"
    "       fa4gen explain [mha|mla-sparse] <options> --predict GPU [shape options] [--json]\n"
    "\n"
    "Prints the plan of the kernel those options make: canonical config, symbol and hash, tiles, the\n"
    "shared-memory map, TMEM columns, warp roles with their register budgets, named barriers, tensor\n"
    "maps, transaction bytes, the launch shape and the kernel's parameters; --json gives the same as\n"
    "JSON. Without a kind: mha, or the kind --config names. fa4gen <kind> --help lists the options.\n"
    "\n"
    "--predict GPU   after the plan, the config's predicted time for one shape: per launch the time, the\n"
    "                bottleneck and each unit's busy share, from the simulator's timing mode (the PTX run\n"
    "                on the CPU under a table of the GPU's rates). GPU: h100 | h200 (sm90a), b200 (sm100a),\n"
    "                b300 (sm103a), or a table file (*.tbl); without --target the config takes the GPU's.\n"
    "                With --json: the prediction alone as one JSON object (evidence, table, per launch the\n"
    "                time, bottleneck and busy shares). Evidence level: modelled, not measured; the table\n"
    "                and its stated validation are printed with it. Needs the simulator built beside\n"
    "                fa4gen (build/sim/timecase and build/sim/libcuda.so.1; FA4GEN_TIMECASE names another\n"
    "                timecase). Seconds for small shapes, about a minute for long ones. Not for configs\n"
    "                with split, cluster, varlen, page, sink, softcap, alibi, a score_mod,\n"
    "                a window mask or rope_split (the simulator's case passes dense tensors only).\n"
    "  --batch N       mha: batch (default 2)\n"
    "  --heads N       query heads (default: mha 16, mla-sparse 128); K/V heads = N / group\n"
    "  --seqlen-q N    query rows per sequence (default: mha 2048, mla-sparse 64 tokens)\n"
    "  --seqlen-k N    key rows (default: mha 2048, mla-sparse s_kv 8192)\n"
    "  --topk N        mla-sparse: keys per query (default 2048)\n"
    "  --samples N     clusters simulated per launch, the rest interpolated (default 2)\n";

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

const char usage_bundle[] =
    "usage: fa4gen bundle [LIST] [--config TEXT]... [--targets T,T] [--name NAME] [--jobs N] -o FILE.c\n"
    "       fa4gen bundle LIST -d DIR\n"
    "\n"
    "-o FILE.c   compile every config (a LIST line, canonical or any subset of its key=value words, or a\n"
    "            --config) with the toolkit's ptxas into a cubin, pack it with its PTX into a fatbin\n"
    "            (fatbinary), and write a C source holding them, a table by config hash and a\n"
    "            constructor that registers it: a host that links it gets these kernels before anything\n"
    "            is generated (FA4GEN_DISABLE_JIT=1: only these). Tools: FA4GEN_PTXAS, FA4GEN_FATBINARY,\n"
    "            $CUDA_HOME/bin, /usr/local/cuda/bin, PATH. FILE.c is a file (not -, not a FIFO or device).\n"
    "  --targets T,T   compile each config for each of these targets (sm90a, sm100a, sm103a) instead of its\n"
    "                  own; a config a target cannot build (a word it lacks, a depth it refuses) is skipped\n"
    "                  with one note on stderr, and the bundle holds the rest (exit 0 if at least one kernel\n"
    "                  is built)\n"
    "  --name NAME     the table is fa4_bundle_NAME (default: FILE's base name)\n"
    "  --jobs N        configs compiled at once (default: the CPUs online); a line per finished kernel\n"
    "-d DIR      write one PTX file per config into DIR (no compile), created when missing\n"
    "\n"
    "LIST: one config per line (LF or CRLF line ends), blank lines and '#' comments skipped; LIST - reads\n"
    "standard input (fa4gen configs ... | fa4gen bundle - -o kernels.c). A line naming the same kernel as an\n"
    "earlier one is reported and made once. Options take their value after a space or '='; each at most\n"
    "once, --config as often as wanted.\n";

/* The help of a command: `fa4gen KIND --help`, `fa4gen explain [KIND] --help`. */
void help_of(const char *cmd, const char *explain_kind)
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
