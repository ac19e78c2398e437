# tests/sim/harness.mk - the simulator's test harnesses: build/sim/sim_mha, sim_mla, sim_varlen and sim_bwd.
# Included by the top-level Makefile. sim_mha runs MHA cases through libfa4rt
# and checks them against a host reference (tests/sim/ref_mha.c); sim_mla does
# the same for sparse MLA prefill (fa4_mla_sparse_fwd, tests/sim/ref_mla.c).
# Both dlopen libcuda.so.1, so the same binary runs on the CPU simulator
# (LD_LIBRARY_PATH=build/sim) and on a GPU.
#   make build/sim/sim_mha         build it
#   make sim-selftest              the reference's and the parser's own checks (no GPU, no simulator)
#   make sim-plan                  every case of tests/sim/cases_*.txt mapped to its kernel config (no GPU)
#   make build/sim/sim_mla         build it
#   make sim-mla-selftest          sim_mla's parser, input generator and checks (no GPU, no simulator)
#   make sim-mla-test              tests/sim/cases_mla_sm90.txt on the simulated cc 9.0 device
#                                  (FA4SIM_SEED picks the scheduler seed)
SIM_HARNESS_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
                      -Wno-missing-field-initializers $(SIM_OPT) -g -Iruntime -Igen -Ibuild -I/usr/local/cuda/include
SIM_HARNESS_SRC    := tests/sim/sim_mha.c tests/sim/ref_mha.c tests/sim/harness.c
SIM_HARNESS_HDRS   := tests/sim/ref_mha.h tests/sim/harness.h runtime/fa4.h
SIM_MLA_SRC        := tests/sim/sim_mla.c tests/sim/ref_mla.c tests/sim/harness.c
SIM_MLA_HDRS       := tests/sim/ref_mla.h tests/sim/harness.h runtime/fa4.h

build/sim/sim_mha: $(SIM_HARNESS_SRC) $(SIM_HARNESS_HDRS) build/libfa4rt.a
	@mkdir -p $(dir $@)
	$(CC) $(SIM_HARNESS_CFLAGS) $(SIM_HARNESS_SRC) -o $@ build/libfa4rt.a -ldl -lpthread -lm

build/sim/sim_mla: $(SIM_MLA_SRC) $(SIM_MLA_HDRS) build/libfa4rt.a
	@mkdir -p $(dir $@)
	$(CC) $(SIM_HARNESS_CFLAGS) $(SIM_MLA_SRC) -o $@ build/libfa4rt.a -ldl -lpthread -lm

.PHONY: sim-selftest sim-plan sim-mla-selftest sim-mla-test
sim-selftest: build/sim/sim_mha
	build/sim/sim_mha --self-test

sim-plan: build/sim/sim_mha
	build/sim/sim_mha --plan --quiet --cases tests/sim/cases_sm100.txt
	build/sim/sim_mha --plan --quiet --cases tests/sim/cases_sm90.txt

sim-mla-selftest: build/sim/sim_mla
	build/sim/sim_mla --self-test

# a fresh kernel cache per run: the simulator gets the PTX of this tree
sim-mla-test: build/sim/libcuda.so.1 build/sim/sim_mla
	@d=$$(mktemp -d) && FA4GEN_COMPILER=driver-ptx FA4GEN_CACHE_DIR=$$d LD_LIBRARY_PATH=$$PWD/build/sim FA4SIM_CC=90 \
	    build/sim/sim_mla --cases tests/sim/cases_mla_sm90.txt; rc=$$?; rm -rf $$d; exit $$rc

# the combine kernel alone (tests/sim/run.sh; tests/gpu/run.sh on the H100)
build/sim/test_combine: tests/sim/test_combine.c runtime/fa4.h build/libfa4rt.a
	@mkdir -p $(dir $@)
	$(CC) $(SIM_HARNESS_CFLAGS) tests/sim/test_combine.c -o $@ build/libfa4rt.a -ldl -lpthread -lm
# the KV-cache append (fa4_kv_append; tests/sim/run.sh, tests/gpu/pyapi.sh on a GPU)
build/sim/test_kv_append: tests/sim/test_kv_append.c runtime/fa4.h build/libfa4rt.a
	@mkdir -p $(dir $@)
	$(CC) $(SIM_HARNESS_CFLAGS) tests/sim/test_kv_append.c -o $@ build/libfa4rt.a -ldl -lpthread -lm
# varlen MHA cases (tests/sim/cases_varlen_sm90.txt): the same binary on the simulator and on a GPU
build/sim/sim_varlen: tests/sim/sim_varlen.c tests/sim/ref_mha.c tests/sim/harness.c tests/sim/ref_mha.h tests/sim/harness.h runtime/fa4.h build/libfa4rt.a
	@mkdir -p $(dir $@)
	$(CC) $(SIM_HARNESS_CFLAGS) tests/sim/sim_varlen.c tests/sim/ref_mha.c tests/sim/harness.c -o $@ build/libfa4rt.a -ldl -lpthread -lm
# the attention backward (fa4_mha_bwd; tests/sim/cases_bwd_sm90.txt): the same binary on the simulator and on a GPU
build/sim/sim_bwd: tests/sim/sim_bwd.c tests/sim/ref_mha_bwd.c tests/sim/ref_mha.c tests/sim/harness.c tests/sim/ref_mha_bwd.h tests/sim/ref_mha.h tests/sim/harness.h runtime/fa4.h build/libfa4rt.a
	@mkdir -p $(dir $@)
	$(CC) $(SIM_HARNESS_CFLAGS) tests/sim/sim_bwd.c tests/sim/ref_mha_bwd.c tests/sim/ref_mha.c tests/sim/harness.c -o $@ build/libfa4rt.a -ldl -lpthread -lm
# one kernel/shape pair timed on a GPU or predicted by the timing mode (tests/sim/timecase.c, TIMING.md)
build/sim/timecase: tests/sim/timecase.c tests/sim/harness.c tests/sim/harness.h runtime/fa4.h build/libfa4rt.a
	@mkdir -p $(dir $@)
	$(CC) $(SIM_HARNESS_CFLAGS) tests/sim/timecase.c tests/sim/harness.c -o $@ build/libfa4rt.a -ldl -lpthread -lm
