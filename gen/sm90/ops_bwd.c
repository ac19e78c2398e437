/* sm90/ops_bwd.c - the sm_90a wgmma form the backward adds (see ops_bwd.h): SS with imm-trans-a and
 * imm-trans-b, the transposes 16-bit inputs allow for operands in shared memory (PTX ISA, wgmma.mma_async:
 * "matrices A and B ... K-major or MN-major", transpose only for .f16/.bf16). */
#include <stdio.h>

#include "../ops_bwd.h"

void op_wgmma_ss_t(Emit *e, int n, DType dt, Reg acc, Reg adesc, Reg bdesc, int scale_d, int tnsp_a, int tnsp_b)
{
    char list[2048];
    const char *t = dt == DT_FP16 ? "f16" : "bf16";
    REG_WANT(e, acc, RT_F32);
    REG_WANT(e, adesc, RT_B64);
    REG_WANT(e, bdesc, RT_B64);
    reg_list(e, list, sizeof list, acc, 0, n / 2);
    emit(e, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s %s, %s, %s, %d, 1, 1, %d, %d;", n, t, t, list,
         R(e, adesc), R(e, bdesc), scale_d, tnsp_a, tnsp_b);
}
