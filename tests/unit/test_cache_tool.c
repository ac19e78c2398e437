/* test_cache_tool.c - fa4_cache_dir / list / clear / prune (runtime/cache_tool.c) on a machine without a
 * GPU: entries written by the runtime's own writer (rt_disk_put), ordered by last use, entries of
 * another build and invalid ones marked, and only this user's regular files with an entry's name ever
 * touched: a symlink named like an entry, a foreign file and a live writer's temporary file survive
 * every removal; an untrusted folder is refused with the runtime's warning and nothing is removed. */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rt_internal.h"
#include "testutil.h"

static char dir[] = "/tmp/fa4cachetool.XXXXXX";

static fa4_ctx *ctx_for(const char *d)
{
    fa4_options o = FA4_OPTIONS_INIT;
    o.cache_dir = d;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    return ctx;
}

static void path_of(const char *name, char *buf, size_t n) { snprintf(buf, n, "%s/%s", dir, name); }

/* An entry as the runtime writes it, for config (and generator), last used `age` seconds ago; its file
 * name in name. */
static void put(fa4_ctx *ctx, const char *config, const char *generator, int age, size_t bytes, char *name)
{
    char key[512];
    snprintf(key, sizeof key, "fa4gen cubin key 1\nconfig=%s\ngenerator=%s\ntarget=sm90a (sm_90a)\nptx_isa=8.8\n"
             "compiler=ptxas-test\nuser_code=none\n", config, generator);
    uint64_t h = rt_fnv1a(key, strlen(key), RT_FNV_SEED);
    char *payload = calloc(1, bytes);
    memcpy(payload, "\177ELF", 4);
    rt_disk_put(ctx, key, h, payload, bytes);
    free(payload);
    rt_cache_file_name(h, name, 64);
    char p[256];
    path_of(name, p, sizeof p);
    struct timespec t[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
    assert_int_equal(utimensat(AT_FDCWD, p, t, 0), 0);
}

typedef struct {
    int n;
    char file[16][64], config[16][256];
    int this_build[16], bad[16];
    uint64_t bytes[16];
} Seen;

static int seen(void *u, const fa4_cache_entry *e)
{
    Seen *s = u;
    assert_int_equal(e->size, sizeof *e);
    snprintf(s->file[s->n], 64, "%s", e->file);
    snprintf(s->config[s->n], 256, "%s", e->config);
    s->this_build[s->n] = e->this_build, s->bad[s->n] = e->problem != NULL, s->bytes[s->n] = e->bytes;
    if (e->problem && getenv("TEST_VERBOSE")) fprintf(stderr, "%s: %s\n", e->file, e->problem);
    s->n++;
    return 0;
}

static int exists(const char *name)
{
    char p[256];
    struct stat st;
    path_of(name, p, sizeof p);
    return lstat(p, &st) == 0;
}

/* The folder: A (newest), B, C (oldest) of this build, D of another build, E corrupt, plus what is not
 * ours: a symlink with an entry's name, a foreign file, a live temporary file; and a dead one. */
static void fill(fa4_ctx *ctx, char names[5][64])
{
    put(ctx, "mha target=sm90a qk=64 A", fa4gen_build_id(), 10, 1000, names[0]);
    put(ctx, "mha target=sm90a qk=64 B", fa4gen_build_id(), 100, 2000, names[1]);
    put(ctx, "mha target=sm90a qk=64 C", fa4gen_build_id(), 1000, 4000, names[2]);
    put(ctx, "mha target=sm90a qk=64 D", "0.0.1+0000000000000000", 50, 500, names[3]);
    put(ctx, "mha target=sm90a qk=64 E", fa4gen_build_id(), 500, 300, names[4]);
    char p[256], q[256];
    path_of(names[4], p, sizeof p);
    int fd = open(p, O_WRONLY);
    assert_true(fd >= 0 && pwrite(fd, "x", 1, 400) == 1); /* a changed payload byte (header 64, key 153) */
    close(fd);
    struct timespec was[2] = {{time(NULL) - 500, 0}, {time(NULL) - 500, 0}}; /* its last use as before */
    assert_int_equal(utimensat(AT_FDCWD, p, was, 0), 0);
    path_of("notes.txt", p, sizeof p);
    FILE *f = fopen(p, "w");
    fputs("mine, not the cache's\n", f);
    fclose(f);
    path_of("aaaaaaaaaaaaaaaa.cubin", q, sizeof q); /* a symlink named like an entry, to the foreign file */
    assert_int_equal(symlink(p, q), 0);
    path_of(".bbbbbbbbbbbbbbbb.123.0.tmp", p, sizeof p); /* a writer at work */
    f = fopen(p, "w");
    fclose(f);
    path_of(".cccccccccccccccc.99.1.tmp", p, sizeof p); /* a writer that died an hour ago */
    f = fopen(p, "w");
    fclose(f);
    struct timespec t[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    assert_int_equal(utimensat(AT_FDCWD, p, t, 0), 0);
}

static void test_list_prune_clear(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(dir));
    fa4_ctx *ctx = ctx_for(dir);
    char names[5][64], buf[256];
    fill(ctx, names);
    assert_int_equal(fa4_cache_dir(ctx, buf, sizeof buf), FA4_OK);
    assert_string_equal(buf, dir);
    assert_int_equal(fa4_cache_dir(ctx, buf, 4), FA4_ERR_INVALID_ARGUMENT);
    Seen s = {0};
    assert_int_equal(fa4_cache_list(ctx, seen, &s), FA4_OK);
    assert_int_equal(s.n, 5); /* not the symlink, the foreign file or the temporary files */
    const char *order[5] = {"A", "D", "B", "E", "C"}; /* most recently used first */
    for (int i = 0; i < 5; i++) {
        size_t len = strlen(s.config[i]);
        if (i == 3) { /* E: corrupt, its config not read */
            assert_true(s.bad[i] && !s.this_build[i]);
            assert_string_equal(s.file[i], names[4]);
            continue;
        }
        if (!len || strcmp(s.config[i] + len - 1, order[i]))
            fail_msg("entry %d: %s (want %s; %s)", i, s.config[i], order[i], s.bad[i] ? "not valid" : "valid");
        assert_false(s.bad[i]);
        assert_int_equal(s.this_build[i], i != 1); /* D is another build's */
    }
    /* prune to 4000 bytes: C (4000 + header, oldest) goes, then E, then B; A and D stay */
    int removed = 0;
    uint64_t bytes = 0;
    assert_int_equal(fa4_cache_prune(ctx, 4000, &removed, &bytes), FA4_OK);
    assert_int_equal(removed, 3);
    assert_false(exists(names[2]) || exists(names[4]) || exists(names[1]));
    assert_true(exists(names[0]) && exists(names[3]));
    assert_false(exists(".cccccccccccccccc.99.1.tmp")); /* a dead writer's file goes */
    assert_true(exists(".bbbbbbbbbbbbbbbb.123.0.tmp") && exists("notes.txt") && exists("aaaaaaaaaaaaaaaa.cubin"));
    assert_int_equal(fa4_cache_clear(ctx, &removed, &bytes), FA4_OK);
    assert_int_equal(removed, 2);
    assert_false(exists(names[0]) || exists(names[3]));
    assert_true(exists(".bbbbbbbbbbbbbbbb.123.0.tmp") && exists("notes.txt") && exists("aaaaaaaaaaaaaaaa.cubin"));
    memset(&s, 0, sizeof s);
    assert_int_equal(fa4_cache_list(ctx, seen, &s), FA4_OK);
    assert_int_equal(s.n, 0);
    fa4_destroy(ctx);
    remove_tree(dir);
}

/* stderr of body() (the runtime's one warning) as a malloc'd string. */
static char *stderr_of(void (*body)(void))
{
    char path[] = "/tmp/fa4cachetool-err.XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    body();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char *text = calloc(1, 4096);
    ssize_t n = pread(fd, text, 4095, 0);
    text[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(path);
    return text;
}

static void refused_folder(void)
{
    fa4_ctx *ctx = ctx_for(dir);
    char name[64];
    put(ctx, "mha target=sm90a qk=64 X", fa4gen_build_id(), 0, 100, name);
    fa4_destroy(ctx);
    chmod(dir, 0777);
    ctx = ctx_for(dir);
    Seen s = {0};
    int removed = -1;
    assert_int_equal(fa4_cache_list(ctx, seen, &s), FA4_ERR_CACHE);
    if (!strstr(fa4_last_error(ctx), "is writable by group or others; not trusted: nothing was read or removed"))
        fail_msg("%s", fa4_last_error(ctx));
    assert_int_equal(fa4_cache_clear(ctx, &removed, NULL), FA4_ERR_CACHE);
    assert_int_equal(removed, 0);
    assert_int_equal(fa4_cache_prune(ctx, 0, NULL, NULL), FA4_ERR_CACHE);
    assert_true(exists(name));
    fa4_destroy(ctx);
    chmod(dir, 0700);
}

/* A folder others may write is refused with the runtime's one warning, and nothing in it is touched;
 * a missing folder holds nothing; a context without a disk cache has no folder. */
static void test_refusals(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(strcpy(dir, "/tmp/fa4cachetool.XXXXXX")));
    char *err = stderr_of(refused_folder);
    if (!strstr(err, "fa4: warning: cache directory '") || !strstr(err, "is writable by group or others") ||
        strchr(err, '\n') != err + strlen(err) - 1)
        fail_msg("warning: '%s'", err);
    free(err);
    remove_tree(dir);
    fa4_ctx *ctx = ctx_for("/tmp/fa4cachetool-missing/never/made");
    Seen s = {0};
    int removed = -1;
    assert_int_equal(fa4_cache_list(ctx, seen, &s), FA4_OK);
    assert_int_equal(s.n, 0);
    assert_int_equal(fa4_cache_clear(ctx, &removed, NULL), FA4_OK);
    assert_int_equal(removed, 0);
    fa4_destroy(ctx);
    fa4_options o = FA4_OPTIONS_INIT;
    o.disk_cache = 0;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    char buf[256];
    assert_int_equal(fa4_cache_dir(ctx, buf, sizeof buf), FA4_ERR_CACHE);
    assert_non_null(strstr(fa4_last_error(ctx), "disk_cache = 0"));
    fa4_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_prune_clear),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
