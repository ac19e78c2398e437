/* fuzz_main.h - the fa4gen CLI in process (gen/main.c with its main renamed), in a sandbox:
 * the harness runs in a fresh temporary folder holding 'list' and the fixtures below, stdout goes to
 * /dev/null and stderr to a file the harness reads back after each run. */
#ifndef FA4_FUZZ_MAIN_H
#define FA4_FUZZ_MAIN_H
#define main fa4gen_main
#include "../../gen/main.c"
#undef main

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>

#include "fuzz_common.h"

static FILE *fz_err;
static int fz_saved_stderr = -1, fz_cwd = -1;
static char fz_dir[] = "/tmp/fa4fuzz.XXXXXX";

static void fz_write_list(const char *text, size_t len)
{
    FILE *f = fopen("list", "w");
    if (!f) abort();
    fwrite(text, 1, len, f);
    fclose(f);
}

static const char fz_default_list[] = "mha target=sm90a dtype=bf16 qk=64 ov=64 mask=causal\n"
                                      "# a comment\n"
                                      "mha target=sm100a dtype=bf16 qk=64 ov=64 mask=window:64,0\n";

/* The sandbox's other fixtures, which every run finds there: a score_mod, one that includes a
 * file, a FIFO (no writer: opening it for reading must not block) and a directory. */
static const char *const fz_fixtures[] = {"list", "mod.cu", "inc.cu", "fifo", "dir"};

static int fz_is_fixture(const char *name)
{
    for (size_t i = 0; i < sizeof fz_fixtures / sizeof fz_fixtures[0]; i++)
        if (!strcmp(name, fz_fixtures[i])) return 1;
    return 0;
}

static void fz_write_file(const char *name, const char *text)
{
    FILE *f = fopen(name, "w");
    if (!f) abort();
    fputs(text, f);
    fclose(f);
}

static int fz_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw);

/* The fixtures as they were (a run may write over list or mod.cu with -o, or into dir with -d). */
static void fz_fixtures_reset(void)
{
    struct stat st;
    fz_write_list(fz_default_list, sizeof fz_default_list - 1);
    fz_write_file("mod.cu", "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
                            "{ return 30.0f * tanhf(s / 30.0f); }\n");
    fz_write_file("inc.cu", "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
                            "{ return s; }\n#include \"/etc/passwd\"\n");
    if (lstat("fifo", &st) || !S_ISFIFO(st.st_mode)) {
        if ((!lstat("fifo", &st) && nftw("fifo", fz_rm, 16, FTW_DEPTH | FTW_PHYS)) || mkfifo("fifo", 0600)) abort();
    }
    if (!lstat("dir", &st) && nftw("dir", fz_rm, 16, FTW_DEPTH | FTW_PHYS)) abort();
    if (mkdir("dir", 0700)) abort();
}

/* Enters the sandbox for one input (fz_leave goes back: libFuzzer's paths are relative). */
static void fz_init(void)
{
    if (fz_err) {
        if (chdir(fz_dir)) abort();
        return;
    }
    if ((fz_cwd = open(".", O_RDONLY | O_DIRECTORY)) < 0 || !mkdtemp(fz_dir) || chdir(fz_dir)) abort();
    if (!freopen("/dev/null", "w", stdout)) abort();
    /* bundle - reads the list from stdin: an empty one, never a terminal it would wait on */
    if (!freopen("/dev/null", "r", stdin)) abort();
    /* fa4gen cache clear/prune act on the cache folder: the sandbox's, never the user's */
    char cache[sizeof fz_dir + 16];
    snprintf(cache, sizeof cache, "%s/cache", fz_dir);
    if (setenv("FA4GEN_CACHE_DIR", cache, 1)) abort();
    fz_err = tmpfile();
    if (!fz_err || (fz_saved_stderr = dup(2)) < 0) abort();
    fz_fixtures_reset();
}

/* Starts a run: stderr is the empty capture file (libFuzzer's own reports keep the real one). */
static void fz_begin(void)
{
    fflush(stderr);
    if (ftruncate(fileno(fz_err), 0) || dup2(fileno(fz_err), 2) < 0 || lseek(2, 0, SEEK_SET) < 0) abort();
}

/* Ends a run: what it wrote on stderr (static buffer); stderr is the real one again. */
static const char *fz_stderr(void)
{
    static char buf[65536];
    fflush(stderr);
    if (dup2(fz_saved_stderr, 2) < 0) abort();
    ssize_t n = pread(fileno(fz_err), buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

static int fz_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Names in the sandbox other than the fixtures (a file the run left); removes them. */
static int fz_leftovers(char *first, size_t n)
{
    DIR *d = opendir(".");
    int count = 0;
    if (first && n) first[0] = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || fz_is_fixture(e->d_name)) continue;
        if (!count++ && first) snprintf(first, n, "%s", e->d_name);
        if (nftw(e->d_name, fz_rm, 16, FTW_DEPTH | FTW_PHYS)) abort();
    }
    if (d) closedir(d);
    d = opendir("dir"); /* a fixture a bundle may write into */
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!count++ && first) snprintf(first, n, "dir/%s", e->d_name);
    }
    if (d) closedir(d);
    return count;
}

static void fz_leave(void)
{
    if (fchdir(fz_cwd)) abort();
}

/* exit 2: one line on stderr (escaped), no file left. */
static void fz_check_invalid(int rc, const char *err)
{
    char left[300];
    int files = fz_leftovers(left, sizeof left);
    if (rc != 2) return;
    size_t len = strlen(err);
    FUZZ_CHECK(len > 0 && err[len - 1] == '\n' && strchr(err, '\n') == err + len - 1, "stderr '%s'", err);
    for (size_t i = 0; i + 1 < len; i++)
        FUZZ_CHECK((unsigned char)err[i] >= 0x20 && (unsigned char)err[i] < 0x7f, "byte 0x%02x in '%s'",
                   (unsigned char)err[i], err);
    FUZZ_CHECK(files == 0, "exit 2 left '%s'", left);
}
#endif
