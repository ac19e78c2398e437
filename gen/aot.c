/* aot.c - ahead-of-time bundles: every config of a list compiled with the toolkit's
 * ptxas into a cubin, packed with its PTX into one fatbin per kernel by the toolkit's
 * fatbinary, and written out as a C source: the fatbins, a table keyed by config hash
 * (canonical config + generator version, the runtime's bundle key) and a constructor
 * that registers it with libfa4rt.
 *
 * Guarantees: every config is planned before anything runs, so a refusal is one line
 * and no tool starts; PTX is generated in process, then up to `jobs` kernels are
 * compiled at once (ptxas, then fatbinary, each a child process) and a line per
 * finished kernel goes to stderr; a failed tool stops the bundle with its log, after
 * the running ones end; the work folder is removed whatever happens.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aot.h"

extern char **environ;

enum { AOT_PATH = 4096 };

/* One kernel of the bundle and the state of its two tool runs. */
typedef struct {
    Plan *plan;
    char ptx[AOT_PATH], cubin[AOT_PATH], fatbin[AOT_PATH], log[AOT_PATH];
    int step;      /* 0 waiting, 1 ptxas running, 2 fatbinary running, 3 done */
    pid_t pid;
    double t0;
} Job;

typedef struct {
    char ptxas[AOT_PATH], fatbinary[AOT_PATH];
} Tools;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- tools */

static int executable(const char *path) { return path[0] == '/' && access(path, X_OK) == 0; }

/* $ENV, $CUDA_HOME/bin, /usr/local/cuda/bin, then PATH (as the runtime finds ptxas). */
static int find_tool(const char *name, const char *env, char *out, size_t n)
{
    const char *set = getenv(env), *home = getenv("CUDA_HOME");
    if (set && set[0]) {
        snprintf(out, n, "%s", set);
        return executable(out) ? 0 : -1;
    }
    if (home && home[0] == '/' && snprintf(out, n, "%s/bin/%s", home, name) < (int)n && executable(out)) return 0;
    if (snprintf(out, n, "/usr/local/cuda/bin/%s", name) < (int)n && executable(out)) return 0;
    for (const char *path = getenv("PATH"); path && *path;) {
        size_t k = strcspn(path, ":");
        if (k && snprintf(out, n, "%.*s/%s", (int)k, path, name) < (int)n && executable(out)) return 0;
        path += k + (path[k] == ':');
    }
    return -1;
}

static int find_tools(const AotRequest *r, Tools *t)
{
    if (find_tool("ptxas", "FA4GEN_PTXAS", t->ptxas, sizeof t->ptxas)) {
        r->say("bundle: no ptxas (FA4GEN_PTXAS, $CUDA_HOME/bin, /usr/local/cuda/bin, PATH); the CUDA toolkit is "
               "needed to compile a bundle");
        return 1;
    }
    if (find_tool("fatbinary", "FA4GEN_FATBINARY", t->fatbinary, sizeof t->fatbinary)) {
        r->say("bundle: no fatbinary (FA4GEN_FATBINARY, $CUDA_HOME/bin, /usr/local/cuda/bin, PATH); the CUDA "
               "toolkit is needed to compile a bundle");
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- plans */

int aot_plan_text(const char *text, int target, Plan *p, char *err, size_t n)
{
    Config c;
    ConfigGiven g;
    if (config_parse_given(text, &c, &g, err, n)) return -1;
    if (target >= 0 && config_set(&c, "target", target_name[target], err, n)) return -1;
    return config_check_given(&c, &g, err, n) || plan_make(&c, p, err, n) ? -1 : 0;
}

/* Where a config was given, for a message: "LIST line N" or "--config 'TEXT'". */
static void config_origin(const AotConfig *a, char *buf, size_t n)
{
    if (a->line) snprintf(buf, n, "%s line %d", a->from, a->line);
    else snprintf(buf, n, "%s '%.200s'", a->from, a->text);
}

/* A kernel made twice (the same canonical config from two lines, or through --targets): one note
 * per repeat, said once every config has planned, so that a refusal stays one line. */
static void say_duplicates(const AotRequest *r, Plan *const *all, const int *first_of, int count)
{
    char here[300], there[300];
    int per = r->n_targets ? r->n_targets : 1;
    for (int i = 0; i < count; i++)
        if (all[i] && first_of[i] != i) {
            config_origin(&r->configs[i / per], here, sizeof here);
            config_origin(&r->configs[first_of[i] / per], there, sizeof there);
            r->say("bundle: %s: the same kernel as %s (%s); compiled once", here, there, all[first_of[i]]->symbol);
        }
}

/* Plan config i of the request (its (i % per)-th target with --targets). 0; 2 after a line when the
 * text is invalid; -1 with the reason in err when, with --targets, this target cannot build it (a word
 * the target lacks, a depth it refuses): a skip, not a stop. */
static int plan_one(const AotRequest *r, int i, Plan *p, char *err, size_t n)
{
    int per = r->n_targets ? r->n_targets : 1;
    const AotConfig *a = &r->configs[i / per];
    char origin[300];
    Config c;
    ConfigGiven g;
    /* without --targets, or text no target reads: the line is wrong, and says so */
    int wrong = !r->n_targets || config_parse_given(a->text, &c, &g, err, n);
    if (!wrong && !aot_plan_text(a->text, (int)r->targets[i % per], p, err, n)) return 0;
    if (wrong && !aot_plan_text(a->text, r->n_targets ? (int)r->targets[i % per] : -1, p, err, n)) return 0;
    if (!wrong) return -1;
    config_origin(a, origin, sizeof origin);
    r->say("bundle: %s: %s", origin, err);
    return 2;
}

/* Plan every config for every target asked for; duplicates are dropped with a note, and so is a config a
 * --targets target cannot build (one note each). */
static int plan_all(const AotRequest *r, Plan ***plans_out, int *n_out)
{
    int per = r->n_targets ? r->n_targets : 1, n = 0, rc = 0, count = r->n_configs * per;
    Plan **all = calloc((size_t)count + 1, sizeof *all), **plans = calloc((size_t)count + 1, sizeof *plans);
    int *first_of = calloc((size_t)count + 1, sizeof *first_of), any_skipped = 0;
    char **skipped = calloc((size_t)count + 1, sizeof *skipped); /* why, for configs a target cannot build */
    char err[512], origin[300];
    if (!all || !plans || !first_of || !skipped) rc = 1;
    for (int i = 0; i < count && !rc; i++) {
        if (!(all[i] = malloc(sizeof *all[i]))) { rc = 1; break; }
        int got = plan_one(r, i, all[i], err, sizeof err);
        first_of[i] = i;
        if (got > 0) rc = got;
        if (got < 0 && !(skipped[i] = strdup(err))) rc = 1;
        if (got) {
            free(all[i]);
            all[i] = NULL;
            continue;
        }
        for (int j = 0; j < i && first_of[i] == i; j++)
            if (all[j] && first_of[j] == j && !strcmp(all[j]->canonical, all[i]->canonical)) first_of[i] = j;
    }
    /* notes only once every config has planned and some kernel is left, so that a refusal stays one line */
    int built = 0, first_skip = -1;
    for (int i = 0; i < count && !rc; i++) {
        built += all[i] != NULL;
        if (skipped[i] && first_skip < 0) first_skip = i;
    }
    for (int i = 0; i < count && !rc && first_skip >= 0; i++)
        if (skipped[i] && (built || i == first_skip)) {
            config_origin(&r->configs[i / per], origin, sizeof origin);
            r->say(built ? "bundle: %s: skipped for %s: %s"
                         : "bundle: no config could be built for the --targets given; the first: %s: for %s: %s",
                   origin, target_name[r->targets[i % per]], skipped[i]);
            any_skipped = 1;
        }
    if (!rc) say_duplicates(r, all, first_of, count);
    for (int i = 0; i < count && all; i++) {
        if (!rc && all[i] && first_of[i] == i) plans[n++] = all[i];
        else free(all[i]);
    }
    for (int i = 0; i < count && skipped; i++) free(skipped[i]);
    free(skipped);
    free(all);
    free(first_of);
    if (!rc && n == 0) {
        if (!any_skipped) r->say("bundle: no configs; give a list file or --config");
        rc = 2;
    }
    if (rc) {
        for (int i = 0; i < n; i++) free(plans[i]);
        free(plans);
        return rc;
    }
    *plans_out = plans;
    *n_out = n;
    return 0;
}

/* ---------------------------------------------------------------- files */

static int write_whole(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* ---------------------------------------------------------------- the job pool */

static int spawn(const char *tool, char *const argv[], const char *log, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int rc = posix_spawn(pid, tool, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

/* Start the next step of job j: ptxas (PTX -> cubin), then fatbinary (cubin + PTX -> fatbin). */
static int start_step(const AotRequest *r, const Tools *t, Job *j)
{
    char arch[32], elf[AOT_PATH + 32], ptx[AOT_PATH + 32], create[AOT_PATH + 16];
    const char *sm = j->plan->target->ptx_target + 3; /* "sm_90a" -> "90a" */
    int rc;
    if (j->step == 0) {
        snprintf(arch, sizeof arch, "-arch=%s", j->plan->target->ptx_target);
        char *argv[] = {(char *)t->ptxas, arch, "-O3", j->ptx, "-o", j->cubin, NULL};
        rc = spawn(t->ptxas, argv, j->log, &j->pid);
        j->t0 = now_s();
    } else {
        snprintf(create, sizeof create, "--create=%s", j->fatbin);
        snprintf(elf, sizeof elf, "--image3=kind=elf,sm=%s,file=%s", sm, j->cubin);
        snprintf(ptx, sizeof ptx, "--image3=kind=ptx,sm=%s,file=%s", sm, j->ptx);
        char *argv[] = {(char *)t->fatbinary, "-64", create, elf, ptx, NULL};
        rc = spawn(t->fatbinary, argv, j->log, &j->pid);
    }
    if (rc) {
        r->say("bundle: cannot run %s: %s", j->step == 0 ? t->ptxas : t->fatbinary, strerror(rc));
        return 1;
    }
    j->step++;
    return 0;
}

/* A tool failed: its log, whole, after one line naming the kernel. */
static void report_failure(const AotRequest *r, const Tools *t, const Job *j, int status)
{
    size_t n = 0;
    char *log = read_whole_file(j->log, &n);
    r->say("bundle: %s failed (%s %d) for '%s'; its log follows", j->step == 1 ? t->ptxas : t->fatbinary,
           WIFEXITED(status) ? "exit status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
           j->plan->canonical);
    if (log) fputs(log, stderr);
    free(log);
}

static int run_jobs(const AotRequest *r, const Tools *t, Job *jobs, int n)
{
    int next = 0, running = 0, done = 0, rc = 0, width = r->jobs > 0 ? r->jobs : 1;
    while (done < n && (!rc || running)) {
        while (!rc && running < width && next < n) {
            if (start_step(r, t, &jobs[next])) rc = 1;
            else running++, next++;
        }
        if (!running) break;
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR) continue;
            r->say("bundle: waitpid: %s", strerror(errno));
            return 1;
        }
        Job *j = NULL;
        for (int i = 0; i < next && !j; i++)
            if (jobs[i].pid == pid && jobs[i].step < 3) j = &jobs[i];
        if (!j) continue; /* not ours */
        if (!WIFEXITED(status) || WEXITSTATUS(status)) {
            if (!rc) report_failure(r, t, j, status);
            j->step = 3;
            running--;
            rc = 1;
            continue;
        }
        if (j->step == 1 && !rc) {
            if (start_step(r, t, j)) rc = 1, running--;
            continue;
        }
        j->step = 3;
        running--;
        done++;
        if (!rc)
            fprintf(stderr, "fa4gen: bundle: [%d/%d] %s %.1f s  %s\n", done, n, j->plan->symbol, now_s() - j->t0,
                    j->plan->canonical);
    }
    return rc;
}

/* ---------------------------------------------------------------- the C source */

static void emit_bytes(Buf *b, const unsigned char *d, size_t n)
{
    for (size_t i = 0; i < n; i++) buf_printf(b, "%u,%s", d[i], (i % 24 == 23 || i + 1 == n) ? "\n" : "");
}

/* The source: fatbins, the table and the constructor; nothing but fa4.h. */
static int emit_source(const AotRequest *r, Job *jobs, int n, Buf *b)
{
    buf_printf(b, "/* %s - an fa4gen AOT bundle: %d kernel%s, written by fa4gen %s (`fa4gen bundle`).\n"
               " * Link this file into a host that uses libfa4rt: its constructor registers the table, and\n"
               " * every context takes these kernels before it generates anything. Do not edit. */\n"
               "#include <stddef.h>\n#include <stdint.h>\n\n#include \"fa4.h\"\n\n",
               r->name, n, n == 1 ? "" : "s", fa4gen_build_id());
    for (int i = 0; i < n; i++) {
        size_t size = 0;
        unsigned char *fb = (unsigned char *)read_whole_file(jobs[i].fatbin, &size);
        if (!fb) {
            r->say("bundle: cannot read '%s': %s", jobs[i].fatbin, strerror(errno));
            return 1;
        }
        buf_printf(b, "/* %s: %s */\nstatic _Alignas(16) const unsigned char %s_fatbin_%d[%zu] = {\n",
                   jobs[i].plan->symbol, jobs[i].plan->canonical, r->name, i, size);
        emit_bytes(b, fb, size);
        buf_puts(b, "};\n\n");
        free(fb);
    }
    buf_printf(b, "static const fa4_bundle_kernel %s_kernels[%d] = {\n", r->name, n);
    for (int i = 0; i < n; i++) {
        const Plan *p = jobs[i].plan;
        buf_printf(b, "    {0x%016llxull, \"%s\", \"%s\", %s_fatbin_%d, sizeof %s_fatbin_%d},\n",
                   (unsigned long long)p->hash, p->canonical, p->symbol, r->name, i, r->name, i);
    }
    buf_printf(b, "};\n\nconst fa4_bundle fa4_bundle_%s = {sizeof(fa4_bundle), \"%s\", \"%s\", %d, %s_kernels};\n\n"
               "__attribute__((constructor)) static void fa4_bundle_%s_register(void)\n{\n"
               "    (void)fa4_bundle_register(&fa4_bundle_%s);\n}\n",
               r->name, r->name, fa4gen_build_id(), n, r->name, r->name, r->name);
    return b->oom ? 1 : 0;
}

/* ---------------------------------------------------------------- the command */

static void remove_work(const char *dir, const Job *jobs, int n)
{
    for (int i = 0; i < n; i++) {
        unlink(jobs[i].ptx);
        unlink(jobs[i].cubin);
        unlink(jobs[i].fatbin);
        unlink(jobs[i].log);
    }
    rmdir(dir);
}

int aot_bundle(const AotRequest *r, char **c_text, size_t *len)
{
    *c_text = NULL;
    *len = 0;
    Tools t;
    Plan **plans = NULL;
    int n = 0, rc = plan_all(r, &plans, &n);
    if (rc) return rc;
    Job *jobs = calloc((size_t)n, sizeof *jobs);
    const char *tmp = getenv("TMPDIR");
    char dir[AOT_PATH - 128];
    if (!tmp || tmp[0] != '/') tmp = "/tmp";
    snprintf(dir, sizeof dir, "%s/fa4gen-bundle-XXXXXX", tmp);
    if (!jobs) rc = 1;
    else if ((rc = find_tools(r, &t))) {
    } else if (!mkdtemp(dir)) {
        r->say("bundle: cannot create a work folder in %s: %s", tmp, strerror(errno));
        rc = 1;
    }
    int made = !rc;
    char err[512];
    for (int i = 0; i < n && !rc; i++) {
        Job *j = &jobs[i];
        j->plan = plans[i];
        snprintf(j->ptx, sizeof j->ptx, "%s/%s.ptx", dir, plans[i]->symbol);
        snprintf(j->cubin, sizeof j->cubin, "%s/%s.cubin", dir, plans[i]->symbol);
        snprintf(j->fatbin, sizeof j->fatbin, "%s/%s.fatbin", dir, plans[i]->symbol);
        snprintf(j->log, sizeof j->log, "%s/%s.log", dir, plans[i]->symbol);
        char *ptx = NULL;
        size_t plen = 0;
        Config c = plans[i]->cfg;
        if (fa4gen_generate(&c, plans[i], &ptx, &plen, err, sizeof err)) {
            r->say("bundle: generate '%s': %s", plans[i]->canonical, err);
            rc = 1;
        } else if (write_whole(j->ptx, ptx, plen)) {
            r->say("bundle: cannot write '%s': %s", j->ptx, strerror(errno));
            rc = 1;
        }
        free(ptx);
    }
    if (!rc) {
        fprintf(stderr, "fa4gen: bundle: compiling %d kernel%s, %d at a time\n", n, n == 1 ? "" : "s",
                r->jobs > 0 ? r->jobs : 1);
        rc = run_jobs(r, &t, jobs, n);
    }
    Buf b = {0};
    if (!rc) rc = emit_source(r, jobs, n, &b);
    if (!rc) {
        *c_text = b.p;
        *len = b.len;
    } else {
        buf_free(&b);
    }
    if (made) remove_work(dir, jobs, n);
    for (int i = 0; i < n; i++) free(plans[i]);
    free(plans);
    free(jobs);
    return rc;
}
