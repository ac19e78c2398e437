/* cache.c - the in-memory kernel map and the on-disk cubin cache.
 *
 * Guarantees:
 * - Memory: a lookup hashes the key text, probes, compares the key text and,
 *   for a kernel with a score_mod, the whole source; it never allocates.
 * - Disk, trust (docs/trust.md): the folder is created 0700 (the components we
 *   create); before any entry is read or written the folder is opened
 *   (O_DIRECTORY, so a symlinked cache path still works) and the opened folder
 *   must be owned by this user and not writable by group or others. Entries
 *   are opened relative to that folder's descriptor with O_NOFOLLOW and must
 *   be regular files owned by this user, not writable by group or others.
 *   Anything else is refused: one warning naming the path, its owner and mode
 *   and the fix, then the context caches in memory only; a refused entry is
 *   never loaded.
 * - Disk, format 2: <dir>/<key hex>.cubin holds a header (magic, format, key
 *   hash, key text length, payload length, SHA-256) then the key text, then
 *   the cubin. The SHA-256 covers the header (its digest field zero), the key
 *   text and the payload, so a changed byte anywhere is a miss; it detects
 *   corruption, the ownership checks keep out forgers. The key text names
 *   everything the cubin depends on (canonical config, generator version,
 *   target, PTX ISA, compiler, the score_mod's SHA-256), so two keys whose
 *   64-bit hash (the file name) agrees never share a payload. A corrupt,
 *   truncated or format-1 file is a miss and gets rewritten. Files are written
 *   to an O_EXCL temp file in the same folder, fsync'd and renamed into place,
 *   so a reader sees a whole file or none.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_internal.h"
#include "sha256.h"

static const char file_magic[8] = {'F', 'A', '4', 'C', 'U', 'B', 'I', 'N'};
enum { FILE_FORMAT = 2 };

typedef struct FileHead {
    char magic[8];
    uint32_t format, key_len;
    uint64_t key, payload_len;
    unsigned char digest[SHA256_BYTES]; /* of the whole file with this field zero */
} FileHead;
_Static_assert(sizeof(FileHead) == 64, "FileHead has no padding");

uint64_t rt_fnv1a(const void *data, size_t n, uint64_t h)
{
    const unsigned char *s = data;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

/* ---------------------------------------------------------------- directory */

static void disable_disk(fa4_ctx *ctx, const char *fmt, ...) FA4_PRINTF(2, 3);
static void disable_disk(fa4_ctx *ctx, const char *fmt, ...)
{
    pthread_mutex_lock(&ctx->mu);
    int was_on = ctx->disk_ok;
    ctx->disk_ok = 0;
    pthread_mutex_unlock(&ctx->mu);
    if (!was_on) return; /* one warning per context */
    char msg[2 * RT_PATH_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "fa4: warning: %s; kernels are cached in memory only\n", msg);
}

static int disk_enabled(fa4_ctx *ctx)
{
    pthread_mutex_lock(&ctx->mu);
    int on = ctx->disk_ok;
    pthread_mutex_unlock(&ctx->mu);
    return on;
}

fa4_status rt_cache_resolve_dir(fa4_ctx *ctx)
{
    ctx->disk_ok = 0;
    if (!ctx->opt.disk_cache) return FA4_OK;
    ctx->disk_ok = 1; /* so the first problem below warns */
    if (ctx->cache_dir[0]) return FA4_OK; /* options.cache_dir, checked absolute at create */
    const char *env = getenv("FA4GEN_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (env && env[0]) {
        if (env[0] != '/') {
            disable_disk(ctx, "FA4GEN_CACHE_DIR='%s' is relative (the cache never depends on the working directory)",
                         env);
            return FA4_OK;
        }
        n = snprintf(ctx->cache_dir, sizeof ctx->cache_dir, "%s", env);
    } else if (xdg && xdg[0] == '/') { /* the XDG spec says to ignore a relative value */
        n = snprintf(ctx->cache_dir, sizeof ctx->cache_dir, "%s/fa4gen", xdg);
    } else if (home && home[0] == '/') {
        n = snprintf(ctx->cache_dir, sizeof ctx->cache_dir, "%s/.cache/fa4gen", home);
    } else {
        disable_disk(ctx, "no cache directory: FA4GEN_CACHE_DIR, XDG_CACHE_HOME and HOME are unset or relative");
        return FA4_OK;
    }
    if (n < 0 || (size_t)n >= sizeof ctx->cache_dir - 32) {
        ctx->cache_dir[0] = 0;
        disable_disk(ctx, "the cache directory path is too long");
    }
    return FA4_OK;
}

/* mkdir -p with mode 0700: the cache holds code this process will run. Components that exist
 * keep their owner and mode; only the folder itself is checked (open_dir). */
static int make_dirs(const char *dir)
{
    char path[RT_PATH_MAX];
    snprintf(path, sizeof path, "%s", dir);
    for (char *s = path + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        if (mkdir(path, 0700) && errno != EEXIST) return -1;
        *s = c;
        if (!c) break;
    }
    return 0;
}

/* Why a cache folder or entry with status st cannot be trusted, or NULL: it must be a folder
 * (want_dir) or a regular file, owned by this user and not writable by group or others, as ssh
 * asks of ~/.ssh. Root is held to the same rule: another user's file is theirs to forge. */
static const char *untrusted(const struct stat *st, int want_dir)
{
    if (want_dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
        return want_dir ? "is not a directory" : "is not a regular file";
    if (st->st_uid != geteuid()) return "is owned by another user";
    if (st->st_mode & (S_IWGRP | S_IWOTH)) return "is writable by group or others";
    return NULL;
}

/* One refusal: the warning names the path, what is wrong, its owner and mode, and the fix. */
static void refuse(fa4_ctx *ctx, const char *what, const char *path, const char *why, const struct stat *st,
                   const char *fix)
{
    if (st)
        disable_disk(ctx, "%s '%s' %s (owner uid %u, mode %04o; this process runs as uid %u); not trusted, not "
                     "used: %s", what, path, why, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777),
                     (unsigned)geteuid(), fix);
    else
        disable_disk(ctx, "%s '%s' %s; not trusted, not used: %s", what, path, why, fix);
}

/* The opened cache folder fd checked: 0, or -1 after the one warning (why: what is wrong). */
static int check_dir(fa4_ctx *ctx, int fd, const char **why)
{
    struct stat st;
    if (fstat(fd, &st)) {
        *why = "cannot be examined (fstat failed)";
        disable_disk(ctx, "cannot stat cache directory '%s': %s", ctx->cache_dir, strerror(errno));
        return -1;
    }
    if (!(*why = untrusted(&st, 1))) return 0;
    char fix[RT_PATH_MAX + 128];
    if (st.st_uid != geteuid())
        snprintf(fix, sizeof fix, "use a directory of your own (FA4GEN_CACHE_DIR or fa4_options.cache_dir)");
    else
        snprintf(fix, sizeof fix, "chmod go-w '%s', or use another directory", ctx->cache_dir);
    refuse(ctx, "cache directory", ctx->cache_dir, *why, &st, fix);
    return -1;
}

/* The cache folder, opened and checked; its descriptor, or -1 (ENOENT without create: no
 * folder yet, a plain miss; anything else has turned the disk cache off with one warning).
 * Entries are then reached relative to this descriptor, so the folder checked is the folder used. */
static int open_dir(fa4_ctx *ctx, int create)
{
    if (create && make_dirs(ctx->cache_dir)) {
        disable_disk(ctx, "cannot create cache directory '%s': %s", ctx->cache_dir, strerror(errno));
        return -1;
    }
    int fd = open(ctx->cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT || create)
            disable_disk(ctx, "cannot open cache directory '%s': %s", ctx->cache_dir, strerror(errno));
        return -1;
    }
    const char *why;
    if (check_dir(ctx, fd, &why)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---------------------------------------------------------------- key */

fa4_status rt_cache_key(fa4_ctx *ctx, const Plan *p, const char *user_code, char *text, size_t n, uint64_t *hash)
{
    char compiler[64];
    fa4_status s = rt_compiler_id(ctx, compiler, sizeof compiler);
    if (s) return s;
    int k = snprintf(text, n,
                     "fa4gen cubin key 1\nconfig=%s\ngenerator=%s\ntarget=%s (%s)\nptx_isa=%s\ncompiler=%s\n"
                     "user_code=%s\n",
                     p->canonical, fa4gen_build_id(), p->target->name, p->target->ptx_target, p->target->ptx_version,
                     compiler, user_code);
    if (k < 0 || (size_t)k >= n) return rt_fail(ctx, FA4_ERR_INTERNAL, "cache: key text longer than %zu", n);
    *hash = rt_fnv1a(text, (size_t)k, RT_FNV_SEED);
    return FA4_OK;
}

static void file_name(uint64_t key, char *buf, size_t n)
{
    snprintf(buf, n, "%016llx.cubin", (unsigned long long)key);
}

/* ---------------------------------------------------------------- read */

static int read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The digest a file with header h, key text and payload must carry. */
static void file_digest(const FileHead *h, const char *key_text, const void *payload, unsigned char out[32])
{
    FileHead zero = *h;
    memset(zero.digest, 0, sizeof zero.digest);
    Sha256 s;
    sha256_init(&s);
    sha256_update(&s, &zero, sizeof zero);
    sha256_update(&s, key_text, h->key_len);
    sha256_update(&s, payload, h->payload_len);
    sha256_final(&s, out);
}

/* Why a file is not a valid entry for key, or NULL when it is. */
static const char *check_file(const char *buf, size_t size, const char *key_text, uint64_t key)
{
    FileHead h;
    size_t key_len = strlen(key_text);
    unsigned char want[SHA256_BYTES];
    if (size < sizeof h) return "truncated header";
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, file_magic, sizeof file_magic)) return "bad magic";
    if (h.format != FILE_FORMAT) return "other format version";
    if (h.key != key || h.key_len != key_len) return "other key";
    if (size < sizeof h + key_len || memcmp(buf + sizeof h, key_text, key_len)) return "other key text";
    if (h.payload_len != size - sizeof h - key_len) return "truncated or extended payload";
    file_digest(&h, key_text, buf + sizeof h + key_len, want);
    if (memcmp(want, h.digest, sizeof want)) return "SHA-256 mismatch";
    return NULL;
}

/* Open entry name in folder dfd for reading and check it; the descriptor, or -1 (a miss, or
 * a refusal that has turned the disk cache off). */
static int open_entry(fa4_ctx *ctx, int dfd, const char *name, struct stat *st)
{
    char path[RT_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%.40s", ctx->cache_dir, name);
    /* O_NOFOLLOW: a symlink is refused, never followed; O_NONBLOCK: a FIFO cannot hang the open. */
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ELOOP) refuse(ctx, "cache file", path, "is a symbolic link", NULL, "remove it");
        else if (errno != ENOENT) rt_log(ctx, "cache file %s: %s; rebuilding it", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, st)) {
        rt_log(ctx, "cache file %s: %s; rebuilding it", path, strerror(errno));
        close(fd);
        return -1;
    }
    const char *why = untrusted(st, 0);
    if (why) {
        refuse(ctx, "cache file", path, why, st, "remove it (fa4gen rebuilds it)");
        close(fd);
        return -1;
    }
    return fd;
}

int rt_disk_get(fa4_ctx *ctx, const char *key_text, uint64_t key, void **cubin, size_t *size)
{
    if (!disk_enabled(ctx)) return 0;
    int dfd = open_dir(ctx, 0);
    if (dfd < 0) return 0;
    char name[64];
    file_name(key, name, sizeof name);
    struct stat st;
    int fd = open_entry(ctx, dfd, name, &st);
    close(dfd);
    if (fd < 0) return 0;
    char *buf = NULL;
    int ok = 0;
    if (st.st_size > 0 && (buf = malloc((size_t)st.st_size)) && read_all(fd, buf, (size_t)st.st_size) == 0) {
        const char *why = check_file(buf, (size_t)st.st_size, key_text, key);
        if (why) {
            rt_log(ctx, "cache file %s/%s is not valid (%s); rebuilding it", ctx->cache_dir, name, why);
        } else {
            size_t off = sizeof(FileHead) + strlen(key_text);
            *size = (size_t)st.st_size - off;
            memmove(buf, buf + off, *size);
            *cubin = buf;
            buf = NULL;
            ok = 1;
        }
    }
    free(buf);
    close(fd);
    return ok;
}

/* ---------------------------------------------------------------- write */

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* A new temp file in folder dfd (its name in tmp); O_EXCL, so nothing at the name is reused. */
static int open_temp(fa4_ctx *ctx, int dfd, uint64_t key, char *tmp, size_t n)
{
    for (int tries = 0; tries < 64; tries++) {
        unsigned c = atomic_fetch_add(&ctx->tmp_counter, 1u);
        snprintf(tmp, n, ".%016llx.%ld.%u.tmp", (unsigned long long)key, (long)getpid(), c);
        int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

static int write_file(int fd, const char *key_text, uint64_t key, const void *cubin, size_t size)
{
    FileHead h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, file_magic, sizeof h.magic);
    h.format = FILE_FORMAT;
    h.key_len = (uint32_t)strlen(key_text);
    h.key = key;
    h.payload_len = size;
    file_digest(&h, key_text, cubin, h.digest);
    if (write_all(fd, &h, sizeof h) || write_all(fd, key_text, h.key_len) || write_all(fd, cubin, size)) return -1;
    return fsync(fd); /* the data is on disk before the name points at it */
}

void rt_disk_put(fa4_ctx *ctx, const char *key_text, uint64_t key, const void *cubin, size_t size)
{
    if (!disk_enabled(ctx)) return;
    int dfd = open_dir(ctx, 1);
    if (dfd < 0) return;
    char tmp[96], name[64];
    file_name(key, name, sizeof name);
    int fd = open_temp(ctx, dfd, key, tmp, sizeof tmp);
    if (fd < 0) {
        disable_disk(ctx, "cannot write to cache directory '%s': %s", ctx->cache_dir, strerror(errno));
        close(dfd);
        return;
    }
    int bad = write_file(fd, key_text, key, cubin, size);
    int err = errno;
    if (close(fd) && !bad) {
        bad = 1;
        err = errno;
    }
    /* rename replaces atomically: racing writers of one key leave one whole file; a node at the
     * name is replaced itself, never followed. */
    if (!bad && renameat(dfd, tmp, dfd, name)) {
        bad = 1;
        err = errno;
    }
    if (bad) {
        unlinkat(dfd, tmp, 0);
        disable_disk(ctx, "cannot write cache file '%s/%s': %s", ctx->cache_dir, name, strerror(err));
    } else {
        fsync(dfd); /* the name, too */
        rt_log(ctx, "wrote %s/%s (%zu bytes)", ctx->cache_dir, name, size);
    }
    close(dfd);
}

/* ---------------------------------------------------------------- memory map */

/* The key text names a score_mod only by its 64-bit FNV (mod=), which can be collided, so an
 * entry with a mod also matches on the whole source: one strcmp, no hashing per call. */
static int same_mod(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

struct fa4_kernel *rt_map_find(const KernelMap *m, const char *key, uint64_t hash, const char *mod_src)
{
    if (!m->cap) return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        struct fa4_kernel *k = m->slot[i].k;
        if (!k) return NULL;
        if (m->slot[i].hash == hash && strcmp(k->key, key) == 0 && same_mod(k->mod_src, mod_src)) return k;
    }
}

static void place(KernelMap *m, struct fa4_kernel *k)
{
    size_t mask = m->cap - 1, i = k->key_hash & mask;
    while (m->slot[i].k) i = (i + 1) & mask;
    m->slot[i].hash = k->key_hash;
    m->slot[i].k = k;
    m->count++;
}

static int grow(KernelMap *m)
{
    KernelMap bigger = {0};
    bigger.cap = m->cap ? m->cap * 2 : 64;
    bigger.slot = calloc(bigger.cap, sizeof *bigger.slot);
    if (!bigger.slot) return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i].k) place(&bigger, m->slot[i].k);
    free(m->slot);
    *m = bigger;
    return 0;
}

struct fa4_kernel *rt_map_insert(KernelMap *m, struct fa4_kernel *k)
{
    struct fa4_kernel *old = rt_map_find(m, k->key, k->key_hash, k->mod_src);
    if (old) return old;
    if ((m->count + 1) * 4 > m->cap * 3 && grow(m)) return NULL; /* keep probes short: load <= 3/4 */
    place(m, k);
    return k;
}

void rt_map_free(fa4_ctx *ctx, KernelMap *m)
{
    int pushed = 0, entered = 0;
    for (size_t i = 0; i < m->cap; i++) {
        struct fa4_kernel *k = m->slot[i].k;
        if (!k) continue;
        if (!entered) entered = rt_ctx_enter(ctx, &pushed) == FA4_OK ? 1 : -1;
        if (entered > 0 && k->module) ctx->drv.ModuleUnload(k->module);
        rt_kernel_free(k);
    }
    if (entered > 0) rt_ctx_leave(ctx, pushed);
    free(m->slot);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- for the cache tools (cache_tool.c) */

int rt_cache_open_checked(fa4_ctx *ctx, const char **why)
{
    int fd = open(ctx->cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        *why = errno == ENOENT ? NULL : strerror(errno);
        return errno == ENOENT ? -2 : -1;
    }
    if (check_dir(ctx, fd, why)) {
        close(fd);
        return -1;
    }
    return fd;
}

const char *rt_cache_untrusted_entry(const struct stat *st) { return untrusted(st, 0); }

const char *rt_cache_inspect(const void *file, size_t size, const char **key_text, size_t *key_len)
{
    FileHead h;
    const char *buf = file;
    unsigned char want[SHA256_BYTES];
    *key_text = NULL, *key_len = 0;
    if (size < sizeof h) return "truncated header";
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, file_magic, sizeof file_magic)) return "not an fa4gen cache file";
    if (h.format != FILE_FORMAT) return "another format version";
    if (h.key_len > size - sizeof h || h.payload_len != size - sizeof h - h.key_len) return "truncated or extended";
    *key_text = buf + sizeof h, *key_len = h.key_len;
    if (h.key != rt_fnv1a(*key_text, h.key_len, RT_FNV_SEED)) return "its key does not hash to its name";
    file_digest(&h, *key_text, buf + sizeof h + h.key_len, want);
    if (memcmp(want, h.digest, sizeof want)) return "SHA-256 mismatch";
    return NULL;
}

void rt_cache_file_name(uint64_t key, char *buf, size_t n) { file_name(key, buf, n); }
