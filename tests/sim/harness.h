/* harness.h - what the simulator's case runners (sim_mha, sim_mla) share: the
 * driver opened with dlopen (so one binary runs on the CPU simulator and on a
 * GPU), the case-word tokenizer and value parsers, the input RNG, and the
 * self-test tally. Each runner keeps its own case keys, inputs and checks. */
#ifndef FA4SIM_HARNESS_H
#define FA4SIM_HARNESS_H

#include <cuda.h> /* types only: every driver call goes through the table below */
#include <stddef.h>
#include <stdint.h>

enum { WORD_MAX = 256 }; /* one key=value word of a case */

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

/* --self-test's tally: check() prints each failure. */
typedef struct Checks {
    int run, failed;
} Checks;
void check(Checks *k, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
