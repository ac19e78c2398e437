/* sim.h - the simulator core: one kernel launch executed on the CPU.
 *
 * A launch runs cluster by cluster. Inside a cluster every thread of every CTA
 * is an interpreter context (registers, pc, state); a seeded scheduler picks
 * warps in random order and runs each for a random number of instructions, so
 * no interleaving is favoured. Warp collectives (.sync.aligned, shfl, vote,
 * elect) execute when every live thread of the warp has reached them.
 *
 * Asynchronous units (TMA, tcgen05.mma/cp and the commit that follows them,
 * wgmma, bulk stores) are queued at issue and complete later, at a point the
 * scheduler picks; tcgen05 ops of a CTA and wgmma ops of a warpgroup complete
 * in issue order, as the ISA orders them.
 *
 * Hazards are found with clocks: every thread, every mbarrier and every CTA's
 * tcgen05 pipe owns a clock; releases (arrive, bar) and acquires (a wait that
 * succeeds) join vector clocks; every shared-memory word and TMEM cell keeps
 * the clock and epoch of its last write. A read whose reader has not acquired
 * that write is a hazard, and so is a write over memory an in-flight async
 * unit still reads or writes. See hazard() in sim.c for the list.
 */
#ifndef FA4SIM_SIM_H
#define FA4SIM_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "ptx.h"

/* Global memory: the driver front's allocations, checked on every access. */
typedef struct SimAlloc { uint64_t base, size; } SimAlloc;

typedef struct SimGlobal {
    SimAlloc *allocs;
    int nallocs;
} SimGlobal;

/* A late write (cuda.c, fa4sim_late_write): memory holds its new bytes from the launch's start; a
 * thread's global load (ld, not an async copy) before it passes griddepcontrol.wait reads the old
 * bytes it replaced. A dependent grid must see the previous grid's writes after its wait and may miss
 * them before it: the simulator takes the latter, always. */
typedef struct SimLate {
    uint64_t dst;
    size_t n;
    const uint8_t *old;
    const struct SimLate *next;
} SimLate;

typedef struct SimLaunch {
    const PtxModule *mod;
    const PtxEntry *entry;
    unsigned grid[3], block[3], cluster[3];
    unsigned dyn_smem;
    const void *params;   /* entry->param_bytes bytes, laid out as the .param list */
    SimGlobal *global;
    uint64_t seed;
    int cc_major;         /* 9 or 10: which instruction families are legal */
    int verbose;
    const SimLate *late;  /* NULL: none */
    /* the timing mode (timing.h): NULL runs the functional simulator's random scheduler; else a window
     * of clusters runs under the clock and tout receives the predicted time */
    const struct TimingLaunch *timing;
    struct TimingOut *tout;
    /* clusters resident at once (FA4SIM_RESIDENT; 0 or 1: one at a time, in linear order) */
    int resident;
    /* the stream's previous grid still runs for this launch's first prev_grid_steps scheduler rounds
     * (FA4SIM_PREV_GRID; functional mode): griddepcontrol.wait holds its thread until then, as a dependent
     * launched early waits on a device */
    uint64_t prev_grid_steps;
    /* launched with programmatic stream serialization (cuLaunchKernelEx's attribute): the timing mode charges the
     * stream's gap after a previous kernel as gap_pdl_us instead of launch_us */
    int pdl;
} SimLaunch;

enum { SIM_OK = 0, SIM_FAULT = 1, SIM_HAZARD = 2, SIM_DEADLOCK = 3, SIM_UNSUPPORTED = 4 };

/* Runs the launch. Returns SIM_OK, or a failure code with its report (PTX
 * line, thread, what happened; for a deadlock every thread's position) in
 * report, a malloc'ed string the caller frees. */
int sim_run(const SimLaunch *l, char **report);

/* Global-memory access for the units: 0, or -1 with a message. */
int sim_global_check(const SimGlobal *g, uint64_t addr, uint64_t n);

#endif
