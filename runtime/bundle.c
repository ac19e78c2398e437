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
