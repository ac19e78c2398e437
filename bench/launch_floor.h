/* launch_floor.h - record a libfa4rt context's kernel launches and replay them bare (bench/launch_floor.c). */
#ifndef FA4_BENCH_LAUNCH_FLOOR_H
#define FA4_BENCH_LAUNCH_FLOOR_H

#include <stddef.h>

/* Start recording the launches of ctx (a fa4_ctx *); -1 when ctx is NULL, another is recorded, or no driver. */
int lf_begin(void *ctx);
/* Stop; the number of launches recorded, or -1 when one could not be kept (too many, an unknown kernel). */
int lf_end(void *ctx);
/* Launch the recorded kernels again on stream (a CUstream), bare; 0 or the first CUresult that failed. */
int lf_replay(void *stream);
/* "cuLaunchKernelEx grid 8 block 384 smem 99328 cluster pdl; ..." into buf; returns the launches recorded. */
int lf_describe(char *buf, size_t n);

#endif
