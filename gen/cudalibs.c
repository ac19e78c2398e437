/* cudalibs.c - finding NVRTC and nvJitLink at run time (cudalibs.h has the order and why).
 *
 * Guarantees: only absolute paths and bare sonames reach dlopen, so nothing is looked up
 * relative to the working directory; an explicit override that does not load is an error
 * naming it; a miss names every step tried and every candidate that existed but did not load.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudalibs.h"
#include "fa4gen.h"

enum { OPEN_FLAGS = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE, N_SONAMES = 3, TRAIL = 900 };

typedef struct { const char *name, *env, *sonames[N_SONAMES]; } LibInfo;
static const LibInfo libs[CUDALIB_COUNT] = {
    [CUDALIB_NVRTC] = {"NVRTC", "FA4GEN_NVRTC", {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}},
    [CUDALIB_NVJITLINK] = {"nvJitLink", "FA4GEN_NVJITLINK",
                           {"libnvJitLink.so.13", "libnvJitLink.so.12", "libnvJitLink.so"}},
};

/* The one piece of process state: a hash of the file each library was last logged with, so
 * FA4GEN_LOG names a library once, not on every open (NVRTC is opened per score_mod compile). */
static _Atomic uint64_t logged[CUDALIB_COUNT];

const char *cudalib_name(CudaLib which) { return (unsigned)which < CUDALIB_COUNT ? libs[which].name : "?"; }

/* A search in progress: what it looks for, and the trail of what it tried (for the error). */
typedef struct {
    const LibInfo *lib;
    char path[1024];
    const char *source;
    char trail[TRAIL];
    size_t n;
} Search;

static void trail(Search *s, const char *fmt, ...) FA4_PRINTF(2, 3);
static void trail(Search *s, const char *fmt, ...)
{
    if (s->n >= sizeof s->trail - 1) return;
    if (s->n) s->n += (size_t)snprintf(s->trail + s->n, sizeof s->trail - s->n, ", ");
    if (s->n >= sizeof s->trail - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(s->trail + s->n, sizeof s->trail - s->n, fmt, ap);
    va_end(ap);
    s->n = k < 0 ? s->n : s->n + (size_t)k;
    if (s->n >= sizeof s->trail) s->n = sizeof s->trail - 1;
}

/* The loader's name for a handle (a full path for everything but the main program). */
static void handle_path(void *h, const char *fallback, char *out, size_t n)
{
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
        snprintf(out, n, "%s", lm->l_name);
    else
        snprintf(out, n, "%s", fallback);
}

static void *take(Search *s, void *h, const char *name, const char *source)
{
    if (h) {
        handle_path(h, name, s->path, sizeof s->path);
        s->source = source;
    }
    return h;
}

/* Each soname in one absolute directory; a file that exists but does not load goes on the trail. */
static void *in_dir(Search *s, const char *dir, size_t len, const char *source)
{
    if (!len || dir[0] != '/') {
        if (len) trail(s, "%.*s (not an absolute path: skipped)", (int)len, dir);
        return NULL;
    }
    for (int i = 0; i < N_SONAMES; i++) {
        char path[1024];
        if (snprintf(path, sizeof path, "%.*s/%s", (int)len, dir, s->lib->sonames[i]) >= (int)sizeof path) continue;
        if (access(path, F_OK) != 0) continue;
        void *h = dlopen(path, OPEN_FLAGS);
        if (h) return take(s, h, path, source);
        const char *e = dlerror();
        trail(s, "%s did not load (%s)", path, e ? e : "no reason given");
    }
    return NULL;
}

static void *search(Search *s, const char *override, char *err, size_t en)
{
    const LibInfo *L = s->lib;
    if (override && override[0]) { /* explicit: the only candidate */
        if (override[0] != '/') {
            snprintf(err, en, "%s=%s: not an absolute path (the path of the %s library file)", L->env, override,
                     L->name);
            return NULL;
        }
        void *h = dlopen(override, OPEN_FLAGS);
        if (!h) {
            const char *e = dlerror();
            snprintf(err, en, "%s=%s: the file does not load (%s); unset it to search the usual places", L->env,
                     override, e ? e : "no reason given");
        }
        return take(s, h, override, L->env);
    }
    for (int i = 0; i < N_SONAMES; i++) {
        void *h = dlopen(L->sonames[i], OPEN_FLAGS | RTLD_NOLOAD);
        if (h) return take(s, h, L->sonames[i], "already loaded");
    }
    const char *dirs = getenv("FA4GEN_CUDA_LIB_DIRS");
    for (const char *d = dirs; d && *d;) {
        size_t k = strcspn(d, ":");
        void *h = in_dir(s, d, k, "FA4GEN_CUDA_LIB_DIRS");
        if (h) return h;
        d += k + (d[k] == ':');
    }
    for (int i = 0; i < N_SONAMES; i++) {
        void *h = dlopen(L->sonames[i], OPEN_FLAGS);
        if (h) return take(s, h, L->sonames[i], "the loader's path");
    }
    const char *home = getenv("CUDA_HOME");
    char lib64[1024];
    if (home && home[0] && snprintf(lib64, sizeof lib64, "%s/lib64", home) < (int)sizeof lib64) {
        void *h = in_dir(s, lib64, strlen(lib64), "$CUDA_HOME");
        if (h) return h;
    }
    void *h = in_dir(s, "/usr/local/cuda/lib64", strlen("/usr/local/cuda/lib64"), "/usr/local/cuda");
    if (h) return h;
    snprintf(err, en, "%s (%s, %s or %s) was not found: looked in the process, FA4GEN_CUDA_LIB_DIRS (%s), the "
             "loader's path, $CUDA_HOME/lib64 (%s) and /usr/local/cuda/lib64%s%s%s; %s=/path/to/%s picks a file",
             L->name, L->sonames[0], strrchr(L->sonames[1], '.'), L->sonames[2], dirs && dirs[0] ? dirs : "unset",
             home && home[0] ? home : "CUDA_HOME unset", s->n ? " (" : "", s->trail, s->n ? ")" : "", L->env,
             L->sonames[0]);
    return NULL;
}

static uint64_t fnv(const char *t)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)t; *c; c++) h = (h ^ *c) * 0x100000001b3ull;
    return h | 1; /* never 0, the "not logged yet" value */
}

void *cudalib_open(CudaLib which, int verbose, CudaLibFound *found, char *err, size_t en)
{
    if ((unsigned)which >= CUDALIB_COUNT) {
        snprintf(err, en, "cudalib_open: no library %d", (int)which);
        return NULL;
    }
    Search s = {.lib = &libs[which]};
    void *h = search(&s, getenv(libs[which].env), err, en);
    if (!h) return NULL;
    if (found) {
        snprintf(found->path, sizeof found->path, "%s", s.path);
        found->source = s.source;
    }
    const char *log = getenv("FA4GEN_LOG");
    if ((verbose || (log && log[0] && strcmp(log, "0"))) &&
        atomic_exchange(&logged[which], fnv(s.path)) != fnv(s.path))
        fprintf(stderr, "fa4: %s: %s (found by %s)\n", libs[which].name, s.path, s.source);
    return h;
}
