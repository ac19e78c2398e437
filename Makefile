# fa4gen - attention kernel generator (PTX) and its runtime.
#   make demo   generate a kernel, assemble it with ptxas, print its plan
#   make test   build and run every CPU test (installs cmocka when missing and it can); ends with the
#               line 'N passed, N failed' summing every suite (tests/run-suites.sh)
#   make test-quick   unit tests, a sample of each ptxas matrix, one simulator seed on a sample of cases
#   make all    the CLI, libfa4rt (static + shared) and the examples
CUDA_HOME ?= /usr/local/cuda
CC        ?= gcc
PTXAS     ?= $(CUDA_HOME)/bin/ptxas
B         := build

WARN      := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-missing-field-initializers
CFLAGS    ?= -O2 -g
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -fPIC $(WARN) $(CFLAGS) -Igen -Iruntime -I$(B) -I$(CUDA_HOME)/include
LDLIBS_RT := -ldl -lpthread -lm

GEN_SRC   := $(wildcard gen/*.c gen/sm90/*.c gen/sm100/*.c)
# The CLI's own sources (fa4gen links them beside libfa4rt): main.c (dispatch, bundle) and what it links.
CLI_LINK  := gen/aot.c gen/cli_tools.c gen/cli_kernel.c gen/cli_usage.c gen/cli_predict.c
GEN_SRC   := $(filter-out gen/main.c $(CLI_LINK),$(GEN_SRC))
RT_SRC    := $(wildcard runtime/*.c)
GEN_OBJ   := $(GEN_SRC:%.c=$(B)/%.o) $(B)/templates.o
RT_OBJ    := $(RT_SRC:%.c=$(B)/%.o)
HDRS      := $(wildcard gen/*.h gen/sm90/*.h gen/sm100/*.h runtime/*.h)
TEMPLATES := $(wildcard templates/*.ptx)

# test_launch runs against the fake driver (LD_LIBRARY_PATH); the others must see no driver.
UNIT_SRC  := $(filter-out tests/unit/test_launch.c tests/unit/test_bundle.c tests/unit/test_aot.c,$(wildcard tests/unit/test_*.c))
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
FAKECUDA  := $(B)/fakecuda/libcuda.so.1

.PHONY: all demo test test-quick unit install install-test launch-test ptxas-test sass-test sass-tools sim-test clean examples deps-test bundle
all: $(B)/fa4gen $(B)/libfa4rt.a $(B)/libfa4rt.so examples

$(B)/%.o: %.c $(HDRS) | $(B)/templates.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# Fixed PTX fragments become C strings so the CLI is one self-contained file.
$(B)/templates.c $(B)/templates.h &: $(TEMPLATES) templates/embed.sh
	@mkdir -p $(B)
	sh templates/embed.sh $(B) $(TEMPLATES)
$(B)/templates.o: $(B)/templates.c
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# The generator's source id: a hash of everything that shapes its PTX (gen/, templates/). The disk cache
# and AOT bundles key on version + id, so a build with other kernel code never takes this one's cubins.
GEN_ID_SRC := $(sort $(wildcard gen/*.c gen/*.h gen/sm90/* gen/sm100/*)) $(TEMPLATES) templates/embed.sh
$(B)/gen_id.h: $(GEN_ID_SRC)
	@mkdir -p $(B)
	@id=$$(cat $(GEN_ID_SRC) | sha256sum | cut -c1-16); \
	  echo "#define FA4GEN_SOURCE_ID \"$$id\"" > $@.tmp.h; \
	  if cmp -s $@.tmp.h $@; then rm -f $@.tmp.h; else mv $@.tmp.h $@; fi
$(B)/gen/api.o: $(B)/gen_id.h

$(B)/libfa4gen.a: $(GEN_OBJ)
	rm -f $@ && ar rcs $@ $^
$(B)/libfa4rt.a: $(RT_OBJ) $(GEN_OBJ)
	rm -f $@ && ar rcs $@ $^
# The release (fa4.h's FA4_VERSION_STRING) names the shared library and its soname.
VERSION   := $(shell sed -n 's/^\#define FA4_VERSION_STRING "\(.*\)"/\1/p' runtime/fa4.h)
SOMAJOR   := $(firstword $(subst ., ,$(VERSION)))
$(B)/libfa4rt.so.$(VERSION): $(RT_OBJ) $(GEN_OBJ)
	$(CC) -shared -Wl,-soname,libfa4rt.so.$(SOMAJOR) -o $@ $^ $(LDLIBS_RT)
$(B)/libfa4rt.so: $(B)/libfa4rt.so.$(VERSION)
	ln -sf libfa4rt.so.$(VERSION) $(B)/libfa4rt.so.$(SOMAJOR)
	ln -sf libfa4rt.so.$(VERSION) $@
# The CLI links libfa4rt for `configs` and `cache` (gen/cli_tools.c); the runtime opens the CUDA driver only
# when asked, so the CLI still runs without one.
$(B)/fa4gen: $(B)/gen/main.o $(CLI_LINK:%.c=$(B)/%.o) $(B)/libfa4rt.a
	$(CC) -o $@ $^ $(LDLIBS_RT)

# examples/ has its own Makefile (pkg-config against an install); here it builds against this tree.
examples: $(B)/fa4gen $(B)/libfa4rt.a
	$(MAKE) -C examples CC="$(CC)" O=$(abspath $(B))/examples FA4GEN=$(abspath $(B))/fa4gen \
	    FA4_CFLAGS=-I$(abspath runtime) FA4_LIBS="$(abspath $(B))/libfa4rt.a $(LDLIBS_RT)" \
	    CFLAGS="-std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -I$(CUDA_HOME)/include"

# ---- install: make install PREFIX=/opt/fa4gen (DESTDIR for staging) ----
PREFIX  ?= /usr/local
DESTDIR ?=
I       := $(DESTDIR)$(PREFIX)
SUBST   := sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' -e 's|@SOMAJOR@|$(SOMAJOR)|g'
.PHONY: install
install: $(B)/fa4gen $(B)/libfa4rt.a $(B)/libfa4rt.so
	install -d $(I)/bin $(I)/lib/pkgconfig $(I)/lib/cmake/fa4gen $(I)/include
	install -m 755 $(B)/fa4gen $(I)/bin/fa4gen
	install -m 644 $(B)/libfa4rt.a $(I)/lib/libfa4rt.a
	install -m 755 $(B)/libfa4rt.so.$(VERSION) $(I)/lib/libfa4rt.so.$(VERSION)
	ln -sf libfa4rt.so.$(VERSION) $(I)/lib/libfa4rt.so.$(SOMAJOR)
	ln -sf libfa4rt.so.$(VERSION) $(I)/lib/libfa4rt.so
	install -m 644 runtime/fa4.h $(I)/include/fa4.h
	$(SUBST) packaging/fa4gen.pc.in > $(I)/lib/pkgconfig/fa4gen.pc
	$(SUBST) packaging/fa4genConfig.cmake.in > $(I)/lib/cmake/fa4gen/fa4genConfig.cmake
	$(SUBST) packaging/fa4genConfigVersion.cmake.in > $(I)/lib/cmake/fa4gen/fa4genConfigVersion.cmake
	@echo "install: fa4gen $(VERSION) in $(I) (pkg-config fa4gen, find_package(fa4gen))"

# Install into a temporary prefix, then build the examples against it with pkg-config and with CMake.
.PHONY: install-test
install-test:
	@sh tests/install/run.sh

# ---- demo: the main job ----
DEMO_FLAGS ?= --target sm90a --dtype bf16 --depth 128 --mask causal
demo: $(B)/fa4gen
	$(B)/fa4gen mha $(DEMO_FLAGS) -o $(B)/demo.ptx
	$(PTXAS) -arch=sm_90a -v $(B)/demo.ptx -o $(B)/demo.cubin
	$(B)/fa4gen explain $(DEMO_FLAGS)
	@echo "demo: wrote $(B)/demo.ptx and $(B)/demo.cubin"

# ---- AOT bundle: examples/bundle.txt -> build/bundle/kernels.c (fatbins + table; link it into a host) ----
bundle: $(B)/fa4gen examples/bundle.txt
	@mkdir -p $(B)/bundle
	$(B)/fa4gen bundle examples/bundle.txt -o $(B)/bundle/kernels.c

# ---- tests (CPU only) ----
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)
deps-test:
	@sh tests/ensure-cmocka.sh

$(B)/tests/%: tests/unit/%.c tests/unit/testutil.h $(B)/libfa4rt.a $(B)/fa4gen
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/unit $< -o $@ $(B)/libfa4rt.a $(CMOCKA_LIBS) $(LDLIBS_RT)

$(B)/tests/test_launch $(B)/tests/test_aot: tests/unit/fake_cuda.h

# test_cli includes gen/main.c (its main renamed) and gen/cli_kernel.c to reach the CLI's static helpers
# (the flag table); the CLI's other sources come with it.
$(B)/tests/test_cli: tests/unit/test_cli.c tests/unit/testutil.h gen/main.c $(CLI_LINK) $(HDRS) \
                     $(B)/libfa4rt.a $(B)/fa4gen
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/unit $< $(filter-out gen/cli_kernel.c,$(CLI_LINK)) -o $@ $(B)/libfa4rt.a $(CMOCKA_LIBS) $(LDLIBS_RT)

# test_bundle links a bundle fa4gen compiles from tests/unit/bundle_list.txt (runs on the fake driver).
$(B)/tests/gen/test_bundle_kernels.c: tests/unit/bundle_list.txt $(B)/fa4gen
	@mkdir -p $(dir $@)
	$(B)/fa4gen bundle $< --jobs 2 -o $@
# ... and a second one: every config `fa4gen configs` lists for the workload of tests/unit/bundle_workload.txt,
# through `fa4gen bundle -` (test_bundle replays calls of that workload with JIT disabled).
$(B)/tests/gen/test_configs_kernels.c: tests/unit/bundle_workload.txt $(B)/fa4gen
	@mkdir -p $(dir $@)
	$(B)/fa4gen configs $$(cat $<) | $(B)/fa4gen bundle - --jobs 2 -o $@
$(B)/tests/test_bundle: tests/unit/test_bundle.c $(B)/tests/gen/test_bundle_kernels.c $(B)/tests/gen/test_configs_kernels.c \
                        tests/unit/testutil.h tests/unit/fake_cuda.h $(B)/libfa4rt.a
	$(CC) $(ALL_CFLAGS) -Itests/unit $< $(B)/tests/gen/test_bundle_kernels.c $(B)/tests/gen/test_configs_kernels.c -o $@ \
	    $(B)/libfa4rt.a $(CMOCKA_LIBS) $(LDLIBS_RT)

# The first bundle as a shared object, for fa4.load_bundle (tests/python/test_bundle_load.py): no libfa4rt linked,
# fa4_bundle_register resolves to the process's copy.
$(B)/tests/gen/test_bundle_kernels.so: $(B)/tests/gen/test_bundle_kernels.c runtime/fa4.h
	$(CC) -shared -fPIC -Iruntime $< -o $@

# A fake CUDA driver (records encodes and launches) for testing the launch path without a GPU.
$(FAKECUDA): tests/unit/fake_cuda.c tests/unit/fake_cuda.h tests/unit/cuda_errors.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fvisibility=hidden -shared -Wl,-soname,libcuda.so.1 $< -o $@

# Every suite runs, after a failing one too (make test counts each suite's line), side by side on the
# machine's cores (tests/lanes.sh, longest first; each one's output printed in this order); exit 1 when any failed.
# test_args_fuzz: the Python argument layer on duck-typed tensors through the simulated driver (no torch);
# docs_check: the README and docs/ against the sources (counts, variables, flags, links, examples).
UNIT_DEPS = deps-test $(UNIT_BIN) $(B)/tests/test_launch $(B)/tests/test_bundle $(B)/tests/test_aot $(FAKECUDA) \
            $(B)/tests/gen/test_bundle_kernels.so $(B)/libfa4rt.so build/sim/libcuda.so.1 build/sim/timecase \
            $(B)/bench/liblaunchfloor.so
unit: $(UNIT_DEPS)
	@sh tests/lanes.sh $(UNIT_LANES)

# make test's first step: the install test (the longest job, first) in the unit tests' lanes, so that its
# serial stretches (pip, cmake) share the cores with them; install's prerequisites are unit's already.
.PHONY: unit-install-test
unit-install-test: $(UNIT_DEPS)
	@sh tests/lanes.sh "sh tests/install/run.sh" $(UNIT_LANES)

UNIT_LANES = \
	    "LD_LIBRARY_PATH=$(abspath $(B)/fakecuda) UNIT_LABEL='unit tests (fake driver)' sh tests/run-unit.sh \
	        $(B)/tests/test_launch $(B)/tests/test_bundle $(B)/tests/test_aot" \
	    "sh tests/run-unit.sh $(UNIT_BIN)" \
	    "python3 tests/python/test_torch_ops.py" \
	    "FA4_LIB=$(UNIT_LIB) python3 tests/python/test_args_fuzz.py" \
	    "FA4_LIB=$(UNIT_LIB) python3 tests/python/test_kvcache_sim.py" \
	    "FA4_LIB=$(UNIT_LIB) python3 tests/python/test_fa_api_sim.py" \
	    "FA4_LIB=$(UNIT_LIB) python3 tests/python/test_timeline_sim.py" \
	    "FA4_LIB=$(UNIT_LIB) python3 tests/python/test_bundle_load.py $(B)/tests/gen/test_bundle_kernels.so" \
	    "python3 tests/unit/layering.py --quiet . $(B)" \
	    "sh tests/python/abi.sh" \
	    "python3 tests/docs_check.py"
UNIT_LIB = $(abspath $(B))/libfa4rt.so

launch-test: deps-test $(B)/tests/test_launch $(B)/tests/test_bundle $(B)/tests/test_aot $(FAKECUDA)
	@LD_LIBRARY_PATH=$(abspath $(B)/fakecuda) sh tests/run-unit.sh $(B)/tests/test_launch $(B)/tests/test_bundle \
	    $(B)/tests/test_aot

# The ptxas matrices: independent scripts that each run ptxas one config at a time, so tests/lanes.sh
# runs them side by side on the machine's cores (longest first) and prints each one's output in order.
# The scripts marked SASS also check the SASS where a cuobjdump is found (make sass-tools fetches one).
WITH_SASS      = CUOBJDUMP=$$(sh tests/ensure-sass-tools.sh $(B)/sasstools 2>/dev/null)
PTXAS_SM90     = "sh tests/ptxas/run.sh $(B)/fa4gen"
PTXAS_SERVING  = "$(WITH_SASS) sh tests/ptxas/run_serving.sh $(B)/fa4gen"
PTXAS_MLA100   = "$(WITH_SASS) sh tests/ptxas/mla_sm100.sh $(B)/fa4gen"
PTXAS_SPLIT    = "$(WITH_SASS) sh tests/ptxas/run_split.sh $(B)/fa4gen"
PTXAS_FEATURES = "sh tests/ptxas/run_features.sh $(B)/fa4gen"
PTXAS_SPILLS   = "sh tests/ptxas/run_spills.sh $(B)/fa4gen"
PTXAS_BWD      = "$(WITH_SASS) sh tests/ptxas/run_bwd.sh $(B)/fa4gen"
PTXAS_RAW      = "sh tests/ptxas/raw_ops.sh"
PTXAS_REGS     = "sh tests/ptxas/regbudget.sh $(B)/fa4gen"
PTXAS_DIV      = "sh tests/ptxas/pow2_div.sh $(B)/fa4gen"
PTXAS_SM103    = "SM103_SAMPLE=$${SM103_SAMPLE:-24} sh tests/ptxas/run_sm103.sh $(B)/fa4gen"
SASS_SM100     = "CUOBJDUMP=$$(sh tests/ensure-sass-tools.sh $(B)/sasstools) sh tests/ptxas/sass_sm100.sh $(B)/fa4gen"
ptxas-test: $(B)/fa4gen
	@sh tests/lanes.sh $(PTXAS_SM90) $(PTXAS_SERVING) $(PTXAS_MLA100) $(PTXAS_SPLIT) $(PTXAS_FEATURES) \
	    $(PTXAS_SPILLS) $(PTXAS_BWD) $(PTXAS_RAW) $(PTXAS_REGS) $(PTXAS_DIV) $(PTXAS_SM103)

# make test's step: the ptxas matrices and the SASS matrix in the same lanes; the SASS matrix, last,
# disassembles the cubins the sm100a ptxas matrix kept (SM100_CUBINS) instead of assembling them again.
.PHONY: ptxas-sass-test
ptxas-sass-test: $(B)/fa4gen sass-tools
	@c=$$(mktemp -d); SM100_CUBINS=$$c sh tests/lanes.sh $(PTXAS_SM90) $(PTXAS_SERVING) $(PTXAS_BWD) \
	    $(PTXAS_MLA100) $(PTXAS_SPLIT) $(PTXAS_FEATURES) $(PTXAS_SPILLS) $(SASS_SM100) $(PTXAS_RAW) $(PTXAS_REGS) \
	    $(PTXAS_DIV) $(PTXAS_SM103); \
	    r=$$?; rm -rf "$$c"; exit $$r

# SASS of the sm100a matrix (no GPU needed): a cuobjdump from the toolkit, or NVIDIA's wheel.
sass-test: $(B)/fa4gen
	@cuobjdump=$$(sh tests/ensure-sass-tools.sh $(B)/sasstools) || { \
	    echo "sass-test: no cuobjdump and none could be fetched (the reason and the fixes are above)"; exit 1; }; \
	CUOBJDUMP=$$cuobjdump sh tests/ptxas/sass_sm100.sh $(B)/fa4gen

# make test needs a cuobjdump for its SASS step: found or fetched first, so offline it stops up front.
sass-tools:
	@sh tests/ensure-sass-tools.sh $(B)/sasstools >/dev/null || { \
	    echo "make test: no cuobjdump (reason and fixes above); stopping before the tests, not after them"; exit 1; }

# Each step runs after a failing one too; the last line sums every suite: 'N passed, N failed'.
test: deps-test sass-tools
	@MAKE="$(MAKE)" sh tests/run-suites.sh unit-install-test ptxas-sass-test sim-test

# The edit-build-test loop: unit tests, every 24th config of each ptxas matrix, the simulator's units and
# seed 1 on every 12th case of each list (no mutants, no install test, no SASS matrix).
test-quick: deps-test
	@MATRIX_SAMPLE=24 SIM_QUICK=1 SIM_SAMPLE=12 MAKE="$(MAKE)" sh tests/run-suites.sh unit ptxas-test sim-test

clean:
	rm -rf $(B)

# The CPU suite under AddressSanitizer + UBSan with leak detection, built in build/san/src
# (tests/sanitize/run.sh says what runs). SAN_CC=gcc to use gcc.
.PHONY: test-sanitize
test-sanitize: deps-test
	@sh tests/sanitize/run.sh

# libFuzzer harnesses (tests/fuzz/): clang -fsanitize=fuzzer with ASan + UBSan over the generator.
#   make fuzz-ci              each harness (six) for FUZZ_SECONDS (40) over its seed corpus (CI)
#   make fuzz-long            each for FUZZ_LONG_SECONDS (or FUZZ_RUNS executions), log in build/fuzz/;
#                             FUZZ_LONG_NAMES="cli cache" picks harnesses
#   make fuzz-coverage        line coverage of the code each harness tests, over its corpora (llvm-cov)
FUZZ_CC      ?= clang
FUZZ_FLAGS   := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1 -std=c11 \
                -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-missing-field-initializers -Igen -I$(B)
FUZZ_NAMES   := config cli bundle cache args score_mod
FUZZ_BIN     := $(FUZZ_NAMES:%=$(B)/fuzz/fuzz_%)
FUZZ_SECONDS ?= 40
# gen/main.c's configs and cache commands run the runtime (gen/cli_tools.c): its sources come along.
$(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h tests/fuzz/fuzz_main.h gen/main.c $(CLI_LINK) \
                  $(GEN_SRC) $(RT_SRC) $(HDRS) $(B)/templates.c $(B)/gen_id.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Iruntime -I$(CUDA_HOME)/include $< $(CLI_LINK) $(GEN_SRC) $(RT_SRC) \
	    $(B)/templates.c -o $@ $(LDLIBS_RT)
# The runtime harnesses link libfa4rt's sources and run against the fake driver; --wrap puts
# a stand-in compiler behind rt_compile (tests/fuzz/fuzz_rt.h).
FUZZ_RT := $(B)/fuzz/fuzz_cache $(B)/fuzz/fuzz_args
$(FUZZ_RT): $(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h tests/fuzz/fuzz_rt.h tests/unit/fake_cuda.h \
                  $(RT_SRC) $(GEN_SRC) $(HDRS) $(B)/templates.c $(B)/gen_id.h $(FAKECUDA)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Iruntime -Itests/unit -I$(CUDA_HOME)/include $< $(RT_SRC) $(GEN_SRC) \
	    $(B)/templates.c -Wl,--wrap=rt_compile -o $@ $(LDLIBS_RT)
.PHONY: fuzz-build fuzz-ci fuzz-long
fuzz-build: $(FUZZ_BIN)
fuzz-ci: $(FUZZ_BIN)
	@for n in $(FUZZ_NAMES); do mkdir -p $(B)/fuzz/new_$$n; \
	    LD_LIBRARY_PATH=$(abspath $(B)/fakecuda) $(B)/fuzz/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=$(abspath $(B))/fuzz/$$n- \
	        $(B)/fuzz/new_$$n tests/fuzz/corpus/$$n > $(B)/fuzz/$$n.log 2>&1 || { \
	        tail -40 $(B)/fuzz/$$n.log; echo "fuzz-ci: fuzz_$$n FAILED (artifact in $(B)/fuzz/)"; exit 1; }; \
	    echo "fuzz-ci: fuzz_$$n $$(grep -o 'stat::number_of_executed_units: *[0-9]*' $(B)/fuzz/$$n.log | \
	        grep -o '[0-9]*$$') executions in $(FUZZ_SECONDS) s, $$(grep -o 'cov: [0-9]*' $(B)/fuzz/$$n.log | tail -1), no failure"; \
	done
FUZZ_LONG_SECONDS ?= 200
FUZZ_RUNS ?= -1
FUZZ_LONG_NAMES ?= $(FUZZ_NAMES)
fuzz-long: $(FUZZ_BIN)
	@for n in $(FUZZ_LONG_NAMES); do mkdir -p $(B)/fuzz/long_$$n; \
	    LD_LIBRARY_PATH=$(abspath $(B)/fakecuda) $(B)/fuzz/fuzz_$$n -max_total_time=$(FUZZ_LONG_SECONDS) -runs=$(FUZZ_RUNS) -print_final_stats=1 \
	        -artifact_prefix=$(abspath $(B))/fuzz/$$n- $(B)/fuzz/long_$$n tests/fuzz/corpus/$$n > $(B)/fuzz/long_$$n.log 2>&1; \
	    echo "fuzz_$$n: exit $$?"; grep 'stat::\|^#[0-9]*.*DONE' $(B)/fuzz/long_$$n.log; done

# Line coverage of each harness over its corpus (the long run's, then the seeds), per file of the code it
# tests: clang source-based coverage (no sanitizers), reports in build/fuzzcov/<name>.txt.
FUZZ_COV_FLAGS := -fsanitize=fuzzer -fprofile-instr-generate -fcoverage-mapping -g -O1 -std=c11 -D_GNU_SOURCE \
                  -Wall -Wextra -Werror -Wno-missing-field-initializers -Igen -I$(B)
FUZZ_COV_config := gen/config.c gen/plan.c gen/sm90/plan.c gen/sm100/plan.c
FUZZ_COV_cli    := gen/main.c gen/cli_kernel.c gen/config.c gen/api.c
FUZZ_COV_bundle := gen/main.c gen/cli_kernel.c gen/config.c
FUZZ_COV_cache  := runtime/cache.c runtime/api.c
FUZZ_COV_args   := runtime/mha.c runtime/mla_sparse.c runtime/launch.c
FUZZ_COV_score_mod := gen/score_mod.c
$(B)/fuzzcov/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h tests/fuzz/fuzz_main.h gen/main.c $(CLI_LINK) \
                     $(GEN_SRC) $(RT_SRC) $(HDRS) $(B)/templates.c $(B)/gen_id.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_COV_FLAGS) -Iruntime -I$(CUDA_HOME)/include $< $(CLI_LINK) $(GEN_SRC) $(RT_SRC) \
	    $(B)/templates.c -o $@ $(LDLIBS_RT)
$(FUZZ_RT:$(B)/fuzz/%=$(B)/fuzzcov/%): $(B)/fuzzcov/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h \
                     tests/fuzz/fuzz_rt.h tests/unit/fake_cuda.h $(RT_SRC) $(GEN_SRC) $(HDRS) $(B)/templates.c $(B)/gen_id.h \
                     $(FAKECUDA)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_COV_FLAGS) -Iruntime -Itests/unit -I$(CUDA_HOME)/include $< $(RT_SRC) $(GEN_SRC) \
	    $(B)/templates.c -Wl,--wrap=rt_compile -o $@ $(LDLIBS_RT)
.PHONY: fuzz-coverage
fuzz-coverage: $(FUZZ_LONG_NAMES:%=$(B)/fuzzcov/fuzz_%)
	@for n in $(FUZZ_LONG_NAMES); do mkdir -p $(B)/fuzz/long_$$n; rm -f $(B)/fuzzcov/$$n.profraw; \
	    LLVM_PROFILE_FILE=$(abspath $(B))/fuzzcov/$$n.profraw LD_LIBRARY_PATH=$(abspath $(B)/fakecuda) \
	        $(B)/fuzzcov/fuzz_$$n -runs=0 $(B)/fuzz/long_$$n tests/fuzz/corpus/$$n > $(B)/fuzzcov/$$n.log 2>&1 || \
	        { tail -20 $(B)/fuzzcov/$$n.log; exit 1; }; \
	    llvm-profdata merge -sparse $(B)/fuzzcov/$$n.profraw -o $(B)/fuzzcov/$$n.profdata && \
	    { echo "fuzz_$$n over $$(ls $(B)/fuzz/long_$$n | wc -l) + $$(ls tests/fuzz/corpus/$$n | wc -l) inputs:"; \
	      llvm-cov report $(B)/fuzzcov/fuzz_$$n -instr-profile=$(B)/fuzzcov/$$n.profdata \
	        $$(case $$n in config) echo $(FUZZ_COV_config);; cli) echo $(FUZZ_COV_cli);; bundle) echo $(FUZZ_COV_bundle);; \
	           cache) echo $(FUZZ_COV_cache);; args) echo $(FUZZ_COV_args);; \
           score_mod) echo $(FUZZ_COV_score_mod);; esac); } | tee $(B)/fuzzcov/$$n.txt; done

# The whole project (CLI, libraries, examples, unit tests, fake and simulated drivers) with clang,
# warnings as errors, in its own build folder.
.PHONY: clang-check
clang-check:
	$(MAKE) -s B=$(B)/clang CC=clang all $(B)/clang/fakecuda/libcuda.so.1 \
	    $(patsubst $(B)/%,$(B)/clang/%,$(UNIT_BIN) $(B)/tests/test_launch $(B)/tests/test_bundle $(B)/tests/test_aot)
	@echo "clang-check: the project builds with clang, warning-free"

# ---- the simulated GPU (tests/sim/): a libcuda.so.1 that runs our PTX on the CPU ----
include tests/sim/sim.mk tests/sim/tma.mk tests/sim/harness.mk

# ---- runtime additions ----
.PHONY: bench-jit
$(B)/bench/jit: bench/jit.c $(B)/libfa4rt.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $< -o $@ $(B)/libfa4rt.a $(LDLIBS_RT)
bench-jit: $(B)/bench/jit
	$(B)/bench/jit
# the host time of a cached fa4_mha_fwd / fa4_mla_sparse_fwd against the fake driver (issue 26's driver checks)
.PHONY: bench-host
$(B)/bench/host_cost: bench/host_cost.c bench/launch_floor.c bench/launch_floor.h tests/unit/fake_cuda.h $(B)/libfa4rt.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/unit -Ibench $< bench/launch_floor.c -o $@ $(B)/libfa4rt.a $(LDLIBS_RT)
# the same launches replayed bare, for bench/host_cost.py (ctypes; it reads the context of the libfa4rt.so it loads)
$(B)/bench/liblaunchfloor.so: bench/launch_floor.c bench/launch_floor.h $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -Ibench $< -o $@
bench-host: $(B)/bench/host_cost $(FAKECUDA)
	LD_LIBRARY_PATH=$(abspath $(B)/fakecuda) $(B)/bench/host_cost

# ---- the Python wheel (python/setup.py runs this Makefile: fa4gen and libfa4rt.so go inside the package) ----
#   make wheel       build/wheel/fa4gen-<version>-py3-none-linux_<arch>.whl (pip wheel ./python)
#   make wheel-test  build it from a copy of the tree and from its sdist, install it into a fresh venv and run it
#                    with the CUDA toolkit hidden (tests/install/wheel.sh; make install-test runs it too)
.PHONY: wheel wheel-test
wheel:
	python3 -m pip wheel -q --no-deps ./python -w $(B)/wheel
wheel-test:
	@sh tests/install/wheel.sh
