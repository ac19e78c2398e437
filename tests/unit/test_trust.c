/* test_trust.c - what libfa4rt trusts (docs/trust.md), on a machine without a GPU:
 * - SHA-256 against the FIPS 180-2 / NIST example vectors;
 * - the JIT's temp files against an attacker process that watches $TMPDIR and plants
 *   symlinks (to a file of its own and to a file of the victim's) and files next to every
 *   name fa4gen creates there, and swaps the contents of its file whenever it is written:
 *   the cubin must be ptxas's own, persisted as such, nothing followed, nothing left;
 * - planted disk-cache entries (another owner, mode 0666, a symlink, a 0777 folder, a
 *   FA4GEN_CACHE_DIR another user made first): refused with one warning, never loaded;
 *   a corrupted byte is caught by the SHA-256 and the entry rebuilt;
 * - a score_mod's disk key names its SHA-256: two sources with one FNV-1a 64 (a real
 *   collision, fnv_collision.h) get two keys.
 * "Another user" is uid 65534 (nobody): those cases need root (CI runs as root) and skip
 * otherwise. Compiles go through the toolkit's ptxas; they skip without one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fa4.h"
#include "fnv_collision.h"
#include "rt_internal.h"
#include "score_mod.h"
#include "sha256.h"
#include "testutil.h"

static const char *const CONFIG = "mha target=sm90a dtype=bf16 qk=64 ov=64 mask=causal";
enum { NOBODY = 65534 };

/* What an attacker puts where the victim's cubin should be: an ELF header, then a signature. */
static const char FORGED[] = "\177ELF\002\001\001 forged by the attacker, not ptxas's output";

static int have_ptxas(void)
{
    const char *env = getenv("FA4GEN_PTXAS"), *home = getenv("CUDA_HOME");
    char path[1024];
    if (env && access(env, X_OK) == 0) return 1;
    if (home && snprintf(path, sizeof path, "%s/bin/ptxas", home) < (int)sizeof path && access(path, X_OK) == 0)
        return 1;
    return access("/usr/local/cuda/bin/ptxas", X_OK) == 0;
}

static char *temp_dir(const char *name)
{
    char *d = malloc(256);
    snprintf(d, 256, "/tmp/%s.XXXXXX", name);
    assert_non_null(mkdtemp(d));
    return d;
}

static fa4_ctx *make_ctx(const char *dir, int disk)
{
    fa4_options o = FA4_OPTIONS_INIT;
    o.cache_dir = dir;
    o.disk_cache = disk;
    o.target = FA4_TARGET_SM90A;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    return ctx;
}

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

static void write_file(const char *path, const void *data, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
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

static int count_of(const char *text, const char *word)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, word)); p += strlen(word)) n++;
    return n;
}

/* ---------------------------------------------------------------- SHA-256 */

static void expect_digest(const char *want, const void *data, size_t n)
{
    unsigned char d[SHA256_BYTES];
    char hex[SHA256_HEX];
    sha256(data, n, d);
    sha256_hex(d, hex);
    assert_string_equal(hex, want);
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    expect_digest("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "", 0);
    expect_digest("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "abc", 3);
    static const char m448[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    expect_digest("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", m448, strlen(m448));
    static const char m896[] = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                               "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    expect_digest("cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1", m896, strlen(m896));
    /* one million 'a', streamed in pieces that straddle block boundaries */
    static char a[1100]; /* pieces run from 61 to 1057 bytes */
    memset(a, 'a', sizeof a);
    Sha256 s;
    sha256_init(&s);
    size_t left = 1000000, piece = 1;
    while (left) {
        size_t k = piece < left ? piece : left;
        sha256_update(&s, a, k);
        left -= k;
        piece = piece % 997 + 61;
    }
    unsigned char d[SHA256_BYTES];
    char hex[SHA256_HEX];
    sha256_final(&s, d);
    sha256_hex(d, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* ---------------------------------------------------------------- the JIT race */

/* What the attacker did, in memory it shares with the test. */
typedef struct {
    int plants;         /* symlinks and files it made next to a name it saw */
    int inside_planted; /* plants inside a folder fa4gen made (must stay 0) */
    int swaps;          /* times it found its file written by someone else and rewrote it */
    int ready;
} AttackLog;

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

static void plant_next_to(const char *tmp, const char *name, int in_dir, const char *evil, const char *precious,
                          AttackLog *log)
{
    char p[1024];
    /* the names the old JIT derived: <name>.log, ptxas's log (opened first), and <name>.cubin */
    snprintf(p, sizeof p, "%s/%s.log", tmp, name);
    log->plants += symlink(precious, p) == 0;
    snprintf(p, sizeof p, "%s/%s.cubin", tmp, name);
    log->plants += symlink(evil, p) == 0;
    snprintf(p, sizeof p, "%s/%s.o", tmp, name); /* a plain file too */
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd >= 0) {
        log->plants += write(fd, FORGED, sizeof FORGED) == (ssize_t)sizeof FORGED;
        close(fd);
    }
    if (!in_dir) return;
    static const char *const inside[] = {"kernel.cubin", "ptxas.log", "kernel.ptx", "out.cubin"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s/%s", tmp, name, inside[i]);
        log->inside_planted += symlink(i == 1 ? precious : evil, p) == 0;
    }
}

/* The attacker: another user (nobody, when the test runs as root) watching tmp. It exits with
 * the test (SIGKILL at the parent's death) or at SIGTERM. */
static void attacker(const char *tmp, const char *evil, const char *precious, AttackLog *log)
{
    pid_t parent = getppid();
    /* another user can only be played by root; as the same user it could write anywhere, so it
     * then plants only next to fa4gen's names, not inside its folder */
    int other = geteuid() == 0;
    if (other && (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))) _exit(3);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* after setuid, which clears it */
    if (getppid() != parent) _exit(0);
    int in = inotify_init1(IN_CLOEXEC);
    int wd_tmp = inotify_add_watch(in, tmp, IN_CREATE | IN_MOVED_TO);
    int wd_evil = inotify_add_watch(in, evil, IN_CLOSE_WRITE);
    if (in < 0 || wd_tmp < 0 || wd_evil < 0) _exit(4);
    __atomic_store_n(&log->ready, 1, __ATOMIC_SEQ_CST);
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n <= 0) continue;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            p += sizeof *e + e->len;
            if (e->wd == wd_evil) { /* someone wrote our file: put our bytes back before they read it */
                char got[sizeof FORGED] = {0};
                int fd = open(evil, O_RDWR);
                if (fd < 0) continue;
                if (read(fd, got, sizeof got) != (ssize_t)sizeof got || memcmp(got, FORGED, sizeof got)) {
                    if (ftruncate(fd, 0) == 0 && pwrite(fd, FORGED, sizeof FORGED, 0) == (ssize_t)sizeof FORGED)
                        log->swaps++;
                }
                close(fd);
                continue;
            }
            if (!e->len || !strcmp(e->name, "attacker") || ends_with(e->name, ".cubin") ||
                ends_with(e->name, ".log") || ends_with(e->name, ".o"))
                continue;
            plant_next_to(tmp, e->name, other && (e->mask & IN_ISDIR), evil, precious, log);
        }
    }
}

/* One compile in a fresh context with its own cache folder, then a second fresh context that
 * must take the persisted entry: *same is 1 when both gave exactly ref's bytes. */
static fa4_status compile_and_reload(const void *ref, size_t ref_n, int *same, char *why, size_t wn)
{
    char *cache = temp_dir("fa4trust-cache");
    fa4_ctx *ctx = make_ctx(cache, 1);
    void *bin = NULL, *bin2 = NULL;
    size_t n = 0, n2 = 0;
    fa4_kernel_stats st = {0}, st2 = {0};
    fa4_status s = fa4_compile_v2(ctx, CONFIG, &bin, &n, &st);
    if (s) snprintf(why, wn, "compile: %s", fa4_last_error(ctx));
    fa4_destroy(ctx);
    ctx = make_ctx(cache, 1);
    if (!s && (s = fa4_compile_v2(ctx, CONFIG, &bin2, &n2, &st2))) snprintf(why, wn, "reload: %s", fa4_last_error(ctx));
    fa4_destroy(ctx);
    *same = !s && n == ref_n && n2 == ref_n && !memcmp(bin, ref, n) && !memcmp(bin2, ref, n2) && st2.source == 1;
    if (!s && !*same)
        snprintf(why, wn, "compiled %zu bytes (%s ptxas's), the disk cache gave %zu bytes (%s ptxas's, source %d)", n,
                 n == ref_n && !memcmp(bin, ref, n) ? "=" : "NOT", n2,
                 n2 == ref_n && !memcmp(bin2, ref, n2) ? "=" : "NOT", st2.source);
    free(bin);
    free(bin2);
    remove_tree(cache);
    free(cache);
    return s;
}

/* Names left in tmp other than the attacker's folder and its plants. */
static int leftovers(const char *tmp, char *first, size_t n)
{
    DIR *d = opendir(tmp);
    int count = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "attacker")) continue;
        char p[1024];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", tmp, e->d_name);
        int plant = lstat(p, &st) == 0 && (S_ISLNK(st.st_mode) || ends_with(e->d_name, ".o")) &&
                    (ends_with(e->d_name, ".cubin") || ends_with(e->d_name, ".log") || ends_with(e->d_name, ".o"));
        if (plant) continue;
        if (!count++) snprintf(first, n, "%s", e->d_name);
    }
    if (d) closedir(d);
    return count;
}

enum { RACE_ROUNDS = 4 };

static void test_jit_race(void **state)
{
    (void)state;
    if (!have_ptxas()) skip();
    const char *old_tmp = getenv("TMPDIR");
    char *saved_tmp = old_tmp ? strdup(old_tmp) : NULL;
    /* ptxas's own cubin: a compile with no one watching */
    char *clean = temp_dir("fa4trust-clean");
    setenv("TMPDIR", clean, 1);
    fa4_ctx *ctx = make_ctx(NULL, 0);
    void *ref = NULL;
    size_t ref_n = 0;
    fa4_status s = fa4_compile(ctx, CONFIG, &ref, &ref_n);
    if (s) fail_msg("reference compile: %s", fa4_last_error(ctx));
    fa4_destroy(ctx);

    /* a shared temp folder like /tmp (1777), the attacker's file in it, and a file of the victim's */
    char *tmp = temp_dir("fa4trust-tmp"), *victim = temp_dir("fa4trust-victim");
    char evil[1100], precious[1100], adir[1024];
    assert_int_equal(chmod(tmp, 01777), 0);
    snprintf(adir, sizeof adir, "%s/attacker", tmp);
    snprintf(evil, sizeof evil, "%s/evil.cubin", adir);
    snprintf(precious, sizeof precious, "%s/precious", victim);
    static const char precious_text[] = "the victim's data\n";
    assert_int_equal(mkdir(adir, 0755), 0);
    write_file(evil, FORGED, sizeof FORGED, 0666);
    write_file(precious, precious_text, sizeof precious_text - 1, 0600);
    int as_other = geteuid() == 0;
    if (as_other) assert_int_equal(chown(adir, NOBODY, NOBODY) | chown(evil, NOBODY, NOBODY), 0);
    struct stat evil_before;
    assert_int_equal(stat(evil, &evil_before), 0);

    AttackLog *log = mmap(NULL, sizeof *log, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(log != MAP_FAILED);
    memset(log, 0, sizeof *log);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) attacker(tmp, evil, precious, log);
    for (int i = 0; i < 1000 && !__atomic_load_n(&log->ready, __ATOMIC_SEQ_CST); i++) usleep(5000);
    assert_true(log->ready);

    setenv("TMPDIR", tmp, 1);
    alarm(300);
    int genuine = 0;
    char why[RACE_ROUNDS][2048];
    fa4_status st[RACE_ROUNDS];
    for (int i = 0; i < RACE_ROUNDS; i++) {
        int same = 0;
        why[i][0] = 0;
        st[i] = compile_and_reload(ref, ref_n, &same, why[i], sizeof why[i]);
        genuine += same;
    }
    alarm(0);
    if (saved_tmp) setenv("TMPDIR", saved_tmp, 1);
    else unsetenv("TMPDIR");
    free(saved_tmp);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);

    size_t pn = 0;
    char *precious_now = read_file(precious, &pn);
    struct stat evil_after;
    assert_int_equal(stat(evil, &evil_after), 0);
    char left[256] = "";
    int n_left = leftovers(tmp, left, sizeof left);
    AttackLog got = *log;
    munmap(log, sizeof *log);
    free(ref);
    remove_tree(tmp), remove_tree(victim), remove_tree(clean);
    free(tmp), free(victim), free(clean);

    print_message("jit race: %d rounds, %d genuine; attacker (%s): %d plants, %d inside fa4gen's folder, %d swaps; "
                  "%d names left\n", RACE_ROUNDS, genuine, as_other ? "uid 65534" : "same uid", got.plants,
                  got.inside_planted, got.swaps, n_left);
    for (int i = 0; i < RACE_ROUNDS; i++)
        if (st[i] || why[i][0]) print_message("  round %d: %s: %s\n", i, fa4_status_string(st[i]), why[i]);
    if (got.plants == 0) fail_msg("the attacker saw no fa4gen name in TMPDIR: the race did not run");
    if (strcmp(precious_now ? precious_now : "", precious_text))
        fail_msg("the victim's file behind a planted .log symlink was changed: now '%s'", precious_now);
    free(precious_now);
    if (got.swaps || evil_after.st_mtim.tv_sec != evil_before.st_mtim.tv_sec ||
        evil_after.st_mtim.tv_nsec != evil_before.st_mtim.tv_nsec)
        fail_msg("fa4gen wrote through a planted .cubin symlink into the attacker's file (%d swaps)", got.swaps);
    if (got.inside_planted) fail_msg("the attacker planted %d names inside fa4gen's folder", got.inside_planted);
    if (genuine != RACE_ROUNDS)
        fail_msg("%d of %d rounds gave or cached a cubin that is not ptxas's", RACE_ROUNDS - genuine, RACE_ROUNDS);
    if (n_left) fail_msg("%d names left in TMPDIR, e.g. '%s'", n_left, left);
}

/* ---------------------------------------------------------------- planted cache entries */

static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* A forger: the entry at path with its payload replaced by FORGED and its checksum made right
 * again, in whichever format the file has (1: FNV-1a 64 in a 40-byte header; 2: SHA-256 of the
 * file with its digest zeroed, in a 64-byte header), so only the trust checks can refuse it. */
static unsigned char *forge(const char *path, size_t *out_n)
{
    size_t n = 0;
    unsigned char *f = (unsigned char *)read_file(path, &n);
    assert_non_null(f);
    assert_true(n > 40 && !memcmp(f, "FA4CUBIN", 8));
    uint32_t format = get32(f + 8), key_len = get32(f + 12);
    size_t head = format == 1 ? 40 : 64;
    assert_true(format == 1 || format == 2);
    size_t total = head + key_len + sizeof FORGED;
    unsigned char *b = malloc(total);
    memcpy(b, f, head + key_len);
    memcpy(b + head + key_len, FORGED, sizeof FORGED);
    put64(b + 24, sizeof FORGED);
    if (format == 1) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < sizeof FORGED; i++) h = (h ^ (unsigned char)FORGED[i]) * 0x100000001b3ull;
        put64(b + 32, h);
    } else {
        memset(b + 32, 0, 32);
        unsigned char d[SHA256_BYTES];
        sha256(b, total, d);
        memcpy(b + 32, d, 32);
    }
    free(f);
    *out_n = total;
    return b;
}

/* The genuine cubin of CONFIG and the path of its entry in a fresh folder dir. */
static void fill(const char *dir, void **bin, size_t *n, char *entry, size_t en)
{
    fa4_ctx *ctx = make_ctx(dir, 1);
    fa4_kernel_stats st;
    if (fa4_compile_v2(ctx, CONFIG, bin, n, &st)) fail_msg("compile: %s", fa4_last_error(ctx));
    assert_int_equal(st.source, 2);
    fa4_destroy(ctx);
    DIR *d = opendir(dir);
    assert_non_null(d);
    entry[0] = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (ends_with(e->d_name, ".cubin")) snprintf(entry, en, "%s/%s", dir, e->d_name);
    closedir(d);
    assert_true(entry[0]);
}

typedef struct {
    fa4_ctx *ctx;
    const void *want;
    size_t want_n;
    int sources[2];
    int same[2];
} Twice;

static void compile_twice(void *arg)
{
    Twice *t = arg;
    for (int i = 0; i < 2; i++) {
        void *bin = NULL;
        size_t n = 0;
        fa4_kernel_stats st = {0};
        fa4_status s = fa4_compile_v2(t->ctx, CONFIG, &bin, &n, &st);
        t->sources[i] = s ? -1 : st.source;
        t->same[i] = !s && n == t->want_n && !memcmp(bin, t->want, n);
        free(bin);
    }
}

/* Two compiles in a fresh context over dir (NULL: FA4GEN_CACHE_DIR): neither takes the planted
 * entry; one warning names where; the entry is still there, untouched. */
static void expect_refused(const char *what, const char *dir, const void *genuine, size_t gn, const char *entry,
                           const void *planted, size_t pn, const char *warn_names, const char *warn_says)
{
    Twice t = {make_ctx(dir, 1), genuine, gn, {0, 0}, {0, 0}};
    char *err = capture_stderr(compile_twice, &t);
    fa4_destroy(t.ctx);
    size_t now_n = 0;
    char *now = read_file(entry, &now_n);
    print_message("%s: sources %d %d, genuine %d %d; stderr: %s", what, t.sources[0], t.sources[1], t.same[0],
                  t.same[1], err[0] ? err : "(nothing)\n");
    if (t.sources[0] == 1 || t.sources[1] == 1 || !t.same[0] || !t.same[1])
        fail_msg("%s: the planted entry was loaded (sources %d, %d)", what, t.sources[0], t.sources[1]);
    if (t.sources[0] != 2 || t.sources[1] != 2) fail_msg("%s: sources %d, %d, expected 2, 2", what, t.sources[0],
                                                         t.sources[1]);
    if (count_of(err, "warning") != 1 || !strstr(err, warn_names) || !strstr(err, warn_says) ||
        !strstr(err, "memory only"))
        fail_msg("%s: expected one warning naming '%s' and saying '%s'; stderr: '%s'", what, warn_names, warn_says,
                 err);
    if (!now || now_n != pn || memcmp(now, planted, pn)) fail_msg("%s: the planted entry was replaced", what);
    free(now);
    free(err);
}

enum { PLANT_OWNER, PLANT_MODE, PLANT_SYMLINK, PLANT_DIR_0777, PLANT_ENV_DIR, PLANT_CASES };
static const char *const plant_name[PLANT_CASES] = {"entry of another owner", "entry mode 0666", "symlink entry",
                                                    "folder mode 0777", "FA4GEN_CACHE_DIR made by another user"};

static void plant_case(int c)
{
    char *dir = temp_dir("fa4trust-plant"), *elsewhere = temp_dir("fa4trust-else");
    void *genuine;
    size_t gn, fn;
    char entry[1024], target[1100];
    fill(dir, &genuine, &gn, entry, sizeof entry);
    unsigned char *forged = forge(entry, &fn);
    const char *names = entry, *says = "";
    switch (c) {
    case PLANT_OWNER:
        write_file(entry, forged, fn, 0644);
        assert_int_equal(chown(entry, NOBODY, NOBODY), 0);
        says = "owned by another user";
        break;
    case PLANT_MODE:
        write_file(entry, forged, fn, 0666);
        says = "writable by group or others";
        break;
    case PLANT_SYMLINK:
        snprintf(target, sizeof target, "%s/real.cubin", elsewhere);
        write_file(target, forged, fn, 0600);
        assert_int_equal(unlink(entry), 0);
        assert_int_equal(symlink(target, entry), 0);
        says = "symbolic link";
        break;
    case PLANT_DIR_0777:
        write_file(entry, forged, fn, 0600);
        assert_int_equal(chmod(dir, 0777), 0);
        names = dir, says = "writable by group or others";
        break;
    default: /* the attacker made the folder first and filled it */
        write_file(entry, forged, fn, 0644);
        assert_int_equal(chown(entry, NOBODY, NOBODY), 0);
        assert_int_equal(chmod(dir, 0755), 0);
        assert_int_equal(chown(dir, NOBODY, NOBODY), 0);
        setenv("FA4GEN_CACHE_DIR", dir, 1);
        names = dir, says = "owned by another user";
        break;
    }
    expect_refused(plant_name[c], c == PLANT_ENV_DIR ? NULL : dir, genuine, gn, entry, forged, fn, names, says);
    unsetenv("FA4GEN_CACHE_DIR");
    free(forged);
    free(genuine);
    remove_tree(dir), remove_tree(elsewhere);
    free(dir), free(elsewhere);
}

/* Cases of another owner need root, which plays uid 65534. */
static void planted(int c, int needs_root)
{
    if (!have_ptxas() || (needs_root && geteuid() != 0)) skip();
    plant_case(c);
}

static void test_planted_owner(void **state) { (void)state; planted(PLANT_OWNER, 1); }
static void test_planted_mode(void **state) { (void)state; planted(PLANT_MODE, 0); }
static void test_planted_symlink(void **state) { (void)state; planted(PLANT_SYMLINK, 0); }
static void test_planted_dir_0777(void **state) { (void)state; planted(PLANT_DIR_0777, 0); }
static void test_planted_env_dir(void **state) { (void)state; planted(PLANT_ENV_DIR, 1); }

/* One flipped byte, in the payload and then in the stored checksum: a miss without a warning
 * (corruption is ours to repair), the cubin rebuilt, the entry rewritten whole. */
static void test_corrupt_byte(void **state)
{
    (void)state;
    if (!have_ptxas()) skip();
    for (int where = 0; where < 2; where++) {
        char *dir = temp_dir("fa4trust-corrupt");
        void *genuine;
        size_t gn, n = 0;
        char entry[1024];
        fill(dir, &genuine, &gn, entry, sizeof entry);
        unsigned char *f = (unsigned char *)read_file(entry, &n);
        assert_int_equal(get32(f + 8), 2); /* format 2: the SHA-256 at bytes 32..63 */
        f[where ? 40 : n - 100] ^= 0x01;
        write_file(entry, f, n, 0600);
        Twice t = {make_ctx(dir, 1), genuine, gn, {0, 0}, {0, 0}};
        char *err = capture_stderr(compile_twice, &t);
        fa4_destroy(t.ctx);
        if (t.sources[0] != 2 || t.sources[1] != 1 || !t.same[0] || !t.same[1] || err[0])
            fail_msg("%s flipped: sources %d %d (want 2 then 1), genuine %d %d; stderr '%s'",
                     where ? "a checksum byte" : "a payload byte", t.sources[0], t.sources[1], t.same[0], t.same[1],
                     err);
        free(err);
        free(f);
        free(genuine);
        remove_tree(dir);
        free(dir);
    }
}

/* An entry written before format 2 (FNV-1a 64 checksum): a miss, rebuilt and rewritten. */
static void test_old_format(void **state)
{
    (void)state;
    if (!have_ptxas()) skip();
    char *dir = temp_dir("fa4trust-v1");
    void *genuine;
    size_t gn, n = 0;
    char entry[1024];
    fill(dir, &genuine, &gn, entry, sizeof entry);
    unsigned char *f = (unsigned char *)read_file(entry, &n);
    uint32_t key_len = get32(f + 12);
    /* the same key and cubin in format 1: a 40-byte header ending in the payload's FNV-1a 64 */
    size_t v1_n = 40 + key_len + gn;
    unsigned char *v1 = malloc(v1_n);
    memcpy(v1, f, 32);
    v1[8] = 1;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < gn; i++) h = (h ^ ((unsigned char *)genuine)[i]) * 0x100000001b3ull;
    put64(v1 + 32, h);
    memcpy(v1 + 40, f + 64, key_len + gn);
    write_file(entry, v1, v1_n, 0600);
    Twice t = {make_ctx(dir, 1), genuine, gn, {0, 0}, {0, 0}};
    char *err = capture_stderr(compile_twice, &t);
    fa4_destroy(t.ctx);
    assert_int_equal(t.sources[0], 2);
    assert_int_equal(t.sources[1], 1);
    assert_true(t.same[0] && t.same[1]);
    assert_string_equal(err, "");
    free(f);
    f = (unsigned char *)read_file(entry, &n);
    assert_int_equal(get32(f + 8), 2);
    free(err), free(f), free(v1), free(genuine);
    remove_tree(dir);
    free(dir);
}

/* ---------------------------------------------------------------- score_mod identity */

/* The pair collides in mod= (the config word, FNV-1a 64), but the disk key's user-code line
 * names each source's SHA-256, so their cubins are two entries. (The memory cache compares the
 * whole source: tests/unit/test_launch.c runs the pair end to end.) */
static void test_score_mod_disk_key(void **state)
{
    (void)state;
    assert_true(score_mod_hash(FNV_COLLISION_A) == FNV_COLLISION_HASH);
    assert_true(score_mod_hash(FNV_COLLISION_B) == FNV_COLLISION_HASH);
    fa4_ctx *ctx = make_ctx(NULL, 0);
    Config c;
    config_init(&c);
    c.score_mod = FNV_COLLISION_HASH;
    RtMod a, b;
    fa4_status s = rt_mod_prepare(ctx, &c, FNV_COLLISION_A, &a);
    if (s == FA4_ERR_UNSUPPORTED) { /* no NVRTC on this machine */
        fa4_destroy(ctx);
        skip();
    }
    assert_int_equal(s, FA4_OK);
    assert_int_equal(rt_mod_prepare(ctx, &c, FNV_COLLISION_B, &b), FA4_OK);
    print_message("user_code A: %s\nuser_code B: %s\n", a.user_code, b.user_code);
    if (!strcmp(a.user_code, b.user_code)) fail_msg("two sources share the disk key line '%s'", a.user_code);
    unsigned char d[SHA256_BYTES];
    char hex[SHA256_HEX];
    sha256(FNV_COLLISION_A, strlen(FNV_COLLISION_A), d);
    sha256_hex(d, hex);
    if (!strstr(a.user_code, hex)) fail_msg("user_code '%s' does not name the source's SHA-256 %s", a.user_code, hex);
    fa4_destroy(ctx);
}

int main(void)
{
    /* these cases read stderr for the cache's warnings; the first compile's notice (api.c) is not theirs */
    setenv("FA4GEN_LOG", "0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),   cmocka_unit_test(test_jit_race),
        cmocka_unit_test(test_planted_owner),    cmocka_unit_test(test_planted_mode),
        cmocka_unit_test(test_planted_symlink),  cmocka_unit_test(test_planted_dir_0777),
        cmocka_unit_test(test_planted_env_dir),  cmocka_unit_test(test_corrupt_byte),
        cmocka_unit_test(test_old_format),       cmocka_unit_test(test_score_mod_disk_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
