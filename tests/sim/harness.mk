# tests/sim/harness.mk - the simulator's test harness: build/sim/sim_mha.
# Included by the top-level Makefile. sim_mha runs MHA cases through libfa4rt
# and checks them against a host reference (tests/sim/ref_mha.c); it dlopens
# libcuda.so.1, so the same binary runs on the CPU simulator
# (LD_LIBRARY_PATH=build/sim) and on a GPU.
#   make build/sim/sim_mha         build it
#   make sim-selftest              the reference's and the parser's own checks (no GPU, no simulator)
#   make sim-plan                  every case of tests/sim/cases_*.txt mapped to its kernel config (no GPU)
SIM_HARNESS_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
                      -Wno-missing-field-initializers -O2 -g -Iruntime -Igen -Ibuild -I/usr/local/cuda/include
SIM_HARNESS_SRC    := tests/sim/sim_mha.c tests/sim/ref_mha.c
SIM_HARNESS_HDRS   := tests/sim/ref_mha.h runtime/fa4.h

build/sim/sim_mha: $(SIM_HARNESS_SRC) $(SIM_HARNESS_HDRS) build/libfa4rt.a
	@mkdir -p $(dir $@)
	$(CC) $(SIM_HARNESS_CFLAGS) $(SIM_HARNESS_SRC) -o $@ build/libfa4rt.a -ldl -lpthread -lm

.PHONY: sim-selftest sim-plan
sim-selftest: build/sim/sim_mha
	build/sim/sim_mha --self-test

sim-plan: build/sim/sim_mha
	build/sim/sim_mha --plan --quiet --cases tests/sim/cases_sm100.txt
	build/sim/sim_mha --plan --quiet --cases tests/sim/cases_sm90.txt
