/* harness.h - what the simulator's case runners (sim_mha, sim_mla, sim_varlen, sim_bwd) share: the
 * driver opened with dlopen (so one binary runs on the CPU simulator and on a
 * GPU), the case-word tokenizer and value parsers, the case loop and its
 * tally, the input RNG, and the self-test tally. Each runner keeps its own
 * case keys, inputs and checks. */
#ifndef FA4SIM_HARNESS_H
#define FA4SIM_HARNESS_H

#include <cuda.h> /* types only: every driver call goes through the table below */
#include <stddef.h>
#include <stdint.h>

#include <stdio.h>

enum {
    WORD_MAX = 256,        /* one key=value word of a case */
    WORDS_MAX = 32,        /* words in one case */
    LINE_MAX_CHARS = 2048, /* one line of a cases file */
    KEYS_MAX = 64,         /* keys of a runner's case syntax */
};

int errf(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The driver entry points the runners call, resolved from libcuda.so.1. */
typedef struct Cu {
    void *lib;
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*CtxSynchronize)(void);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUdevice dev;
    CUcontext ctx;
} Cu;
/* dlopen, resolve every entry, init device 0 and make its primary context current. */
int cu_open(Cu *cu, char *err, size_t n);
const char *cu_error(const Cu *cu, CUresult r);

/* A case line's words: blanks separate, '#' ends the line, double quotes group (and are dropped). */
int split_words(const char *s, char words[][WORD_MAX], int max, char *err, size_t n);
/* key=v: an integer in [lo, hi] / one of names (its index in *out); else a message naming key. */
int word_int(const char *key, const char *v, long lo, long hi, int *out, char *err, size_t n);
int word_choice(const char *key, const char *v, const char *const *names, int count, int *out, char *err, size_t n);
/* config="...": kernel config words (lower case, no quotes) into dst with single spaces. */
int word_config(const char *v, char *dst, size_t cap, char *err, size_t n);

uint64_t splitmix64(uint64_t *s);
uint64_t fnv1a(const void *data, size_t n, uint64_t h);
double now_s(void);
/* |a - b|, 0 for equal values (infinities included) and for two NaNs, inf for one NaN. */
double abs_diff(double a, double b);

/* A runner's case syntax: its key names (each given at most once), the size of its Case, and the
 * functions that reset a case, set key k from a value, and check a finished one (seen[k]: key k was
 * given). prog starts every message; usage prints the runner's usage; has_plan: --plan is an option. */
typedef struct CaseSyntax {
    const char *prog;
    const char *const *keys;
    int nkeys;
    size_t size;
    void (*defaults)(void *c);
    int (*set_key)(void *c, int k, const char *v, char *err, size_t n);
    int (*finish)(void *c, const int *seen, char *err, size_t n);
    void (*usage)(FILE *f);
    int has_plan;
} CaseSyntax;
typedef struct CaseList {
    void *v; /* n cases of the syntax's size */
    int n, cap;
} CaseList;
/* The runner's options (common to the runners; --plan only where has_plan). */
typedef struct Opts {
    uint64_t seed;
    const char *cases_file, *dump_dir, *compare_dir;
    int quiet, self_test, plan, no_skip;
} Opts;

int case_key(const CaseSyntax *sx, const char *key); /* index of key, or -1 */
/* A case from its words (key=value); 0, or -1 with a message in err naming the word. */
int case_words(const CaseSyntax *sx, char words[][WORD_MAX], int count, void *c, char *err, size_t n);
/* A cases-file line: 1 with a case, 0 for a blank or comment line, -1 with a message. */
int case_line(const CaseSyntax *sx, const char *line, void *c, char *err, size_t n);
int case_list_add(const CaseSyntax *sx, CaseList *l, const void *c);
/* Every case of a file (each bad line reported, then -1); a file with none is an error. */
int case_load(const CaseSyntax *sx, const char *path, CaseList *l);
/* argv: options into o, one case's words (key=value, --key=value, --key value) into words; 0 or 2. */
int case_argv(const CaseSyntax *sx, int argc, char **argv, Opts *o, char words[][WORD_MAX], int *nwords);
/* The cases to run: the file's, or the one the words give. */
int case_collect(const CaseSyntax *sx, const Opts *o, char words[][WORD_MAX], int nwords, CaseList *l);
int parse_u64(const char *v, uint64_t *out); /* a decimal unsigned integer, nothing else */

/* A runner's cases and what it does with them (sim_mha, sim_mla): case_main parses argv (case_argv), runs
 * self_test for --self-test, collects the cases (case_collect), then runs plan for --plan or every case in
 * order: one line "<prog>: N cases, seed S" (unless --quiet), run(env, case) for each (it runs and reports
 * the case: its verdict, and *compared = 1 when it was compared with a stored run, -1 when none was stored),
 * done(env, tally) after the last (e.g. the compare line, the contexts freed), and the closing line
 * "<prog>: N passed, N failed, N skipped". The driver is opened into *cu first (2 when it cannot be).
 * Returns the process's exit status: 0 every case passed, 1 one failed, 2 usage or setup. */
typedef enum { CASE_PASS, CASE_FAIL, CASE_SKIP } CaseVerdict;
typedef struct Tally {
    int pass, fail, skip, compared, missing;
} Tally;
typedef struct CaseRunner {
    const CaseSyntax *sx;
    int (*self_test)(void);
    int (*plan)(void *env, const CaseList *l); /* NULL: no --plan */
    CaseVerdict (*run)(void *env, const void *c, int *compared);
    void (*done)(void *env, const Tally *t);
} CaseRunner;
int case_main(const CaseRunner *r, void *env, Cu *cu, Opts *o, int argc, char **argv);

/* The case lines of the simpler runners (sim_varlen, sim_bwd: one key=value case a line): those of a file,
 * or (path NULL) the one line words holds. case_lines_next gives each with its newline and any '#' comment
 * cut, blank lines skipped: 1 with a line, 0 at the end. case_lines_open: -1 when the file cannot be read. */
typedef struct CaseLines {
    FILE *f;
    const char *words; /* path NULL: the one case, NULL once given */
} CaseLines;
int case_lines_open(CaseLines *cl, const char *path, const char *words);
int case_lines_next(CaseLines *cl, char *line, size_t n);
void case_lines_close(CaseLines *cl);
/* The next key=value word of a case line (*cursor walks the line, which it cuts into words): 1 with *key and
 * *val, 0 at the end, -1 with a message for a word without '='. */
int kv_next(char **cursor, char **key, char **val, char *err, size_t n);

/* --self-test's tally: check() prints each failure. */
typedef struct Checks {
    int run, failed;
} Checks;
void check(Checks *k, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
