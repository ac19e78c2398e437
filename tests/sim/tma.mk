# tma.mk - the TMA unit of the simulator: build and run its test.
#   make -f tests/sim/tma.mk tma-test      (or include it from another Makefile)
# Outputs under build/sim/.
TMA_CC      ?= $(if $(CC),$(CC),gcc)
TMA_CUDA    ?= /usr/local/cuda
TMA_CFLAGS  := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
               -Wno-missing-field-initializers -O2 -g -I$(TMA_CUDA)/include
TMA_OUT     := build/sim

.PHONY: tma-test
tma-test: $(TMA_OUT)/test_tma
	$(TMA_OUT)/test_tma

$(TMA_OUT)/tma.o: tests/sim/tma.c tests/sim/tma.h
	@mkdir -p $(TMA_OUT)
	$(TMA_CC) $(TMA_CFLAGS) -c $< -o $@

$(TMA_OUT)/test_tma: tests/sim/test_tma.c $(TMA_OUT)/tma.o tests/sim/tma.h
	@mkdir -p $(TMA_OUT)
	$(TMA_CC) $(TMA_CFLAGS) tests/sim/test_tma.c $(TMA_OUT)/tma.o -o $@
