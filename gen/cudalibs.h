/* cudalibs.h - where the CUDA libraries fa4gen opens at run time come from: NVRTC (a
 * score_mod's CUDA C, in the generator) and nvJitLink (PTX -> cubin, in the runtime). One
 * search, shared by both, so the CLI, libfa4rt and the Python package agree on it.
 *
 * The order, first hit wins (explicit before implicit):
 *   1. FA4GEN_NVRTC / FA4GEN_NVJITLINK: the path of the library file. When set, it is the
 *      only candidate: a file that does not load is an error, never a silent fallback.
 *   2. a copy the process has already loaded (by soname): a framework that loaded its own
 *      (torch loads nvJitLink) chose a CUDA major; a second, different copy would cost memory
 *      and could disagree with it.
 *   3. FA4GEN_CUDA_LIB_DIRS: absolute directories, ':'-separated, in order. The Python package
 *      sets it to the nvidia-* wheels' lib/ folders of its site-packages (CUDA 13: nvidia/cu13/lib;
 *      CUDA 12: nvidia/cuda_nvrtc/lib, nvidia/nvjitlink/lib); a C program may set it too.
 *   4. the dynamic loader's path by soname (LD_LIBRARY_PATH, ld.so.cache).
 *   5. the toolkit: $CUDA_HOME/lib64, then /usr/local/cuda/lib64.
 * Sonames, newest major first: lib<name>.so.13, .so.12, then the unversioned .so (a toolkit's
 * development link). Relative paths are refused (never relative to the working directory).
 * Libraries stay mapped (RTLD_NODELETE), as jit.c and score_mod.c always kept them.
 *
 * FA4GEN_LOG=1 (or the caller's verbose flag) prints which file was used and which step found
 * it, once per library per process (again only when a later search finds another file).
 */
#ifndef FA4GEN_CUDALIBS_H
#define FA4GEN_CUDALIBS_H

#include <stddef.h>

typedef enum { CUDALIB_NVRTC, CUDALIB_NVJITLINK, CUDALIB_COUNT } CudaLib;

typedef struct CudaLibFound {
    char path[1024];    /* the file loaded (the loader's name for it) */
    const char *source; /* the step that found it: "FA4GEN_NVRTC", "already loaded", "FA4GEN_CUDA_LIB_DIRS",
                           "the loader's path", "$CUDA_HOME", "/usr/local/cuda" */
} CudaLibFound;

/* The library's name for messages: "NVRTC", "nvJitLink". */
const char *cudalib_name(CudaLib which);

/* dlopen the library (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) by the order above. found may be
 * NULL. NULL when no step finds it, with err saying what was tried (one sentence, no trailing
 * period, so callers can add theirs). verbose: log the choice as FA4GEN_LOG=1 does. */
void *cudalib_open(CudaLib which, int verbose, CudaLibFound *found, char *err, size_t en);

#endif
