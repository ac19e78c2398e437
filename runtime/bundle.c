/* bundle.c - the AOT bundles a host links (`fa4gen bundle LIST -o FILE.c`).
 *
 * Guarantees:
 * - Registration is process-wide (a bundle's constructor runs before any
 *   context exists), append-only and locked; a bundle is registered once.
 * - A lookup matches a kernel by its config hash, then compares the canonical
 *   config and the generator's build id (version + source hash), so an entry is only used for the exact
 *   kernel it was compiled from; the target is part of the canonical config.
 *   Bundles are searched in registration order.
 * - The registry is the only state outside a context: it holds pointers to
 *   the hosts' constant tables, never a copy and never a loaded module.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rt_internal.h"

enum { BUNDLES_MAX = 64 };

static pthread_mutex_t bundles_mu = PTHREAD_MUTEX_INITIALIZER;
static const fa4_bundle *bundles[BUNDLES_MAX];
static int n_bundles;

fa4_status fa4_bundle_register(const fa4_bundle *b)
{
    if (!b) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "bundle: NULL");
    if (b->size < sizeof *b)
        return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "bundle '%s': size %zu, expected %zu; regenerate it with "
                       "this fa4gen", b->size >= offsetof(fa4_bundle, generator) && b->name ? b->name : "?",
                       b->size, sizeof *b);
    if (!b->name || !b->generator || b->n_kernels < 0 || (b->n_kernels && !b->kernels))
        return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "bundle '%s': a NULL name, generator or kernel table",
                       b->name ? b->name : "?");
    for (int i = 0; i < b->n_kernels; i++) {
        const fa4_bundle_kernel *e = &b->kernels[i];
        if (!e->config || !e->symbol || !e->fatbin || !e->fatbin_size)
            return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "bundle '%s': kernel %d has no config, symbol or fatbin",
                           b->name, i);
    }
    fa4_status s = FA4_OK;
    pthread_mutex_lock(&bundles_mu);
    int known = 0;
    for (int i = 0; i < n_bundles; i++) known |= bundles[i] == b;
    if (!known && n_bundles == BUNDLES_MAX)
        s = rt_fail(NULL, FA4_ERR_OUT_OF_MEMORY, "bundle '%s': %d bundles are registered already, the most a "
                    "process holds", b->name, BUNDLES_MAX);
    else if (!known)
        bundles[n_bundles++] = b;
    pthread_mutex_unlock(&bundles_mu);
    return s;
}

const fa4_bundle_kernel *rt_bundle_find(const Plan *p, const char **bundle_name)
{
    const fa4_bundle_kernel *found = NULL;
    pthread_mutex_lock(&bundles_mu);
    for (int i = 0; i < n_bundles && !found; i++) {
        const fa4_bundle *b = bundles[i];
        if (strcmp(b->generator, fa4gen_build_id())) continue;
        for (int j = 0; j < b->n_kernels && !found; j++) {
            const fa4_bundle_kernel *e = &b->kernels[j];
            if (e->config_hash == p->hash && !strcmp(e->config, p->canonical)) {
                found = e;
                *bundle_name = b->name;
            }
        }
    }
    pthread_mutex_unlock(&bundles_mu);
    return found;
}

int fa4_bundle_count(void)
{
    pthread_mutex_lock(&bundles_mu);
    int n = n_bundles;
    pthread_mutex_unlock(&bundles_mu);
    return n;
}

const fa4_bundle *fa4_bundle_at(int i)
{
    pthread_mutex_lock(&bundles_mu);
    const fa4_bundle *b = i >= 0 && i < n_bundles ? bundles[i] : NULL;
    pthread_mutex_unlock(&bundles_mu);
    return b;
}

/* Appends to buf (length *k of n), keeping it terminated; what does not fit is cut. */
static void append(char *buf, size_t n, size_t *k, const char *fmt, ...) FA4_PRINTF(4, 5);
static void append(char *buf, size_t n, size_t *k, const char *fmt, ...)
{
    if (*k + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *k, n - *k, fmt, ap);
    va_end(ap);
    if (w > 0) *k += (size_t)w < n - *k ? (size_t)w : n - *k - 1;
}

void rt_bundle_explain_miss(const Plan *p, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    pthread_mutex_lock(&bundles_mu);
    if (!n_bundles)
        append(buf, n, &k, "no bundle is linked or loaded (link the C source fa4gen bundle writes, or load its "
               "shared object: fa4.load_bundle)");
    else
        append(buf, n, &k, "searched %d bundle%s:", n_bundles, n_bundles == 1 ? "" : "s");
    for (int i = 0; i < n_bundles; i++) {
        const fa4_bundle *b = bundles[i];
        int ours = !strcmp(b->generator, fa4gen_build_id()), has = 0;
        for (int j = 0; j < b->n_kernels && !has; j++) has = !strcmp(b->kernels[j].config, p->canonical);
        append(buf, n, &k, "%s '%s' (%d kernel%s, generator %s): %s", i ? ";" : "", b->name, b->n_kernels,
               b->n_kernels == 1 ? "" : "s", b->generator,
               !ours ? (has ? "holds this config but was written by another fa4gen build, never used"
                            : "written by another fa4gen build, never used")
                     : "no entry with this canonical config");
    }
    pthread_mutex_unlock(&bundles_mu);
}

/* Fatbin layout (what fatbinary writes, the layout the driver reads): a 16-byte header (magic, version,
 * header size at byte 6, payload size at 8), then entries, each a header (kind at 0: 1 PTX, 2 ELF; its
 * size at 4; the payload's at 8; the sm at 28; flags at 40, where 0x2000 and 0x8000 mark a compressed
 * payload; the decompressed size at 56) and its payload. fatbinary compresses PTX by default, not ELF. */
enum { FATBIN_MAGIC = 0xBA55ED50u, FATBIN_ELF = 2, FATBIN_COMPRESSED = 0x2000 | 0x8000 };

static uint64_t rd(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

int rt_fatbin_cubin(const void *fatbin, size_t size, int sm, const void **cubin, size_t *len)
{
    const unsigned char *h = fatbin;
    if (size < 16 || rd(h, 4) != FATBIN_MAGIC) return -1;
    uint64_t head = rd(h + 6, 2), total = rd(h + 8, 8);
    if (head < 16 || head > size || total > size - head) return -1;
    for (uint64_t o = head; o + 64 <= head + total;) {
        const unsigned char *e = h + o;
        uint64_t ehead = rd(e + 4, 4), esize = rd(e + 8, 8);
        if (ehead < 64 || ehead > head + total - o || esize > head + total - o - ehead) return -1;
        if (rd(e, 2) == FATBIN_ELF && (int)rd(e + 28, 4) == sm && !(rd(e + 40, 8) & FATBIN_COMPRESSED) &&
            !rd(e + 56, 8) && esize >= 4 && !memcmp(e + ehead, "\177ELF", 4)) {
            *cubin = e + ehead;
            *len = (size_t)esize;
            return 0;
        }
        o += ehead + esize;
    }
    return -1;
}

void rt_bundle_describe(char *buf, size_t n)
{
    int kernels = 0, stale = 0;
    const char *stale_version = "";
    pthread_mutex_lock(&bundles_mu);
    for (int i = 0; i < n_bundles; i++) {
        if (strcmp(bundles[i]->generator, fa4gen_build_id())) {
            stale++;
            stale_version = bundles[i]->generator;
        } else {
            kernels += bundles[i]->n_kernels;
        }
    }
    int total = n_bundles;
    pthread_mutex_unlock(&bundles_mu);
    int k = snprintf(buf, n, "%d bundle%s linked, %d kernel%s", total, total == 1 ? "" : "s", kernels,
                     kernels == 1 ? "" : "s");
    if (stale && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "; %d written by another fa4gen (%s; this runtime is %s), never used",
                 stale, stale_version, fa4gen_build_id());
}
