/* cache_tool.c - see, size and empty the disk cache (fa4.h "the kernel cache"; fa4gen cache).
 *
 * Guarantees, the trust rules of cache.c (docs/trust.md): the folder is opened once and checked (this
 * user's, not writable by group or others; else cache.c's one warning and FA4_ERR_CACHE); every entry is
 * reached relative to that descriptor, examined with fstatat(AT_SYMLINK_NOFOLLOW) and opened O_NOFOLLOW |
 * O_NONBLOCK, so no symlink is followed and no FIFO blocks; only regular files of this user whose names
 * are an entry's (<16 hex>.cubin) or a writer's temporary file (.<16 hex>.<pid>.<n>.tmp) are read or
 * removed, and a temporary file only once it is older than TEMP_AGE_S (its writer died). Nothing else in
 * the folder is touched.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rt_internal.h"

enum { TEMP_AGE_S = 600, ENTRY_MAX_BYTES = 1 << 30 };

typedef struct {
    char name[64];
    uint64_t bytes;
    int64_t mtime, atime;
    int temp; /* a writer's temporary file */
} Item;

typedef struct {
    Item *v;
    int n, cap;
} Items;

static int is_hex16(const char *s)
{
    for (int i = 0; i < 16; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* 1: an entry's name, 2: a writer's temporary file's name (cache.c open_temp), 0: neither. */
static int our_name(const char *n)
{
    size_t len = strlen(n);
    if (len == 22 && is_hex16(n) && !strcmp(n + 16, ".cubin")) return 1;
    if (len < 24 || n[0] != '.' || !is_hex16(n + 1) || n[17] != '.' || strcmp(n + len - 4, ".tmp")) return 0;
    for (const char *c = n + 18; c < n + len - 4; c++)
        if (!(*c == '.' || (*c >= '0' && *c <= '9'))) return 0;
    return 2;
}

static int64_t last_use(const Item *it) { return it->atime > it->mtime ? it->atime : it->mtime; }

static int newer_first(const void *a, const void *b)
{
    int64_t x = last_use(a), y = last_use(b);
    return x < y ? 1 : x > y ? -1 : strcmp(((const Item *)a)->name, ((const Item *)b)->name);
}

/* The context's folder; FA4_ERR_CACHE when it has none. */
static fa4_status need_dir(fa4_ctx *ctx)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    if (!ctx->opt.disk_cache) return rt_fail(ctx, FA4_ERR_CACHE, "cache: this context has no disk cache (fa4_options.disk_cache = 0)");
    if (!ctx->cache_dir[0])
        return rt_fail(ctx, FA4_ERR_CACHE, "cache: no cache directory (FA4GEN_CACHE_DIR, XDG_CACHE_HOME and HOME are "
                       "unset, relative or too long)");
    return FA4_OK;
}

/* The folder opened and checked (*dfd -1: it does not exist yet, so it holds nothing). */
static fa4_status open_folder(fa4_ctx *ctx, int *dfd)
{
    fa4_status s = need_dir(ctx);
    if (s) return s;
    const char *why = NULL;
    *dfd = rt_cache_open_checked(ctx, &why);
    if (*dfd == -2) *dfd = -1;
    else if (*dfd < 0)
        return rt_fail(ctx, FA4_ERR_CACHE, "cache directory '%s' %s; not trusted: nothing was read or removed",
                       ctx->cache_dir, why ? why : "cannot be opened");
    return FA4_OK;
}

/* Our regular files in the folder (entries, and temporary files), by fstatat without following links. */
static fa4_status scan(fa4_ctx *ctx, int dfd, Items *out)
{
    memset(out, 0, sizeof *out);
    int fd = dup(dfd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0) close(fd);
        return rt_fail(ctx, FA4_ERR_CACHE, "cache directory '%s': cannot list it: %s", ctx->cache_dir, strerror(errno));
    }
    for (struct dirent *e; (e = readdir(d));) {
        int kind = our_name(e->d_name);
        struct stat st;
        if (!kind || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue; /* not ours: never read, never removed */
        if (out->n == out->cap) {
            int cap = out->cap ? 2 * out->cap : 64;
            Item *v = realloc(out->v, (size_t)cap * sizeof *v);
            if (!v) {
                closedir(d);
                free(out->v);
                return rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "cache: out of memory");
            }
            out->v = v, out->cap = cap;
        }
        Item *it = &out->v[out->n++];
        snprintf(it->name, sizeof it->name, "%s", e->d_name);
        it->bytes = (uint64_t)st.st_size, it->mtime = st.st_mtime, it->atime = st.st_atime, it->temp = kind == 2;
    }
    closedir(d);
    qsort(out->v, (size_t)out->n, sizeof *out->v, newer_first);
    return FA4_OK;
}

/* "config=..." and "generator=..." of a key text (not terminated) into buffers. */
static void key_field(const char *key, size_t len, const char *field, char *out, size_t n)
{
    size_t f = strlen(field);
    out[0] = 0;
    for (size_t i = 0; i < len;) {
        size_t end = i;
        while (end < len && key[end] != '\n') end++;
        if (end - i > f && !memcmp(key + i, field, f)) {
            size_t k = end - i - f < n - 1 ? end - i - f : n - 1;
            memcpy(out, key + i + f, k);
            out[k] = 0;
            return;
        }
        i = end + 1;
    }
}

/* An entry's file read whole (O_NOFOLLOW | O_NONBLOCK, checked again after the open) and inspected. */
static void describe(int dfd, const Item *it, fa4_cache_entry *e, char *config, size_t nc, char *gen,
                     size_t ng)
{
    config[0] = gen[0] = 0;
    e->problem = "cannot be read";
    /* O_NOATIME: reading an entry to list it is not a use (prune goes by last use); the kernel allows it
     * on this user's files only, which are the only ones read */
    int fd = openat(dfd, it->name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = openat(dfd, it->name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    struct stat st;
    char *buf = NULL;
    if (fd < 0 || fstat(fd, &st) || rt_cache_untrusted_entry(&st)) {
        if (fd >= 0) e->problem = "writable by group or others, or not a regular file: the runtime refuses it";
    } else if (st.st_size > ENTRY_MAX_BYTES || !(buf = malloc((size_t)st.st_size + 1))) {
        e->problem = "too large to read";
    } else {
        size_t got = 0;
        ssize_t k = 1;
        while (got < (size_t)st.st_size && (k = read(fd, buf + got, (size_t)st.st_size - got)) != 0) {
            if (k < 0 && errno == EINTR) continue;
            if (k < 0) break;
            got += (size_t)k;
        }
        const char *key = NULL;
        size_t key_len = 0;
        e->problem = k < 0 ? "cannot be read" : rt_cache_inspect(buf, got, &key, &key_len);
        if (key && !e->problem) {
            key_field(key, key_len, "config=", config, nc);
            key_field(key, key_len, "generator=", gen, ng);
        }
    }
    free(buf);
    if (fd >= 0) close(fd);
    e->this_build = !e->problem && !strcmp(gen, fa4gen_build_id());
}

fa4_status fa4_cache_dir(fa4_ctx *ctx, char *buf, size_t n)
{
    fa4_status s = need_dir(ctx);
    if (s) return s;
    if (!buf || !n) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "buf: NULL or n == 0");
    if (strlen(ctx->cache_dir) >= n)
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "n: %zu is too small for the path (%zu bytes)", n,
                       strlen(ctx->cache_dir) + 1);
    strcpy(buf, ctx->cache_dir);
    return FA4_OK;
}

fa4_status fa4_cache_list(fa4_ctx *ctx, fa4_cache_fn fn, void *user)
{
    int dfd;
    fa4_status s = open_folder(ctx, &dfd);
    if (s) return s;
    if (!fn) s = rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "fn: NULL");
    if (s || dfd < 0) {
        if (dfd >= 0) close(dfd);
        return s;
    }
    Items items;
    if ((s = scan(ctx, dfd, &items))) {
        close(dfd);
        return s;
    }
    char config[RT_KEY_TEXT_MAX], gen[128];
    for (int i = 0; i < items.n; i++) {
        if (items.v[i].temp) continue;
        fa4_cache_entry e = {sizeof e, items.v[i].name, config, gen, NULL, 0, items.v[i].bytes, items.v[i].mtime,
                             items.v[i].atime};
        describe(dfd, &items.v[i], &e, config, sizeof config, gen, sizeof gen);
        if (fn(user, &e)) break;
    }
    free(items.v);
    close(dfd);
    return FA4_OK;
}

/* Removes items[i] for every i with drop[i]; the count and bytes of the entries that went (temporary
 * files are not counted). A file that vanished meanwhile (another process removed it) counts as gone. */
static void remove_items(int dfd, const Items *items, const unsigned char *drop, int *removed, uint64_t *bytes)
{
    int n = 0;
    uint64_t b = 0;
    for (int i = 0; i < items->n; i++) {
        if (!drop[i]) continue;
        if ((unlinkat(dfd, items->v[i].name, 0) == 0 || errno == ENOENT) && !items->v[i].temp)
            n++, b += items->v[i].bytes;
    }
    if (removed) *removed = n;
    if (bytes) *bytes = b;
}

/* Removes every entry (all), or the least recently used until the rest take at most keep bytes; and
 * every temporary file whose writer died. */
static fa4_status drop_and_remove(fa4_ctx *ctx, int all, uint64_t keep, int *removed, uint64_t *bytes)
{
    int dfd;
    if (removed) *removed = 0;
    if (bytes) *bytes = 0;
    fa4_status s = open_folder(ctx, &dfd);
    if (s || dfd < 0) return s;
    Items items;
    if ((s = scan(ctx, dfd, &items))) {
        close(dfd);
        return s;
    }
    unsigned char *drop = calloc((size_t)items.n + 1, 1);
    if (!drop) {
        free(items.v);
        close(dfd);
        return rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "cache: out of memory");
    }
    int64_t now = (int64_t)time(NULL);
    uint64_t total = 0;
    for (int i = 0; i < items.n; i++) {
        if (items.v[i].temp) drop[i] = now - items.v[i].mtime > TEMP_AGE_S;
        else total += items.v[i].bytes;
    }
    for (int i = items.n - 1; i >= 0; i--) /* items are newest first: walk from the oldest */
        if (!items.v[i].temp && (all || total > keep)) drop[i] = 1, total -= items.v[i].bytes;
    remove_items(dfd, &items, drop, removed, bytes);
    free(drop);
    free(items.v);
    close(dfd);
    return FA4_OK;
}

fa4_status fa4_cache_clear(fa4_ctx *ctx, int *removed, uint64_t *bytes)
{
    return drop_and_remove(ctx, 1, 0, removed, bytes);
}

fa4_status fa4_cache_prune(fa4_ctx *ctx, uint64_t max_bytes, int *removed, uint64_t *bytes)
{
    return drop_and_remove(ctx, 0, max_bytes, removed, bytes);
}
