/* cuda_errors.h - the driver's error names and strings, as cuGetErrorName / cuGetErrorString give them,
 * for the two stand-in drivers: the fake (tests/unit/fake_cuda.c) and the simulator's
 * (tests/sim/cuda.c). One table, so both name every code either returns the same way. */
#ifndef FA4_TEST_CUDA_ERRORS_H
#define FA4_TEST_CUDA_ERRORS_H

#include <cuda.h>
#include <stddef.h>

typedef struct { CUresult r; const char *name, *text; } CuErrName;

static const CuErrName cu_err_names[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on "
                                                                   "the device"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for "
                                                                               "launch"},
    {CUDA_ERROR_INVALID_CLUSTER_SIZE, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "invalid cluster size"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

/* The row of r, or NULL (the drivers then answer CUDA_ERROR_INVALID_VALUE and NULL, as the real one). */
static inline const CuErrName *cu_err_find(CUresult r)
{
    for (size_t i = 0; i < sizeof cu_err_names / sizeof cu_err_names[0]; i++)
        if (cu_err_names[i].r == r) return &cu_err_names[i];
    return NULL;
}

/* cuGetErrorName (name = 1) and cuGetErrorString (name = 0) over the table. */
static inline CUresult cu_err_lookup(CUresult r, const char **s, int name)
{
    const CuErrName *e = cu_err_find(r);
    if (s) *s = e ? (name ? e->name : e->text) : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#endif
