/* test_cache.c - the on-disk cubin cache, on a machine without a GPU:
 * miss then hit, corrupt and truncated files, an unwritable directory, and
 * 16 processes racing to fill one key. Needs nvJitLink (fa4_compile's
 * compiler); skips when it is absent. */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fa4.h"
#include "fa4gen.h" /* fa4gen_build_id */
#include "testutil.h"

static const char *const CONFIG = "mha target=sm90a dtype=bf16 qk=64 ov=64 mask=causal";

static int have_nvjitlink(void)
{
    const char *names[] = {"libnvJitLink.so.13", "libnvJitLink.so", "/usr/local/cuda/lib64/libnvJitLink.so.13"};
    for (int i = 0; i < 3; i++) {
        /* RTLD_NODELETE: nvJitLink leaks 72,704 bytes each time it is unloaded (LeakSanitizer, make test-sanitize) */
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (h) {
            dlclose(h);
            return 1;
        }
    }
    return 0;
}

static char *temp_dir(void)
{
    char *d = strdup("/tmp/fa4cache.XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static fa4_ctx *make_ctx(const char *dir)
{
    fa4_options o = FA4_OPTIONS_INIT;
    o.cache_dir = dir;
    o.target = FA4_TARGET_SM90A;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    return ctx;
}

/* Names of the directory's entries: *cubins files ending .cubin, *others the rest. */
static void count_files(const char *dir, int *cubins, int *others, char *cubin_path, size_t n)
{
    *cubins = *others = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t len = strlen(e->d_name);
        if (len > 6 && !strcmp(e->d_name + len - 6, ".cubin")) {
            (*cubins)++;
            if (cubin_path) snprintf(cubin_path, n, "%s/%s", dir, e->d_name);
        } else {
            (*others)++;
        }
    }
    closedir(d);
}

static void compile_ok(fa4_ctx *ctx, void **bin, size_t *size, int want_source)
{
    fa4_kernel_stats st;
    fa4_status s = fa4_compile_v2(ctx, CONFIG, bin, size, &st);
    if (s) fprintf(stderr, "fa4_compile: %s\n", fa4_last_error(ctx));
    assert_int_equal(s, FA4_OK);
    assert_true(*size > 64);
    assert_memory_equal(*bin, "\x7f" "ELF", 4); /* a cubin is an ELF file */
    assert_int_equal(st.source, want_source);
}

static void test_miss_then_hit(void **state)
{
    (void)state;
    if (!have_nvjitlink()) skip();
    char *dir = temp_dir();
    fa4_ctx *ctx = make_ctx(dir);
    void *a, *b;
    size_t na, nb;
    compile_ok(ctx, &a, &na, 2);
    compile_ok(ctx, &b, &nb, 1);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    int cubins, others;
    char path[1024];
    count_files(dir, &cubins, &others, path, sizeof path);
    assert_int_equal(cubins, 1);
    assert_int_equal(others, 0);
    /* The key names the generator's build id (version + source hash): a build with other kernel code at
     * the same version never takes this file. */
    char want[128], head[4096] = {0};
    snprintf(want, sizeof want, "\ngenerator=%s\n", fa4gen_build_id());
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t got = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    assert_true(got > 64 && memmem(head, got, want, strlen(want)) != NULL);
    assert_non_null(strchr(fa4gen_build_id(), '+'));
    /* A fresh context (another process, in effect) hits the same file. */
    fa4_ctx *ctx2 = make_ctx(dir);
    void *c;
    size_t nc;
    compile_ok(ctx2, &c, &nc, 1);
    assert_memory_equal(a, c, na);
    free(a), free(b), free(c);
    fa4_destroy(ctx2);
    fa4_destroy(ctx);
    assert_int_equal(remove_tree(dir), 0);
    free(dir);
}

static void damage(const char *path, int truncate_it)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    if (truncate_it) {
        assert_int_equal(truncate(path, st.st_size / 2), 0);
        return;
    }
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char byte;
    off_t at = st.st_size - 100; /* inside the payload */
    assert_int_equal(pread(fd, &byte, 1, at), 1);
    byte ^= 0x5a;
    assert_int_equal(pwrite(fd, &byte, 1, at), 1);
    close(fd);
}

static void corrupt_case(int truncate_it)
{
    char *dir = temp_dir();
    fa4_ctx *ctx = make_ctx(dir);
    void *a, *b, *c;
    size_t na, nb, nc;
    compile_ok(ctx, &a, &na, 2);
    char path[1024];
    int cubins, others;
    count_files(dir, &cubins, &others, path, sizeof path);
    assert_int_equal(cubins, 1);
    damage(path, truncate_it);
    compile_ok(ctx, &b, &nb, 2); /* rebuilt, not served from the damaged file */
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    compile_ok(ctx, &c, &nc, 1); /* and rewritten */
    assert_memory_equal(a, c, na);
    free(a), free(b), free(c);
    fa4_destroy(ctx);
    assert_int_equal(remove_tree(dir), 0);
    free(dir);
}

static void test_corrupt_payload(void **state)
{
    (void)state;
    if (!have_nvjitlink()) skip();
    corrupt_case(0);
}

static void test_truncated(void **state)
{
    (void)state;
    if (!have_nvjitlink()) skip();
    corrupt_case(1);
}

/* Run fn with stderr going to a file; returns what it wrote (malloc'd). */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
    char path[] = "/tmp/fa4err.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    off_t n = lseek(fd, 0, SEEK_END);
    char *text = calloc(1, (size_t)n + 1);
    assert_int_equal(pread(fd, text, (size_t)n, 0), n);
    close(fd);
    unlink(path);
    return text;
}

static void compile_twice(void *arg)
{
    fa4_ctx *ctx = arg;
    for (int i = 0; i < 2; i++) {
        void *bin;
        size_t n;
        compile_ok(ctx, &bin, &n, 2); /* memory-only: always compiled */
        free(bin);
    }
}

static int count_lines_with(const char *text, const char *word)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, word)); p += strlen(word)) n++;
    return n;
}

/* A FIFO, a symlink to a device or a dangling symlink at a cache file's path (found by
 * tests/fuzz/fuzz_cache: a FIFO blocked the reader's open forever). None is a file this user
 * wrote: each is refused with one warning naming the path, never followed or read (a blocking
 * open would hang), and the context compiles and caches in memory only, leaving the node alone. */
static void test_not_a_file(void **state)
{
    (void)state;
    if (!have_nvjitlink()) skip();
    char *dir = temp_dir();
    fa4_ctx *ctx = make_ctx(dir);
    void *a;
    size_t na;
    compile_ok(ctx, &a, &na, 2);
    free(a);
    char path[1024];
    int cubins, others;
    count_files(dir, &cubins, &others, path, sizeof path);
    assert_int_equal(cubins, 1);
    fa4_destroy(ctx);
    for (int node = 0; node < 3; node++) {
        assert_int_equal(unlink(path), 0);
        assert_int_equal(node == 0 ? mkfifo(path, 0600) : symlink(node == 1 ? "/dev/zero" : "/nonexistent/x", path), 0);
        ctx = make_ctx(dir); /* a fresh context: no memory hit */
        alarm(30); /* a blocking open would hang here: SIGALRM fails the test */
        char *err = capture_stderr(compile_twice, ctx);
        alarm(0);
        assert_int_equal(count_lines_with(err, "warning"), 1);
        if (!strstr(err, path) || !strstr(err, node ? "symbolic link" : "not a regular file"))
            fail_msg("node %d: warning '%s'", node, err);
        free(err);
        struct stat st;
        assert_int_equal(lstat(path, &st), 0);
        assert_true(node == 0 ? S_ISFIFO(st.st_mode) : S_ISLNK(st.st_mode)); /* left as it was */
        fa4_destroy(ctx);
    }
    assert_int_equal(remove_tree(dir), 0);
    free(dir);
}

static void test_unwritable_dir(void **state)
{
    (void)state;
    if (!have_nvjitlink()) skip();
    char *dir = temp_dir();
    char bad[1100];
    if (geteuid() == 0) {
        /* chmod does not stop root; a path under a regular file stops everyone. */
        char file[1050];
        snprintf(file, sizeof file, "%s/file", dir);
        FILE *f = fopen(file, "w");
        assert_non_null(f);
        fclose(f);
        snprintf(bad, sizeof bad, "%s/sub", file);
    } else {
        assert_int_equal(chmod(dir, 0500), 0);
        snprintf(bad, sizeof bad, "%s/sub", dir);
    }
    fa4_ctx *ctx = make_ctx(bad);
    char *err = capture_stderr(compile_twice, ctx);
    assert_int_equal(count_lines_with(err, "warning"), 1);
    assert_non_null(strstr(err, "memory only"));
    free(err);
    fa4_destroy(ctx);
    assert_int_equal(remove_tree(dir), 0);
    free(dir);
}

static void test_disk_cache_off(void **state)
{
    (void)state;
    if (!have_nvjitlink()) skip();
    char *dir = temp_dir();
    fa4_options o = FA4_OPTIONS_INIT;
    o.cache_dir = dir;
    o.disk_cache = 0;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    char *err = capture_stderr(compile_twice, ctx);
    assert_string_equal(err, ""); /* off on purpose: no warning */
    free(err);
    int cubins, others;
    count_files(dir, &cubins, &others, NULL, 0);
    assert_int_equal(cubins + others, 0);
    fa4_destroy(ctx);
    assert_int_equal(remove_tree(dir), 0);
    free(dir);
}

static void test_env_dir(void **state)
{
    (void)state;
    if (!have_nvjitlink()) skip();
    char *dir = temp_dir();
    char sub[1100];
    snprintf(sub, sizeof sub, "%s/a/b", dir); /* created with mkdir -p */
    setenv("FA4GEN_CACHE_DIR", sub, 1);
    fa4_ctx *ctx = make_ctx(NULL);
    unsetenv("FA4GEN_CACHE_DIR");
    void *bin;
    size_t n;
    compile_ok(ctx, &bin, &n, 2);
    free(bin);
    struct stat st;
    assert_int_equal(stat(sub, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    int cubins, others;
    count_files(sub, &cubins, &others, NULL, 0);
    assert_int_equal(cubins, 1);
    fa4_destroy(ctx);
    assert_int_equal(remove_tree(dir), 0);
    free(dir);
}

enum { RACERS = 16 };

static void test_race(void **state)
{
    (void)state;
    if (!have_nvjitlink()) skip();
    char *dir = temp_dir();
    char out[RACERS][1100];
    pid_t pid[RACERS];
    for (int i = 0; i < RACERS; i++) {
        snprintf(out[i], sizeof out[i], "%s.out%d", dir, i);
        pid[i] = fork();
        assert_true(pid[i] >= 0);
        if (pid[i] == 0) {
            fa4_options o = FA4_OPTIONS_INIT;
            o.cache_dir = dir;
            fa4_ctx *ctx = NULL;
            void *bin = NULL;
            size_t n = 0;
            if (fa4_create(&ctx, &o) || fa4_compile(ctx, CONFIG, &bin, &n)) _exit(1);
            FILE *f = fopen(out[i], "wb");
            if (!f || fwrite(bin, 1, n, f) != n || fclose(f)) _exit(2);
            _exit(0);
        }
    }
    for (int i = 0; i < RACERS; i++) {
        int st;
        assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    char *first = NULL;
    size_t first_n = 0;
    for (int i = 0; i < RACERS; i++) {
        FILE *f = fopen(out[i], "rb");
        assert_non_null(f);
        char *buf = malloc(1 << 24);
        size_t n = fread(buf, 1, 1 << 24, f);
        fclose(f);
        unlink(out[i]);
        assert_true(n > 64);
        if (!first) {
            first = buf, first_n = n;
            continue;
        }
        assert_int_equal(n, first_n);
        assert_memory_equal(buf, first, n);
        free(buf);
    }
    int cubins, others;
    count_files(dir, &cubins, &others, NULL, 0);
    assert_int_equal(cubins, 1);
    assert_int_equal(others, 0); /* no temp files left behind */
    /* The final file is valid: a new context hits it with the same bytes. */
    fa4_ctx *ctx = make_ctx(dir);
    void *bin;
    size_t n;
    compile_ok(ctx, &bin, &n, 1);
    assert_int_equal(n, first_n);
    assert_memory_equal(bin, first, n);
    free(bin);
    free(first);
    fa4_destroy(ctx);
    assert_int_equal(remove_tree(dir), 0);
    free(dir);
}

int main(void)
{
    /* these cases read stderr for the cache's warnings; the first compile's notice (api.c) is not theirs */
    setenv("FA4GEN_LOG", "0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_miss_then_hit), cmocka_unit_test(test_corrupt_payload),
        cmocka_unit_test(test_truncated),     cmocka_unit_test(test_unwritable_dir),
        cmocka_unit_test(test_disk_cache_off), cmocka_unit_test(test_env_dir),
        cmocka_unit_test(test_race),          cmocka_unit_test(test_not_a_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
