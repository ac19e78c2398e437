/* cli_kernel.c - the fa4gen command line's kernel commands (mha, mla-sparse, combine, kv-append, the
 * backward kinds, explain): their options parsed into a config (flags refine one --config; --opt=value
 * split first), the files they name checked and read (--score-mod) or written (-o, through a temporary
 * file and a rename), and the kernel emitted or its plan explained (with --predict, its modelled time:
 * gen/cli_predict.c). The contract (exit status, files) is
 * main.c's; the shared pieces (say, the file checks, write_atomic) serve its bundle command too. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_kernel.h"
#include "cli_tools.h"
#include "score_mod.h"

/* CLI flag -> config key. */
static const char *const flag_keys[][2] = {
    {"--target", "target"}, {"--dtype", "dtype"},       {"--depth", "depth"},     {"--qk-depth", "qk"},
    {"--ov-depth", "ov"},   {"--bm", "bm"},             {"--bn", "bn"},           {"--group", "group"},
    {"--stages", "stages"}, {"--swizzle", "swizzle"},   {"--mask", "mask"},       {"--qtiles", "qtiles"},
    {"--cta", "cta"},       {"--rescale", "rescale"},   {"--poly", "poly"},       {"--rope-split", "rope_split"},
    {"--rope-dtype", "rope_dtype"}, {"--pingpong", "pingpong"},   {"--persistent", "persistent"},
    {"--occupancy", "occupancy"}, {"--dynamic", "dynamic"}, {"--claim", "claim"},
    {"--b-topk", "b_topk"}, {"--num-mbars", "num_mbars"}, {"--q-smem-depth", "q_smem_depth"},
    {"--q-tmem-depth", "q_tmem_depth"}, {"--cta-group", "cta_group"}, {"--tma-store", "tma_store"},
    {"--sink", "sink"},     {"--split", "split"},     {"--cluster", "cluster"},     {"--early", "early"},  {"--prefetch", "prefetch"},     {"--varlen", "varlen"}, {"--page", "page"},
    {"--softcap", "softcap"}, {"--alibi", "alibi"},
};

/* One line on stderr: control and non-ASCII bytes of what it echoes become \xNN. */
void say(const char *fmt, ...)
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

int invalid(const char *msg)
{
    say("%s", msg);
    return 2;
}

/* ---------------------------------------------------------------- files by name */

/* What a path that is not a regular file is, for the refusal that names it. */
const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* An input named on the command line, opened for reading. O_NONBLOCK, so a FIFO's open does not
 * wait for a writer; anything but a regular file is refused by name. The fd (blocking again), or
 * -1 after one line with the exit status in *rc: missing_rc when it cannot be opened, 2 when it
 * is not a regular file. */
int open_input(const char *what, const char *name, int missing_rc, int *rc)
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
int check_output(const char *what, const char *path, const char *stdout_hint)
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


void free_args(Args *a)
{
    for (int i = 0; i < a->n_names; i++) free(a->names[i]);
    free(a->names);
    free(a->argv);
}

int split_args(int argc, char **argv, Args *out)
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

int parse_flags(Cli *cli, int argc, char **argv, int first, int uses, const char *cmd)
{
    ConfigGiven flags;
    const char *out_seen = NULL, *dir_seen = NULL;
    char err[512];
    int p;
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
            char hex[20], how[80];
            snprintf(how, sizeof how, "--score-mod %.60s", v);
            if (!(rc = read_mod(cli, v))) {
                snprintf(hex, sizeof hex, "%016llx", (unsigned long long)score_mod_hash(cli->mod_src));
                if (config_give(&cli->cfg, &flags, "mod", hex, how, err, sizeof err)) rc = invalid(err);
            }
        } else if (!strcmp(cmd, "explain") && (p = predict_flag(&cli->predict, a, v, err, sizeof err))) {
            if (p < 0) rc = invalid(err);
        } else {
            rc = parse_config_flag(cli, &flags, a, v, cmd);
        }
    }
    config_given_merge(&cli->given, &flags);
    if (!rc && cli->predict.shape_flag && !cli->predict.gpu) {
        say("%s: a shape for --predict; give --predict GPU too", cli->predict.shape_flag);
        return 2;
    }
    cli->predict.json = cli->json; /* with --predict: the prediction alone, as JSON */
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

mode_t current_umask(void)
{
    mode_t m = umask(0);
    umask(m);
    return m;
}
static mode_t new_file_mode(void) { return 0666 & ~current_umask(); }

/* Write data to path through a temporary file beside it and a rename; a symlink is followed (its
 * target is replaced, the link stays). Anything but a regular file or a new name is refused. */
int write_atomic(const char *path, const char *data, size_t len)
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

int generate(const Cli *cli, Plan *plan, char **ptx, size_t *len)
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
    } else if (cli->predict.gpu && (rc = predict_check(&cli->predict, plan, err, sizeof err))) {
        say("%s", err);
    } else {
        /* --predict --json prints the prediction's object alone (the plan's is explain --json) */
        char *text = cli->predict.gpu && cli->json ? NULL : cli->json ? plan_explain_json(plan) : plan_explain_text(plan);
        if (!text && !(cli->predict.gpu && cli->json)) rc = 1;
        else if (text) fputs(text, stdout);
        free(text);
        if (!rc && cli->predict.gpu) {
            fflush(stdout); /* the plan stands before the prediction, which takes seconds */
            rc = predict_run(&cli->predict, plan, stdout, err, sizeof err);
            if (rc) say("%s", err);
        }
    }
    free(plan);
    return rc;
}

/* The parsed command: the kind the command names (a --config naming another is a conflict),
 * the given fields against the kernel they make, then emit or explain. */
int run_cli(Cli *cli, const char *cmd, int kind, const char *explain_kind)
{
    char err[512];
    const char *want = kind >= 0 ? cmd : explain_kind, *named = NULL;
    if (want && config_given_has(&cli->given, "kind", &named) && strcmp(named, want)) {
        say("kind: --config names %s but the command is %s%s; use fa4gen %s%s, or a %s config", named,
            kind >= 0 ? "" : "explain ", want, kind >= 0 ? "" : "explain ", named, want);
        return 2;
    }
    if (want && config_set(&cli->cfg, "kind", want, err, sizeof err)) return invalid(err);
    /* explain --predict GPU without a target: the GPU's (b300: sm103a, the kernel a B300 loads) */
    int gpu_target = kind < 0 ? predict_gpu_target(cli->predict.gpu) : -1;
    if (gpu_target >= 0 && !config_given_has(&cli->given, "target", NULL) &&
        config_set(&cli->cfg, "target", target_name[gpu_target], err, sizeof err))
        return invalid(err);
    if (config_check_given(&cli->cfg, &cli->given, err, sizeof err)) return invalid(err);
    return kind >= 0 ? cmd_emit(cli) : cmd_explain(cli);
}
