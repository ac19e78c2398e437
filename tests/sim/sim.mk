# tests/sim/sim.mk - the simulated GPU: build/sim/libcuda.so.1 (a CUDA driver
# whose device runs PTX on the CPU) and the simulator's own tests.
# Included by the top-level Makefile.
# SIM_OPT: the simulator is built on the machine that runs it (CI, the GPU host), so it may use that CPU's
# instructions: -O3 -march=native ran the heaviest split-KV case in 15.8 s instead of 21.7 (-O2), with
# bit-identical results (-std=c11 keeps -ffp-contract=off: no fused multiply-adds the PTX did not ask for).
SIM_OPT    ?= -O3 -march=native
SIM_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
              -Wno-missing-field-initializers $(SIM_OPT) -g -fPIC -fvisibility=hidden -I$(CUDA_HOME)/include
SIM_CORE   := tests/sim/parse.c tests/sim/alu.c tests/sim/sim.c tests/sim/tc.c tests/sim/tma.c tests/sim/timing.c
SIM_HDRS   := $(wildcard tests/sim/*.h)
SIM_OBJ    := $(SIM_CORE:tests/sim/%.c=build/sim/obj/%.o)
SIMCUDA    := build/sim/libcuda.so.1

build/sim/obj/%.o: tests/sim/%.c $(SIM_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(SIM_CFLAGS) -c $< -o $@

$(SIMCUDA): tests/sim/cuda.c $(SIM_OBJ) $(SIM_HDRS) tests/unit/cuda_errors.h
	@mkdir -p $(dir $@)
	$(CC) $(SIM_CFLAGS) -DFA4SIM_GPU_DIR='"$(CURDIR)/tests/sim/gpus"' -shared -Wl,-soname,libcuda.so.1 tests/sim/cuda.c $(SIM_OBJ) -o $@ -lm -lpthread

include tests/sim/tc.mk

.PHONY: sim-test
sim-test: $(B)/fa4gen $(SIMCUDA) build/sim/sim_mha build/sim/sim_varlen build/sim/sim_bwd build/sim/test_tc build/sim/test_tma build/sim/test_core build/sim/sim_mla \
          build/sim/test_ref_mla build/sim/test_combine build/sim/test_kv_append build/sim/timecase
	@sh tests/sim/run.sh

.PHONY: sim-mutants
sim-mutants: build/fa4gen $(SIMCUDA) build/sim/sim_mha build/sim/sim_mla
	sh tests/sim/mutants.sh

# the core on hand-written PTX (links the simulator's driver itself)
build/sim/test_core: tests/sim/test_core.c $(SIMCUDA)
	$(CC) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -I$(CUDA_HOME)/include $< -o $@ \
	    -Lbuild/sim -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN' -lm

# the sparse MLA host reference (ref_mla.c) and its self-test: plain C, no simulator
REF_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
              -Wno-missing-field-initializers -O2 -g
build/sim/test_ref_mla: tests/sim/test_ref_mla.c tests/sim/ref_mla.c tests/sim/ref_mla.h
	@mkdir -p build/sim
	$(CC) $(REF_CFLAGS) -Itests/sim -o $@ tests/sim/test_ref_mla.c tests/sim/ref_mla.c -lm
