/* score_mod.c - a user's score_mod on its way into a kernel: the link mode, the
 * cache key's user-code line, and NVRTC's PTX with its errors as statuses.
 *
 * Guarantees: a config's mod= hash must be the hash of the source this call
 * gives (a mismatched config is refused; mod= alone, 64 bits, does not keep two
 * sources apart: the SHA-256 below and the memory cache's whole-source compare
 * do); without NVRTC a
 * mod is FA4_ERR_UNSUPPORTED, a source NVRTC refuses is FA4_ERR_COMPILE with
 * NVRTC's log in the message, and nothing is cached or launched for either.
 * The user-code line of the disk-cache key names the source's SHA-256 (not
 * mod='s 64-bit FNV, which a forger can collide), the NVRTC version and the
 * link mode, so each of them selects its own cubin. Computed on a memory-cache
 * miss only; a hit compares the whole source instead (cache.c rt_map_find).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "score_mod.h"
#include "sha256.h"

fa4_status rt_mod_link(fa4_ctx *ctx, int *link)
{
    ScoreModLink l;
    char err[160];
    if (score_mod_link_from_env(&l, err, sizeof err)) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s", err);
    *link = (int)l;
    return FA4_OK;
}

fa4_status rt_mod_prepare(fa4_ctx *ctx, const Config *c, const char *src, RtMod *m)
{
    char err[512], version[32];
    memset(m, 0, sizeof *m);
    if (!src)
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "config: mod=%016llx names a score_mod, but this call has no "
                       "source; pass it as fa4_mha_args.score_mod", (unsigned long long)c->score_mod);
    if (score_mod_hash(src) != c->score_mod)
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "config: mod=%016llx is not the hash of this score_mod "
                       "source (%016llx)", (unsigned long long)c->score_mod, (unsigned long long)score_mod_hash(src));
    ScoreModLink link;
    if (score_mod_link_from_env(&link, err, sizeof err)) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s", err);
    if (score_mod_nvrtc_version(version, sizeof version, err, sizeof err))
        return rt_fail(ctx, FA4_ERR_UNSUPPORTED, "%s", err);
    unsigned char digest[SHA256_BYTES];
    char hex[SHA256_HEX];
    sha256(src, strlen(src), digest);
    sha256_hex(digest, hex);
    m->src = src;
    m->link = (int)link;
    snprintf(m->user_code, sizeof m->user_code, "score_mod:sha256:%s %s %s", hex, version, score_mod_link_name[link]);
    return FA4_OK;
}

fa4_status rt_mod_ptx(fa4_ctx *ctx, const RtMod *m, const Target *t, char **ptx)
{
    char err[512], *log = NULL;
    int rc = score_mod_compile(m->src, t, ptx, &log, err, sizeof err);
    fa4_status s = FA4_OK;
    if (rc == MOD_NO_NVRTC) s = rt_fail(ctx, FA4_ERR_UNSUPPORTED, "%s", err);
    else if (rc) s = rt_fail(ctx, FA4_ERR_COMPILE, "%s:\n%s", err, log && log[0] ? log : "(NVRTC gave no log)");
    free(log);
    return s;
}
