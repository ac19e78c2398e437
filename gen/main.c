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
 *
 * This file: the dispatch (main, run_args), bundle and the hand-offs to configs and cache
 * (gen/cli_tools.c); the kernel commands and explain are gen/cli_kernel.c's, the help texts
 * gen/cli_usage.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aot.h"
#include "cli_kernel.h"
#include "cli_tools.h"
#include "cli_usage.h"
#include "fa4gen.h"

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
            say("bundle: --targets '%s': give targets from sm90a, sm100a, sm103a, comma-separated, each once", v);
            return 2;
        }
        r->targets[r->n_targets++] = (TargetId)id;
        t += k + (t[k] == ',');
    }
    if (!r->n_targets) return invalid("bundle: --targets: empty; give one or more of sm90a, sm100a, sm103a");
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

/* bundle LIST -d DIR: one kernel per config line; every config is checked
 * before any file is written, every file is written into a temporary folder
 * (inside DIR, or beside it when DIR does not exist yet) and only then moved
 * into place, all or none. A line that names the same kernel as an earlier
 * one is reported and written once. */
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
