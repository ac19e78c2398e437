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
equivalent del_wgmma_k9_3 "no accumulator or A register accessed since the previous wgmma.fence"
equivalent del_wgmma_k14_2 "no accumulator or A register accessed since the previous wgmma.fence"
equivalent del_wgmma_k14_5 "no accumulator or A register accessed since the previous wgmma.fence"
# Known survivors, not yet explained (harmful or equivalent: to be analysed; the simulator passes them):
#   kernel 2's softmax before_thread_sync 2 (row factor), 3 (P, unmasked), 9, 10: in the pair the reader may
#   acquire a later release of the same thread (after a later fence) before it reads, which the ISA
#   accepts; whether every schedule does is not shown
for i in 2 3 9 10; do survivor "del_before_k2_$i" "not analysed: a later fence and release of the same thread may cover it"; done
#   sparse MLA sm_100a (kernels 4 and 15): five after_thread_sync each
for i in 1 2 7 9 11; do survivor "del_after_k4_$i" "not analysed (sparse MLA head-128)"; done
for i in 1 2 6 8 10; do survivor "del_after_k15_$i" "not analysed (sparse MLA head-64)"; done
# item 3: bar_p_full initialised with 127 of its 128 arrivals: each phase completes one arrival early and the
# extra arrival opens the next; not caught with seed 1 (not analysed further: the simulator reports an
# over-arrival only past the count, and an early phase only when the late thread's P is read unacquired)
survivor t3_bar_count_lo "one arrival too many per phase: phases complete early; not caught on this schedule"
