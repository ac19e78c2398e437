/* jit.c - PTX -> cubin, and cubin -> loaded function.
 *
 * Compilers, in order of preference:
 *   1. the ptxas executable (FA4GEN_PTXAS, $CUDA_HOME/bin, /usr/local/cuda/bin, PATH): a
 *      whole-program compile. Our kernels move registers between warp roles with
 *      setmaxnreg, which ptxas honours only when compiling a whole program; nvJitLink and
 *      the driver's cuLink* compile PTX as relocatable code, where ptxas ignores
 *      setmaxnreg (info C7504) and the consumer warpgroups spill. Measured on an H100:
 *      d128 bn 128 ran at 300 TFLOP/s through nvJitLink against 600+ through ptxas.
 *   2. nvJitLink, 3. the driver's linker: correct, slower kernels, for machines without
 *      the toolkit's ptxas. FA4GEN_NO_PTXAS=1 skips step 1 (tests).
 * ptxas's files live in a private folder made per compile (mkdtemp in $TMPDIR, checked
 * 0700 and ours) and are reached only through its descriptor, so nothing another user
 * plants in $TMPDIR is opened, followed or loaded (compile_ptxas; docs/trust.md). The
 * other two compile in memory.
 *
 * nvJitLink is opened at run time (found as gen/cudalibs.h says: FA4GEN_NVJITLINK,
 * the process, FA4GEN_CUDA_LIB_DIRS, the loader, the toolkit), so it is optional. Without
 * it the driver's linker (cuLink*, which runs the driver's PTX JIT) makes the
 * cubin, so both paths produce bytes the disk cache can keep. Compiler and
 * loader logs end up in the error message. FA4GEN_NO_NVJITLINK=1 forces the
 * driver path (for testing it on a machine that has nvJitLink). Libraries stay
 * mapped after dlclose (RTLD_NODELETE): reloading nvJitLink costs milliseconds
 * per context, and unloading it leaks its C++ runtime's pools.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudalibs.h"
#include "rt_internal.h"

/* ---------------------------------------------------------------- nvJitLink */

typedef struct { const char *names[3]; size_t off; } JlSym;
#define J(a, m) {{"nvJitLink" a, "__nvJitLink" a "_13_0", "__nvJitLink" a "_12_0"}, offsetof(JitLink, m)}
static const JlSym jl_syms[] = {
    J("Create", Create),
    J("Destroy", Destroy),
    J("AddData", AddData),
    J("Complete", Complete),
    J("GetLinkedCubinSize", GetLinkedCubinSize),
    J("GetLinkedCubin", GetLinkedCubin),
    J("GetErrorLogSize", GetErrorLogSize),
    J("GetErrorLog", GetErrorLog),
    {{"nvJitLinkVersion", NULL, NULL}, offsetof(JitLink, Version)},
};
#undef J

static int open_jitlink(fa4_ctx *ctx)
{
    JitLink *j = &ctx->jl;
    const char *off = getenv("FA4GEN_NO_NVJITLINK");
    if (off && off[0] && strcmp(off, "0") != 0) {
        snprintf(ctx->jl_msg, sizeof ctx->jl_msg, "nvJitLink disabled by FA4GEN_NO_NVJITLINK");
        return LIB_FAILED;
    }
    j->lib = cudalib_open(CUDALIB_NVJITLINK, ctx->opt.verbose, NULL, ctx->jl_msg, sizeof ctx->jl_msg);
    if (!j->lib) return LIB_FAILED;
    for (size_t i = 0; i < sizeof jl_syms / sizeof jl_syms[0]; i++) {
        void *fn = NULL;
        for (int k = 0; k < 3 && !fn && jl_syms[i].names[k]; k++) fn = dlsym(j->lib, jl_syms[i].names[k]);
        if (!fn) {
            snprintf(ctx->jl_msg, sizeof ctx->jl_msg, "libnvJitLink has no %s", jl_syms[i].names[0]);
            dlclose(j->lib);
            memset(j, 0, sizeof *j);
            return LIB_FAILED;
        }
        memcpy((char *)j + jl_syms[i].off, &fn, sizeof fn);
    }
    if (j->Version(&j->major, &j->minor) != NVJITLINK_SUCCESS) j->major = j->minor = 0;
    return LIB_READY;
}

int rt_jitlink_available(fa4_ctx *ctx)
{
    pthread_mutex_lock(&ctx->mu);
    if (ctx->jl_state == LIB_UNTRIED) ctx->jl_state = open_jitlink(ctx);
    int ok = ctx->jl_state == LIB_READY;
    pthread_mutex_unlock(&ctx->mu);
    return ok;
}

/* ---------------------------------------------------------------- ptxas */

static int executable(const char *path) { return path && path[0] == '/' && access(path, X_OK) == 0; }

/* Find ptxas once; its id for the cache key is path, size and mtime (a stat, no process). */
static int find_ptxas(fa4_ctx *ctx)
{
    const char *env = getenv("FA4GEN_NO_PTXAS");
    if (env && env[0] == '1') return LIB_FAILED;
    char cand[RT_PATH_MAX];
    const char *home = getenv("CUDA_HOME");
    const char *fixed[3] = {getenv("FA4GEN_PTXAS"), NULL, "/usr/local/cuda/bin/ptxas"};
    char homebin[RT_PATH_MAX];
    if (home && snprintf(homebin, sizeof homebin, "%s/bin/ptxas", home) < (int)sizeof homebin) fixed[1] = homebin;
    const char *found = NULL;
    for (int i = 0; i < 3 && !found; i++)
        if (executable(fixed[i])) found = fixed[i];
    const char *path = getenv("PATH");
    while (!found && path && *path) {
        size_t k = strcspn(path, ":");
        if (k && snprintf(cand, sizeof cand, "%.*s/ptxas", (int)k, path) < (int)sizeof cand && executable(cand))
            found = cand;
        path += k + (path[k] == ':');
    }
    struct stat st;
    if (!found || stat(found, &st) != 0) return LIB_FAILED;
    snprintf(ctx->ptxas_path, sizeof ctx->ptxas_path, "%s", found);
    snprintf(ctx->ptxas_id, sizeof ctx->ptxas_id, "ptxas:%s:%lld:%lld", found, (long long)st.st_size,
             (long long)st.st_mtime);
    return LIB_READY;
}

static int ptxas_available(fa4_ctx *ctx)
{
    pthread_mutex_lock(&ctx->mu);
    if (ctx->ptxas_state == LIB_UNTRIED && (ctx->ptxas_state = find_ptxas(ctx)) == LIB_READY)
        rt_log(ctx, "ptxas: %s", ctx->ptxas_path); /* FA4GEN_LOG: which compiler, as cudalibs.c logs nvJitLink */
    int ok = ctx->ptxas_state == LIB_READY;
    pthread_mutex_unlock(&ctx->mu);
    return ok;
}

/* The ptxas run's files live in one private folder made for the compile (mkdtemp: 0700, a fresh
 * name) in $TMPDIR (absolute) or /tmp, and are reached only through the folder's descriptor: the
 * PTX and the log are created O_EXCL|O_NOFOLLOW, ptxas runs inside the folder (fchdir in the
 * child) with relative names, the cubin is read back O_NOFOLLOW and must be a regular file of
 * ours. No name in the shared folder but the private folder's is ever opened, so nobody else
 * can plant, swap or redirect a file; everything is removed on every path. */
typedef struct {
    char path[RT_PATH_MAX]; /* "" until made */
    int fd;                 /* O_DIRECTORY descriptor, -1 until opened */
} WorkDir;

static const char *const work_files[] = {"kernel.ptx", "kernel.cubin", "ptxas.log"}; /* inside the folder */
enum { WF_PTX, WF_CUBIN, WF_LOG };

static fa4_status work_dir_make(fa4_ctx *ctx, WorkDir *w)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/') tmp = "/tmp";
    w->fd = -1;
    w->path[0] = 0;
    char path[RT_PATH_MAX];
    if (snprintf(path, sizeof path, "%s/fa4gen-%d-XXXXXX", tmp, (int)getpid()) >= (int)sizeof path)
        return rt_fail(ctx, FA4_ERR_COMPILE, "compile: TMPDIR '%s' is too long", tmp);
    if (!mkdtemp(path))
        return rt_fail(ctx, FA4_ERR_COMPILE, "compile: cannot create a private folder in %s: %s", tmp, strerror(errno));
    snprintf(w->path, sizeof w->path, "%s", path);
    w->fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (w->fd < 0 || fstat(w->fd, &st))
        return rt_fail(ctx, FA4_ERR_COMPILE, "compile: cannot open the folder %s: %s", path, strerror(errno));
    /* mkdtemp made it 0700 and ours; the descriptor must name that folder, not a swapped-in one */
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0777) != 0700) {
        fa4_status s = rt_fail(ctx, FA4_ERR_COMPILE, "compile: the folder %s is not private (owner uid %u, mode "
                               "%04o); refusing to compile in it", path, (unsigned)st.st_uid,
                               (unsigned)(st.st_mode & 07777));
        close(w->fd);
        w->fd = -1;
        w->path[0] = 0; /* not ours to remove */
        return s;
    }
    return FA4_OK;
}

/* Remove every file in the folder (ours: nobody else can create one there) and the folder. */
static void work_dir_remove(WorkDir *w)
{
    int list = w->fd >= 0 ? dup(w->fd) : -1;
    DIR *d = list >= 0 ? fdopendir(list) : NULL;
    if (!d && list >= 0) close(list);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(w->fd, e->d_name, 0);
    if (d) closedir(d);
    if (w->fd >= 0) close(w->fd);
    if (w->path[0]) rmdir(w->path);
    w->fd = -1;
    w->path[0] = 0;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

/* A new file of the work folder, created here (never an existing name, never through a link). */
static int work_create(const WorkDir *w, int which, int flags)
{
    return openat(w->fd, work_files[which], flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* The whole file open at fd (malloc'd, NUL-terminated; *n its length), from offset 0. */
static char *read_fd(int fd, size_t *n)
{
    struct stat st;
    if (fstat(fd, &st) || st.st_size < 0) return NULL;
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t k = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    if (buf) buf[got] = 0;
    *n = got;
    return buf;
}

/* Read ptxas's cubin: a regular file owned by us, opened without following a link. */
static fa4_status read_cubin(fa4_ctx *ctx, const WorkDir *w, void **cubin, size_t *size)
{
    int fd = openat(w->fd, work_files[WF_CUBIN], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return rt_fail(ctx, FA4_ERR_COMPILE, "compile: ptxas wrote no cubin in %s: %s", w->path, strerror(errno));
    struct stat st;
    fa4_status s = FA4_OK;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
        s = rt_fail(ctx, FA4_ERR_COMPILE, "compile: %s/%s is not a regular file of this user; not loaded", w->path,
                    work_files[WF_CUBIN]);
    else if (!(*cubin = read_fd(fd, size)))
        s = rt_fail(ctx, FA4_ERR_COMPILE, "compile: cannot read %s/%s", w->path, work_files[WF_CUBIN]);
    close(fd);
    return s;
}

/* Run ptxas in folder w on kernel.ptx, its stdout and stderr into log_fd; 0, or the failure recorded. */
static fa4_status run_ptxas(fa4_ctx *ctx, const Plan *p, const WorkDir *w, int log_fd)
{
    char arch[32];
    snprintf(arch, sizeof arch, "-arch=%s", p->target->ptx_target);
    char *argv[] = {ctx->ptxas_path, arch, "-O3", (char *)work_files[WF_PTX], "-o", (char *)work_files[WF_CUBIN],
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addfchdir_np(&fa, w->fd); /* relative names resolve in the private folder */
    posix_spawn_file_actions_adddup2(&fa, log_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
    pid_t pid;
    static char *const no_env[] = {NULL}; /* ptxas needs none, and gets none of ours */
    int st = 0, rc = posix_spawn(&pid, ctx->ptxas_path, &fa, NULL, argv, no_env);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) return rt_fail(ctx, FA4_ERR_COMPILE, "compile: cannot run %s: %s", ctx->ptxas_path, strerror(rc));
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return FA4_OK;
    size_t n = 0;
    char *text = read_fd(log_fd, &n);
    fa4_status s = rt_fail(ctx, FA4_ERR_COMPILE, "compile %s for %s: %s failed:\n%s", p->symbol, p->target->ptx_target,
                           ctx->ptxas_path, text && text[0] ? text : "(no log)");
    free(text);
    return s;
}

static fa4_status compile_ptxas(fa4_ctx *ctx, const Plan *p, const char *ptx, size_t len, void **cubin,
                                size_t *size)
{
    WorkDir w;
    int in = -1, log = -1;
    fa4_status s = work_dir_make(ctx, &w);
    if (!s && (in = work_create(&w, WF_PTX, O_WRONLY)) < 0)
        s = rt_fail(ctx, FA4_ERR_COMPILE, "compile: cannot create %s/%s: %s", w.path, work_files[WF_PTX],
                    strerror(errno));
    if (!s && write_all(in, ptx, len))
        s = rt_fail(ctx, FA4_ERR_COMPILE, "compile: cannot write %s/%s: %s", w.path, work_files[WF_PTX],
                    strerror(errno));
    if (in >= 0) close(in);
    if (!s && (log = work_create(&w, WF_LOG, O_RDWR)) < 0)
        s = rt_fail(ctx, FA4_ERR_COMPILE, "compile: cannot create %s/%s: %s", w.path, work_files[WF_LOG],
                    strerror(errno));
    if (!s) s = run_ptxas(ctx, p, &w, log);
    if (log >= 0) close(log);
    if (!s) s = read_cubin(ctx, &w, cubin, size);
    work_dir_remove(&w);
    return s;
}

/* FA4GEN_COMPILER=driver-ptx: the driver receives PTX (see the top of the file). */
static int ptx_to_driver(void)
{
    const char *v = getenv("FA4GEN_COMPILER");
    return v && !strcmp(v, "driver-ptx");
}

fa4_status rt_compiler_id(fa4_ctx *ctx, char *buf, size_t n)
{
    const char *v = getenv("FA4GEN_COMPILER"); /* another value would silently mean the default */
    if (v && v[0] && strcmp(v, "driver-ptx"))
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "FA4GEN_COMPILER: '%.32s' is not allowed; use driver-ptx (the "
                       "driver JITs the PTX) or leave it unset (ptxas, else nvJitLink, else the driver's linker)", v);
    if (ptx_to_driver()) {
        fa4_status s = rt_driver(ctx);
        if (s) return s;
        snprintf(buf, n, "driver-ptx-%d", ctx->drv.version);
        return FA4_OK;
    }
    if (ptxas_available(ctx)) {
        snprintf(buf, n, "%s", ctx->ptxas_id);
        return FA4_OK;
    }
    if (rt_jitlink_available(ctx)) {
        snprintf(buf, n, "nvjitlink-%u.%u", ctx->jl.major, ctx->jl.minor);
        return FA4_OK;
    }
    fa4_status s = rt_driver(ctx);
    if (s == FA4_OK && !ctx->drv.LinkCreate) s = FA4_ERR_NO_DRIVER;
    if (s)
        return rt_fail(ctx, s == FA4_ERR_NO_DEVICE ? s : FA4_ERR_NO_DRIVER,
                       "compile: no PTX compiler: %s, and the driver JIT is unavailable (%s)", ctx->jl_msg,
                       ctx->drv_msg[0] ? ctx->drv_msg : "the driver has no cuLink*");
    snprintf(buf, n, "driver-%d", ctx->drv.version);
    return FA4_OK;
}

static const char *jl_result_name(nvJitLinkResult r)
{
    static const char *const names[] = {
        "NVJITLINK_SUCCESS", "NVJITLINK_ERROR_UNRECOGNIZED_OPTION", "NVJITLINK_ERROR_MISSING_ARCH",
        "NVJITLINK_ERROR_INVALID_INPUT", "NVJITLINK_ERROR_PTX_COMPILE", "NVJITLINK_ERROR_NVVM_COMPILE",
        "NVJITLINK_ERROR_INTERNAL", "NVJITLINK_ERROR_THREADPOOL", "NVJITLINK_ERROR_UNRECOGNIZED_INPUT",
        "NVJITLINK_ERROR_FINALIZE", "NVJITLINK_ERROR_NULL_INPUT", "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS",
        "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE", "NVJITLINK_ERROR_ARCH_MISMATCH", "NVJITLINK_ERROR_OUTDATED_LIBRARY",
        "NVJITLINK_ERROR_MISSING_FATBIN", "NVJITLINK_ERROR_UNRECOGNIZED_ARCH", "NVJITLINK_ERROR_UNSUPPORTED_ARCH",
        "NVJITLINK_ERROR_LTO_NOT_ENABLED"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "NVJITLINK_ERROR_UNKNOWN";
}

static fa4_status jl_error(fa4_ctx *ctx, nvJitLinkHandle h, const Plan *p, const char *step, nvJitLinkResult r)
{
    size_t n = 0;
    char *log = NULL;
    if (h && ctx->jl.GetErrorLogSize(h, &n) == NVJITLINK_SUCCESS && n > 0 && (log = malloc(n + 1))) {
        if (ctx->jl.GetErrorLog(h, log) != NVJITLINK_SUCCESS) log[0] = 0;
        log[n] = 0;
    }
    fa4_status s = rt_fail(ctx, FA4_ERR_COMPILE, "compile %s for %s: nvJitLink %s: %s\n%s", p->symbol,
                           p->target->ptx_target, step, jl_result_name(r), log ? log : "(no log)");
    free(log);
    return s;
}

/* lib_ptx: a second PTX the kernel's .extern calls resolve to (NULL: none). */
static fa4_status compile_jitlink(fa4_ctx *ctx, const Plan *p, const char *ptx, size_t len, const char *lib_ptx,
                                  void **cubin, size_t *size)
{
    const JitLink *j = &ctx->jl;
    char arch[32];
    snprintf(arch, sizeof arch, "-arch=%s", p->target->ptx_target);
    const char *opts[] = {arch, "-O3"};
    nvJitLinkHandle h = NULL;
    nvJitLinkResult r = j->Create(&h, 2, opts);
    if (r) return jl_error(ctx, h, p, "create", r);
    fa4_status s = FA4_OK;
    if ((r = j->AddData(h, NVJITLINK_INPUT_PTX, ptx, len, p->symbol))) s = jl_error(ctx, h, p, "add PTX", r);
    else if (lib_ptx && (r = j->AddData(h, NVJITLINK_INPUT_PTX, lib_ptx, strlen(lib_ptx), "score_mod")))
        s = jl_error(ctx, h, p, "add the score_mod PTX", r);
    else if ((r = j->Complete(h))) s = jl_error(ctx, h, p, "link", r);
    else if ((r = j->GetLinkedCubinSize(h, size))) s = jl_error(ctx, h, p, "cubin size", r);
    else if (!(*cubin = malloc(*size))) s = rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "compile: out of memory");
    else if ((r = j->GetLinkedCubin(h, *cubin))) {
        free(*cubin);
        *cubin = NULL;
        s = jl_error(ctx, h, p, "cubin", r);
    }
    j->Destroy(&h);
    return s;
}

/* ---------------------------------------------------------------- driver JIT */

enum { JIT_LOG = 8192 };

/* Option arrays that route the driver's error and info logs into buffers. */
typedef struct { CUjit_option opt[4]; void *val[4]; char err[JIT_LOG], info[JIT_LOG]; } JitLogs;

static void jit_logs_init(JitLogs *l)
{
    l->err[0] = l->info[0] = 0;
    l->opt[0] = CU_JIT_ERROR_LOG_BUFFER;
    l->val[0] = l->err;
    l->opt[1] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
    l->val[1] = (void *)(uintptr_t)JIT_LOG;
    l->opt[2] = CU_JIT_INFO_LOG_BUFFER;
    l->val[2] = l->info;
    l->opt[3] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
    l->val[3] = (void *)(uintptr_t)JIT_LOG;
}

/* Make the context current and allocate the log buffers of one driver JIT call. */
static fa4_status jit_begin(fa4_ctx *ctx, int *pushed, JitLogs **l, const char *what)
{
    fa4_status s = rt_ctx_enter(ctx, pushed);
    if (s) return s;
    if (!(*l = malloc(sizeof **l))) {
        rt_ctx_leave(ctx, *pushed);
        return rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    }
    jit_logs_init(*l);
    return FA4_OK;
}

static fa4_status compile_driver(fa4_ctx *ctx, const Plan *p, const char *ptx, size_t len, const char *lib_ptx,
                                 void **cubin, size_t *size)
{
    const Driver *d = &ctx->drv;
    int pushed;
    JitLogs *l;
    fa4_status s = jit_begin(ctx, &pushed, &l, "compile");
    if (s) return s;
    CUlinkState st = NULL;
    const char *step = "cuLinkCreate";
    void *out = NULL;
    CUresult r = d->LinkCreate(4, l->opt, l->val, &st);
    if (!r) {
        step = "cuLinkAddData(PTX)";
        r = d->LinkAddData(st, CU_JIT_INPUT_PTX, (void *)ptx, len, p->symbol, 0, NULL, NULL);
    }
    if (!r && lib_ptx) {
        step = "cuLinkAddData(score_mod PTX)";
        r = d->LinkAddData(st, CU_JIT_INPUT_PTX, (void *)lib_ptx, strlen(lib_ptx) + 1, "score_mod", 0, NULL, NULL);
    }
    if (!r) {
        step = "cuLinkComplete";
        r = d->LinkComplete(st, &out, size);
    }
    if (!r && !(*cubin = malloc(*size))) s = rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "compile: out of memory");
    else if (!r) memcpy(*cubin, out, *size); /* the link state owns out */
    else
        s = rt_fail(ctx, FA4_ERR_COMPILE, "compile %s for %s with the driver JIT (nvJitLink unavailable: %s): %s: "
                    "%s\n%s%s", p->symbol, p->target->ptx_target, ctx->jl_msg, step, rt_cu_name(ctx, r), l->err,
                    l->info);
    if (st) d->LinkDestroy(st);
    free(l);
    rt_ctx_leave(ctx, pushed);
    return s;
}

fa4_status rt_compile(fa4_ctx *ctx, const Plan *p, const char *ptx, size_t len, void **cubin, size_t *size)
{
    *cubin = NULL;
    *size = 0;
    if (ptx_to_driver()) { /* the image is the PTX text, NUL-terminated as cuModuleLoadDataEx reads it */
        if (!(*cubin = malloc(len + 1))) return rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "compile: out of memory");
        memcpy(*cubin, ptx, len);
        ((char *)*cubin)[len] = 0;
        *size = len + 1;
        return FA4_OK;
    }
    if (ptxas_available(ctx)) return compile_ptxas(ctx, p, ptx, len, cubin, size);
    if (rt_jitlink_available(ctx)) return compile_jitlink(ctx, p, ptx, len, NULL, cubin, size);
    /* rt_compiler_id has already opened the driver for the cache key. */
    fa4_status s = rt_driver(ctx);
    if (s) return s;
    if (!ctx->drv.LinkCreate)
        return rt_fail(ctx, FA4_ERR_NO_DRIVER, "compile: nvJitLink unavailable (%s) and the driver has no cuLink*",
                       ctx->jl_msg);
    return compile_driver(ctx, p, ptx, len, NULL, cubin, size);
}

fa4_status rt_compile_linked(fa4_ctx *ctx, const Plan *p, const char *ptx, size_t len, const char *lib_ptx,
                             void **cubin, size_t *size)
{
    *cubin = NULL;
    *size = 0;
    if (ptx_to_driver())
        return rt_fail(ctx, FA4_ERR_UNSUPPORTED, "FA4GEN_SCORE_MOD_LINK=link needs a linker, and FA4GEN_COMPILER="
                       "driver-ptx loads one PTX module; use splice or call");
    if (rt_jitlink_available(ctx)) return compile_jitlink(ctx, p, ptx, len, lib_ptx, cubin, size);
    fa4_status s = rt_driver(ctx);
    if (s) return s;
    if (!ctx->drv.LinkCreate)
        return rt_fail(ctx, FA4_ERR_NO_DRIVER, "compile: FA4GEN_SCORE_MOD_LINK=link needs nvJitLink (%s) or the "
                       "driver's cuLink*", ctx->jl_msg);
    return compile_driver(ctx, p, ptx, len, lib_ptx, cubin, size);
}

/* ---------------------------------------------------------------- load */

fa4_status rt_load(fa4_ctx *ctx, const Plan *p, const void *cubin, CUmodule *m, CUfunction *fn)
{
    const Driver *d = &ctx->drv;
    int pushed;
    JitLogs *l;
    fa4_status s = jit_begin(ctx, &pushed, &l, "load");
    if (s) return s;
    *m = NULL;
    CUresult r = d->ModuleLoadDataEx(m, cubin, 4, l->opt, l->val);
    if (r) {
        s = rt_fail(ctx, FA4_ERR_CUDA, "load %s: cuModuleLoadDataEx failed: %s\n%s%s", p->symbol, rt_cu_name(ctx, r),
                    l->err, l->info);
    } else if ((r = d->ModuleGetFunction(fn, *m, p->symbol))) {
        s = rt_fail(ctx, FA4_ERR_INTERNAL, "load: cuModuleGetFunction('%s') failed: %s", p->symbol,
                    rt_cu_name(ctx, r));
    } else if ((r = d->FuncSetAttribute(*fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)p->smem_launch))) {
        /* Once per function, at load: launches then only name the size. */
        s = rt_fail(ctx, FA4_ERR_UNSUPPORTED, "load %s: this GPU refuses %u bytes of dynamic shared memory: %s",
                    p->symbol, p->smem_launch, rt_cu_name(ctx, r));
    } else if (p->cluster[0] * p->cluster[1] * p->cluster[2] > 8 &&
               (r = d->FuncSetAttribute(*fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1))) {
        /* clusters over the portable 8 CTAs (a 16-CTA cluster split) must be allowed per function */
        s = rt_fail(ctx, FA4_ERR_UNSUPPORTED, "load %s: this GPU refuses clusters of %d CTAs: %s", p->symbol,
                    p->cluster[0] * p->cluster[1] * p->cluster[2], rt_cu_name(ctx, r));
    }
    if (s && *m) {
        d->ModuleUnload(*m);
        *m = NULL;
    }
    free(l);
    rt_ctx_leave(ctx, pushed);
    return s;
}
