# tests/sim/fence_equiv.sh - sourced by tests/sim/mutants.sh: the fence deletions the PTX ISA makes
# harmless (equivalent mutants), each with the reason; filled from the analysis of each survivor.
# Indices count the fence's lines in the kernel from the top (fence_mutants); a generator change that moves
# fences shows as a new survivor or as an equivalent that is caught, and this list is then redone.
#
# sm_100a MHA, one CTA (kernel 1)
#   1: the prologue's after_thread_sync after bar.sync 0: the MMA warp allocated TMEM itself, and every other
#      role executes its own after_thread_sync (after its first wait) before its first tcgen05 op, which orders
#      it after that bar.sync too
equivalent del_after_k1_1 "each role's first tcgen05 op follows a later after_thread_sync (or is the allocating warp's)"
#   4, 6: the correction's second after_thread_sync of a block, with no wait or barrier since the first
equivalent del_after_k1_4 "no wait or barrier between the fence before it and this one"
equivalent del_after_k1_6 "no wait or barrier between the fence before it and this one"
#   15: before tcgen05.dealloc, a synchronous tcgen05 instruction: program order puts it after bar.sync
equivalent del_after_k1_15 "tcgen05.dealloc is synchronous: ordered after the barrier by program order"
# sm_100a MHA, CTA pair (kernel 2): the same roles and fences as kernel 1, the same four are redundant
equivalent del_after_k2_1 "each role's first tcgen05 op follows a later after_thread_sync (or is the allocating warp's)"
equivalent del_after_k2_4 "no wait or barrier between the fence before it and this one"
equivalent del_after_k2_6 "no wait or barrier between the fence before it and this one"
equivalent del_after_k2_15 "tcgen05.dealloc is synchronous: ordered after the barrier by program order"
# sm_90a (kernels 9, 14): a wgmma.fence with no access of an accumulator or A-fragment register since the
# previous one (only wgmma.mma_async and descriptor arithmetic between them)
#   kernel 9: 3 and 4 are the mainloop's P V issues (full width, and plan note diag half's half width), each
#   right after the QK issue's fence
equivalent del_wgmma_k9_3 "no accumulator or A register accessed since the previous wgmma.fence"
equivalent del_wgmma_k9_4 "no accumulator or A register accessed since the previous wgmma.fence"
equivalent del_wgmma_k14_2 "no accumulator or A register accessed since the previous wgmma.fence"
equivalent del_wgmma_k14_5 "no accumulator or A register accessed since the previous wgmma.fence"
#   kernel 2, before_thread_sync 9: the correction's, after its last tcgen05.ld of O, before bar.sync 2 (tmem_free).
#   In the pair the MMA warp does nothing with TMEM after that barrier: TMEM is freed after the cluster barrier
#   at the exit, and every thread executes before_thread_sync 10 there before barrier.cluster.arrive.release, so
#   its tcgen05.ld (completed by wait::ld) is ordered before the release the freeing warp acquires (PTX ISA:
#   an async tcgen05 op before a before_thread_sync is ordered before every later execution-ordering op)
equivalent del_before_k2_9 "the same thread's before_thread_sync at the exit orders its O loads before the cluster barrier the dealloc follows"
#   10: the exit's fence before barrier.cluster.arrive: each thread's async tcgen05 ops are already ordered before
#   a release the freeing warp acquires (softmax: wait::st/ld, before_thread_sync, arrive on bar_l, which the
#   correction waited for; correction: fence 9 and bar.sync 2 with the freeing warp; the MMAs: their commits,
#   which the correction waited for), and nothing after bar.sync 2 touches TMEM before the dealloc
equivalent del_before_k2_10 "every thread's tcgen05 ops are ordered before bar.sync 2 by earlier fences and releases; the dealloc follows it"
# sparse MLA sm_100a, head-128 pair (kernel 4) and head-64 (kernel 15)
#   1: the prologue's after_thread_sync after the cluster barrier: the load warp issues no tcgen05 op, the MMA
#      warp's first one (QK) follows after_thread_sync 2 and the softmax's first (S ld) its own fence after its
#      first wait, which order them after that barrier too (the same as kernel 1's)
equivalent del_after_k4_1 "each role's first tcgen05 op follows a later after_thread_sync (or is the allocating warp's)"
equivalent del_after_k15_1 "each role's first tcgen05 op follows a later after_thread_sync (or is the allocating warp's)"
#   2: the MMA warp's fence after the block's K wait, before QK into S_b. QK writes S_b, which the softmax last read
#      (S ld) and wrote (P st) two blocks before, ordered before its P arrival (wait::ld / ::st, before_thread_sync);
#      the MMA warp acquired that arrival before the previous PV and executed after_thread_sync then, and that
#      fence orders every later async tcgen05 op of the thread, this QK included. K and Q are TMA writes in
#      shared memory published by the mbarrier wait itself, as in every sm_100a kernel's first QK (no
#      after_thread_sync between the K wait and that MMA); the ISA's tcgen05.fence text speaks of ordering among
#      tcgen05 operations, and the simulator reads it so (a tcgen05.mma's shared-memory operands are checked
#      against the thread's waits, its TMEM against its after_thread_sync)
equivalent del_after_k4_2 "S_b's last TMEM accesses by other threads were acquired before the previous PV's after_thread_sync"
equivalent del_after_k15_2 "S_b's last TMEM accesses by other threads were acquired before the previous PV's after_thread_sync"
#   kernel 4's 11 and kernel 15's 6: before tcgen05.dealloc, a synchronous tcgen05 instruction
equivalent del_after_k4_11 "tcgen05.dealloc is synchronous: ordered after the barrier by program order"
equivalent del_after_k15_6 "tcgen05.dealloc is synchronous: ordered after the barrier by program order"
# (Kernel 2's before_thread_sync 2 and 3, kernel 4's after_thread_sync 7 and 9 and kernel 15's 8 and 10 guard paths
# the earlier cases never ran -- the pair's unmasked blocks, the lazy O rescale, the head-64 kernel's third block --
# and are caught on the cases above. bar_p_full initialised with 127 arrivals (t3_bar_count_lo) is caught as an
# arrival not ordered after the previous phase's arrivals.)
