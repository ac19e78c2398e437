/* fuzz_cache.c - the disk-cache file reader (runtime/cache.c): the input becomes the cache file
 * (or the node at its path) of one kernel, then fa4_get_kernel runs on a fresh context.
 *
 * Input: byte 0 picks how the file is made, byte 1 the config, the rest is the data:
 *   0 raw      the data is the file
 *   1 framed   a header with the right magic, format and key, then the key text, then the data
 *              (its first 40 bytes are the header's payload length and SHA-256)
 *   2 sealed   a whole valid file whose payload is the data (length and SHA-256 right)
 *   3 edited   the valid file of the real cubin with the data's edits: (offset, xor) pairs,
 *              then a cut at an offset the data gives
 *   4 node     a directory, FIFO, symlink (to /dev/zero, a valid file, nowhere, itself), empty file
 *   5 perm     the valid file of the real cubin with group/other bits from the data and, as
 *              root, another owner (uid 65534)
 *
 * Properties (an independent reader of the format and of the trust rules decides):
 *   - every module load sees exactly the payload of a valid, trusted file, or the cubin just rebuilt;
 *   - a valid trusted file is a disk hit (or, when the fake loader refuses its payload, a clean error);
 *   - an untrusted node (not a regular file, a symlink, another owner's, group/other-writable) is
 *     refused: status OK, source 2, the disk cache turned off, the node left as it was;
 *   - anything else is a miss: status OK, source 2, and the path then holds a valid file of the
 *     rebuilt cubin;
 *   - nothing hangs (a FIFO), nothing crashes, no temporary file is left. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_rt.h"
#include "sha256.h"

static const char *const configs[] = {"mha qk=64 ov=64 mask=causal", "mha dtype=fp16 qk=128 ov=128",
                                      "mha qk=64 ov=64 mask=window:64,0 bm=192"};
enum { N_CONFIGS = sizeof configs / sizeof configs[0], HEAD = 64, FORMAT = 2, NOBODY = 65534 };

typedef struct {
    Plan plan;
    char key_text[RT_KEY_TEXT_MAX];
    uint64_t key;
    void *cubin; /* the stand-in compiler's bytes */
    size_t cubin_size;
} Known;

static Known known[N_CONFIGS];
static char dir[] = "/dev/shm/fa4fuzzcache.XXXXXX";
static char path[N_CONFIGS][sizeof dir + 32];
static int ready;

/* The load hook: what every cuModuleLoadDataEx must see. */
static const void *want_image;
static size_t want_size;
static int loads;
static CUresult (*real_load)(CUmodule *, const void *, unsigned int, CUjit_option *, void **);

static CUresult hook_load(CUmodule *m, const void *image, unsigned int n, CUjit_option *opt, void **val)
{
    FUZZ_CHECK(want_image != NULL, "a module load when the harness expected none");
    FUZZ_CHECK(memcmp(image, want_image, want_size) == 0, "a module load saw bytes other than the verified payload "
               "or the rebuilt cubin (%zu bytes expected)", want_size);
    loads++;
    return real_load(m, image, n, opt, val);
}

static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* The SHA-256 a file of n bytes must carry: of the file with its digest field (bytes 32..63) zero. */
static void file_digest(const unsigned char *file, size_t n, unsigned char out[32])
{
    static const unsigned char zero[32];
    Sha256 s;
    sha256_init(&s);
    sha256_update(&s, file, 32);
    sha256_update(&s, zero, 32);
    sha256_update(&s, file + HEAD, n - HEAD);
    sha256_final(&s, out);
}

/* A file's header and key text (HEAD + key bytes, malloc'd, extra bytes of room after) for
 * payload_len, the digest left zero. */
static unsigned char *head(const Known *k, uint64_t len, size_t extra, size_t *n)
{
    size_t key_len = strlen(k->key_text);
    *n = HEAD + key_len;
    unsigned char *b = calloc(1, *n + extra + 1);
    if (!b) abort();
    memcpy(b, "FA4CUBIN", 8);
    put32(b + 8, FORMAT);
    put32(b + 12, (uint32_t)key_len);
    put64(b + 16, k->key);
    put64(b + 24, len);
    memcpy(b + HEAD, k->key_text, key_len);
    return b;
}

/* A whole valid file of payload d (malloc'd). */
static unsigned char *sealed(const Known *k, const void *d, size_t n, size_t *total)
{
    size_t hn;
    unsigned char *b = head(k, n, n, &hn);
    memcpy(b + hn, d, n);
    *total = hn + n;
    file_digest(b, *total, b + 32);
    return b;
}

/* The payload of buf when it is a valid file for k (the format in cache.c's comment), else NULL. */
static const unsigned char *valid_payload(const Known *k, const unsigned char *buf, size_t size, size_t *len)
{
    size_t key_len = strlen(k->key_text);
    unsigned char want[32];
    if (size < HEAD + key_len || memcmp(buf, "FA4CUBIN", 8) || get32(buf + 8) != FORMAT ||
        get32(buf + 12) != key_len || get64(buf + 16) != k->key || memcmp(buf + HEAD, k->key_text, key_len))
        return NULL;
    uint64_t n = get64(buf + 24);
    if (n != size - HEAD - key_len) return NULL;
    file_digest(buf, size, want);
    if (memcmp(want, buf + 32, 32)) return NULL;
    *len = n;
    return buf + HEAD + key_len;
}

/* The trust rule for an entry (docs/trust.md): a regular file itself (not through a link), this
 * user's, not writable by group or others. */
static int trusted(const struct stat *st)
{
    return S_ISREG(st->st_mode) && st->st_uid == geteuid() && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

static void write_file(const char *p, const void *data, size_t n)
{
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || (n && write(fd, data, n) != (ssize_t)n) || close(fd)) abort();
}

/* The path's node as bytes when it is a regular file (never through a symlink), or NULL. */
static unsigned char *read_node(const char *p, size_t *n)
{
    struct stat st;
    if (lstat(p, &st) || !S_ISREG(st.st_mode)) return NULL;
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    unsigned char *b = malloc((size_t)st.st_size + 1);
    *n = b ? fread(b, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    return b;
}

static void remove_node(const char *p)
{
    if (unlink(p)) rmdir(p); /* a directory */
}

static void cleanup(void)
{
    for (int i = 0; i < N_CONFIGS; i++) {
        char other[sizeof path[0] + 8];
        snprintf(other, sizeof other, "%s.real", path[i]);
        remove_node(path[i]);
        unlink(other);
    }
    rmdir(dir);
}

static void setup(void)
{
    fz_fake_open();
    fz_fake_device(90);
    if (!mkdtemp(dir)) abort();
    fa4_ctx *ctx = fz_ctx(FA4_TARGET_SM90A, dir);
    for (int i = 0; i < N_CONFIGS; i++) {
        Known *k = &known[i];
        Config c;
        char err[256];
        config_init(&c);
        c.target = TARGET_SM90A;
        FUZZ_CHECK(!config_apply_text(&c, configs[i], err, sizeof err) && !plan_make(&c, &k->plan, err, sizeof err),
                   "%s: %s", configs[i], err);
        FUZZ_CHECK(!rt_cache_key(ctx, &k->plan, "none", k->key_text, sizeof k->key_text, &k->key), "key: %s",
                   fa4_last_error(ctx));
        k->cubin = fz_cubin(&k->plan, &k->cubin_size);
        snprintf(path[i], sizeof path[i], "%s/%016llx.cubin", dir, (unsigned long long)k->key);
    }
    fa4_destroy(ctx);
    atexit(cleanup);
    ready = 1;
}

/* Makes the node at k's path p from mode and data. */
static void make_node(int mode, const Known *k, const char *p, const unsigned char *d, size_t n)
{
    size_t hn, total;
    unsigned char *b = NULL;
    switch (mode) {
    case 0:
        write_file(p, d, n);
        break;
    case 1: {
        uint64_t len = n >= 8 ? get64(d) : n;
        size_t skip = n >= 40 ? 40 : n;
        b = head(k, len, n - skip, &hn);
        if (n >= 40) memcpy(b + 32, d + 8, 32);
        memcpy(b + hn, d + skip, n - skip);
        write_file(p, b, hn + n - skip);
        break;
    }
    case 2:
        b = sealed(k, d, n, &total);
        write_file(p, b, total);
        break;
    case 3: {
        b = sealed(k, k->cubin, k->cubin_size, &total);
        size_t i = 0;
        for (; i + 3 <= n && d[i] != 0xff; i += 3) b[((size_t)d[i] << 8 | d[i + 1]) % total] ^= d[i + 2];
        if (i + 3 <= n) total = ((size_t)d[i + 1] << 8 | d[i + 2]) % (total + 1); /* 0xff: a cut */
        write_file(p, b, total);
        break;
    }
    case 4: {
        char other[sizeof path[0] + 8];
        snprintf(other, sizeof other, "%s.real", p);
        switch (n ? d[0] % 8 : 0) {
        case 0: if (mkdir(p, 0700)) abort(); break;
        case 1: if (mkfifo(p, 0600)) abort(); break;
        case 2: if (symlink("/dev/zero", p)) abort(); break;
        case 3: /* a symlink to a valid file of ours: refused all the same, never followed */
            b = sealed(k, k->cubin, k->cubin_size, &total);
            write_file(other, b, total);
            if (symlink(other, p)) abort();
            break;
        case 4: if (symlink("/nonexistent/fa4", p)) abort(); break;
        case 5: if (symlink(p, p)) abort(); break;
        case 6: write_file(p, "", 0); break;
        default: if (symlink("/dev/null", p)) abort(); break;
        }
        break;
    }
    default: /* a valid file of the real cubin, its permissions from the data */
        b = sealed(k, k->cubin, k->cubin_size, &total);
        write_file(p, b, total);
        if (chmod(p, 0600 | (n ? d[0] & 066 : 0))) abort();
        if (n > 1 && (d[1] & 1) && geteuid() == 0 && chown(p, NOBODY, NOBODY)) abort();
        break;
    }
    free(b);
}

/* Names in the cache folder other than .cubin files and the harness's .real targets. */
static int strays(void)
{
    DIR *dd = opendir(dir);
    int count = 0;
    for (struct dirent *e; dd && (e = readdir(dd));) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' && (len <= 2 && (len == 1 || e->d_name[1] == '.'))) continue;
        if (len > 6 && !strcmp(e->d_name + len - 6, ".cubin")) continue;
        if (len > 5 && !strcmp(e->d_name + len - 5, ".real")) continue;
        fprintf(stderr, "fuzz_cache: stray '%s'\n", e->d_name);
        count++;
    }
    if (dd) closedir(dd);
    return count;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (!ready) setup();
    if (size < 2 || size > 65536) return 0;
    int mode = data[0] % 6;
    const Known *k = &known[data[1] % N_CONFIGS];
    const char *p = path[data[1] % N_CONFIGS];
    char other[sizeof path[0] + 8];
    snprintf(other, sizeof other, "%s.real", p);
    remove_node(p);
    unlink(other);
    make_node(mode, k, p, data + 2, size - 2);

    struct stat node;
    FUZZ_CHECK(lstat(p, &node) == 0, "the harness made no node");
    int trust = trusted(&node);
    size_t file_n = 0, pay_n = 0;
    unsigned char *file = trust ? read_node(p, &file_n) : NULL;
    const unsigned char *pay = file ? valid_payload(k, file, file_n, &pay_n) : NULL;
    want_image = pay ? (const void *)pay : k->cubin;
    want_size = pay ? pay_n : k->cubin_size;
    loads = 0;

    fa4_ctx *ctx = fz_ctx(FA4_TARGET_SM90A, dir);
    real_load = ctx->drv.ModuleLoadDataEx;
    ctx->drv.ModuleLoadDataEx = hook_load;
    fa4_kernel *kern = NULL;
    fa4_kernel_stats st = {0};
    fa4_status s = fa4_get_kernel(ctx, configs[data[1] % N_CONFIGS], &kern, &st);
    const char *msg = fa4_last_error(ctx);
    int disk_on = ctx->disk_ok;
    if (pay) {
        FUZZ_CHECK(s == FA4_OK ? st.source == 1 && loads == 1 : s == FA4_ERR_CUDA && msg[0] && !kern,
                   "a valid file: status %d, source %d, %d loads: %s", s, st.source, loads, msg);
    } else {
        FUZZ_CHECK(s == FA4_OK && st.source == 2 && loads == 1 && kern, "an invalid or untrusted file (mode %d): "
                   "status %d, source %d, %d loads: %s", mode, s, st.source, loads, msg);
        struct stat now;
        if (!trust) {
            FUZZ_CHECK(!disk_on, "an untrusted node (mode %d, type %o, uid %u, mode %o) did not turn the disk cache "
                       "off", mode, (unsigned)(node.st_mode & S_IFMT), (unsigned)node.st_uid,
                       (unsigned)(node.st_mode & 07777));
            FUZZ_CHECK(lstat(p, &now) == 0 && now.st_ino == node.st_ino && now.st_mode == node.st_mode,
                       "an untrusted node was replaced (mode %d)", mode);
        } else {
            size_t again_n = 0, got_n = 0;
            unsigned char *again = read_node(p, &again_n);
            const unsigned char *got = again ? valid_payload(k, again, again_n, &got_n) : NULL;
            FUZZ_CHECK(disk_on && got && got_n == k->cubin_size && !memcmp(got, k->cubin, got_n),
                       "after a miss the path holds no valid file of the rebuilt cubin (mode %d)", mode);
            free(again);
        }
    }
    fa4_destroy(ctx);
    free(file);
    want_image = NULL;
    FUZZ_CHECK(strays() == 0, "temporary files left in the cache folder");
    remove_node(p);
    unlink(other);
    return 0;
}
