# tc.mk - the tensor-core unit of the simulator (tests/sim/tc.c) and its
# standalone test. Included from the top-level Makefile; `make test-tc`.
TC_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
             -Wno-missing-field-initializers -O2 -g

build/sim/test_tc: tests/sim/test_tc.c tests/sim/tc.c tests/sim/tc.h
	@mkdir -p build/sim
	$(CC) $(TC_CFLAGS) -Itests/sim -o $@ tests/sim/test_tc.c tests/sim/tc.c -lm

.PHONY: test-tc
test-tc: build/sim/test_tc
	./build/sim/test_tc
