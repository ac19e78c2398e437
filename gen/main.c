/* main.c - the fa4gen command line: flags -> config -> PTX file or plan.
 *
 * Exit status: 0 ok, 1 I/O or internal failure, 2 invalid input (one line on
 * stderr naming the field, the value and what is allowed). An output file is
 * written to a temporary name and renamed into place, so a failed run never
 * creates or truncates it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fa4gen.h"

static const char usage_top[] =
    "usage: fa4gen <command> [options]\n"
    "\n"
    "commands:\n"
    "  mha        emit the PTX of one multi-head attention forward kernel\n"
    "  explain    print the plan of a kernel (same options; --json for JSON)\n"
    "  bundle     emit one PTX file per config line of a file (AOT): fa4gen bundle LIST -d DIR\n"
    "\n"
    "  fa4gen mha --help       the kernel options\n"
    "  fa4gen --version        generator version\n";

static const char usage_mha[] =
    "usage: fa4gen mha     --target sm90a|sm100a --dtype bf16|fp16|e4m3 --depth D [options] [-o FILE]\n"
    "       fa4gen explain --target ... [options] [--json]\n"
    "       fa4gen mha     --config '<canonical config>' [-o FILE]\n"
    "\n"
    "options (omitted ones take the plan's best defaults for target, depth and dtype):\n"
    "  --target T          sm90a (Hopper, FlashAttention-3 design) or sm100a (Blackwell, FA4 design;\n"
    "                      ptxas-checked, not run: no Blackwell GPU here)\n"
    "  --dtype T           bf16 | fp16 | e4m3 (e4m3: sm100a only)\n"
    "  --depth D           head dim of Q, K and V; or --qk-depth D and --ov-depth D\n"
    "  --bm N              query rows per CTA (sm90a: 128 or 192)\n"
    "  --bn N              keys per KV tile (multiple of 16)\n"
    "  --group G           query heads per KV head (GQA/MQA); 1 = MHA\n"
    "  --stages S          KV ring depth\n"
    "  --swizzle B         shared-memory swizzle: 32 | 64 | 128 bytes\n"
    "  --mask M            none | causal | window:L,R (causal aligns bottom-right)\n"
    "  --qtiles N          sm100a: Q tiles per CTA (1 or 2)\n"
    "  --cta N             sm100a: 2 = the CTA pair: a 2-CTA cluster shares each MMA (M 256, cta_group::2)\n"
    "  --rescale N         sm100a: conditional O-rescale threshold (log2 units)\n"
    "  --poly P            sm100a: percent of exp2 done by the FMA polynomial\n"
    "  --rope-split 0|1    sm100a MLA prefill: the rope part of K is a separate tensor\n"
    "  --rope-dtype T      its dtype\n"
    "  --pingpong 0|1      sm90a: consumer warpgroups take turns issuing wgmma (default 1)\n"
    "  --persistent 0|1    sm90a: min(tiles, SMs) CTAs loop over tiles (default: 1, 0 for causal)\n"
    "  --config TEXT       the canonical one-line form (as printed by explain); other options then refine it\n"
    "  -o FILE             write the PTX to FILE (default, or FILE -: stdout)\n"
    "  --json              explain: print the plan as JSON\n"
    "\n"
    "The kernel symbol is fa4_<kind>_<target>_<hash>, hash = FNV-1a 64 of the canonical\n"
    "config and the generator version: `fa4gen explain` prints all three.\n";

typedef struct {
    Config cfg;
    const char *out;
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
};

static int invalid(const char *msg)
{
    fprintf(stderr, "fa4gen: %s\n", msg);
    return 2;
}

static int parse_flags(Cli *cli, int argc, char **argv, int first)
{
    char err[512];
    config_init(&cli->cfg);
    /* --config first, so that flags refine it whatever their order */
    for (int i = first; i < argc; i++)
        if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) return invalid("--config: missing value; give the canonical config text");
            if (config_parse_canonical(argv[i + 1], &cli->cfg, err, sizeof err)) return invalid(err);
        }
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) { cli->json = 1; continue; }
        if (!strcmp(a, "--config")) { i++; continue; }
        if (!strcmp(a, "-o") || !strcmp(a, "-d")) {
            if (i + 1 >= argc) return invalid(!strcmp(a, "-o") ? "-o: missing file name" : "-d: missing directory");
            if (!strcmp(a, "-o")) cli->out = strcmp(argv[i + 1], "-") ? argv[i + 1] : NULL; /* '-': stdout */
            else cli->bundle_dir = argv[i + 1];
            i++;
            continue;
        }
        const char *key = NULL;
        for (size_t k = 0; k < sizeof flag_keys / sizeof flag_keys[0]; k++)
            if (!strcmp(a, flag_keys[k][0])) key = flag_keys[k][1];
        if (!key) {
            snprintf(err, sizeof err, "'%s' is not an option; see fa4gen mha --help", a);
            return invalid(err);
        }
        if (i + 1 >= argc) {
            snprintf(err, sizeof err, "%s: missing value", a);
            return invalid(err);
        }
        if (config_set(&cli->cfg, key, argv[++i], err, sizeof err)) return invalid(err);
    }
    return 0;
}

/* Write data to path through a temporary file in the same directory and rename. */
static int write_atomic(const char *path, const char *data, size_t len)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) {
        fprintf(stderr, "fa4gen: -o: path is too long\n");
        return 1;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "fa4gen: cannot create a file next to '%s': %s\n", path, strerror(errno));
        return 1;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t k = write(fd, data + done, len - done);
        if (k <= 0) break;
        done += (size_t)k;
    }
    int ok = done == len && fsync(fd) == 0;
    ok = (close(fd) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "fa4gen: cannot write '%s': %s\n", path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

static int generate(const Cli *cli, Plan *plan, char **ptx, size_t *len)
{
    char err[512];
    if (fa4gen_generate(&cli->cfg, plan, ptx, len, err, sizeof err)) {
        fprintf(stderr, "fa4gen: %s\n", err);
        return strncmp(err, "internal", 8) ? 2 : 1;
    }
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
        fprintf(stderr, "fa4gen: %s\n", err);
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

/* bundle LIST -d DIR: one kernel per non-empty, non-# line; every config is
 * checked before any file is written. */
static int cmd_bundle(int argc, char **argv)
{
    if (argc < 3) return invalid("bundle: give a config list file and -d DIR");
    Cli cli = {0};
    int rc = parse_flags(&cli, argc, argv, 3);
    if (rc) return rc;
    if (!cli.bundle_dir) return invalid("bundle: -d DIR is required");
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        fprintf(stderr, "fa4gen: bundle: cannot read '%s': %s\n", argv[2], strerror(errno));
        return 1;
    }
    char line[1024], err[512];
    int pass, n = 0;
    for (pass = 0; pass < 2 && !rc; pass++) {
        rewind(f);
        for (int lineno = 1; fgets(line, sizeof line, f) && !rc; lineno++) {
            line[strcspn(line, "\r\n")] = 0;
            if (!line[0] || line[0] == '#') continue;
            Cli one = {0};
            Plan *plan = malloc(sizeof *plan);
            if (!plan) { rc = 1; break; }
            if (config_parse_canonical(line, &one.cfg, err, sizeof err)) {
                fprintf(stderr, "fa4gen: bundle: %s line %d: %s\n", argv[2], lineno, err);
                rc = 2;
            } else if (pass == 0) {
                if (plan_make(&one.cfg, plan, err, sizeof err)) {
                    fprintf(stderr, "fa4gen: bundle: %s line %d: %s\n", argv[2], lineno, err);
                    rc = 2;
                }
            } else {
                char *ptx = NULL, path[4096];
                size_t len = 0;
                rc = generate(&one, plan, &ptx, &len);
                if (!rc) {
                    snprintf(path, sizeof path, "%s/%s.ptx", cli.bundle_dir, plan->symbol);
                    rc = write_atomic(path, ptx, len);
                    if (!rc) printf("%s  %s\n", path, plan->canonical), n++;
                }
                free(ptx);
            }
            free(plan);
        }
    }
    fclose(f);
    if (!rc) fprintf(stderr, "fa4gen: bundle: %d kernels\n", n);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage_top, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("fa4gen %s\n", FA4GEN_VERSION);
        return 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "bundle")) return cmd_bundle(argc, argv);
    int kind = -1; /* a kernel kind's name is the command that emits it */
    for (int k = 0; k < KIND_COUNT; k++)
        if (!strcmp(cmd, kind_name[k])) kind = k;
    if (kind < 0 && strcmp(cmd, "explain")) {
        char kinds[64] = "";
        for (int k = 0; k < KIND_COUNT; k++) snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s, ", kind_name[k]);
        fprintf(stderr, "fa4gen: '%s' is not a command; use %sexplain or bundle (fa4gen --help)\n", cmd, kinds);
        return 2;
    }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_mha, stdout);
            return 0;
        }
    Cli cli = {0};
    int first = 2;
    if (!strcmp(cmd, "explain") && argc > 2 && argv[2][0] != '-') {
        /* explain KIND ... */
        first = 3;
    }
    int rc = parse_flags(&cli, argc, argv, first);
    if (rc) return rc;
    if (first == 3 || kind >= 0) {
        char err[512];
        if (config_set(&cli.cfg, "kind", kind >= 0 ? cmd : argv[2], err, sizeof err)) return invalid(err);
    }
    return kind >= 0 ? cmd_emit(&cli) : cmd_explain(&cli);
}
