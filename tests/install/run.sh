#!/bin/sh
# tests/install/run.sh - `make install` into a temporary prefix, then the examples built against
# the installed package twice: with pkg-config (examples/Makefile) and with CMake
# (examples/cmake, find_package(fa4gen) + fa4gen_add_bundle). Each example runs (no GPU here:
# they stop before the launch) and checks itself; the versions of fa4gen --version, pkg-config,
# the CMake package, the soname and fa4_version() must agree with fa4.h.
# Runs tests/install/wheel.sh (the Python wheel, its own suite line), then prints 'install: N passed, N failed'.
set -u
cd "$(dirname "$0")/../.."
MAKE=${MAKE:-make}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL install: $*"; }
check() { name=$1; shift; if "$@" > "$tmp/out.txt" 2>&1; then ok; else bad "$name"; tail -20 "$tmp/out.txt"; fi; }

want=$(sed -n 's/^#define FA4_VERSION_STRING "\(.*\)"/\1/p' runtime/fa4.h)
pfx=$tmp/prefix
check "make install" $MAKE -s install PREFIX="$pfx"
for f in bin/fa4gen lib/libfa4rt.a "lib/libfa4rt.so.$want" lib/libfa4rt.so lib/libfa4rt.so.0 include/fa4.h \
         lib/pkgconfig/fa4gen.pc lib/cmake/fa4gen/fa4genConfig.cmake lib/cmake/fa4gen/fa4genConfigVersion.cmake; do
    if [ -e "$pfx/$f" ]; then ok; else bad "missing $f"; fi
done
soname=$(readelf -d "$pfx/lib/libfa4rt.so.$want" 2>/dev/null | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libfa4rt.so.${want%%.*}" ] && ok || bad "soname '$soname', want libfa4rt.so.${want%%.*}"
# the release, then the generator's build id: + a 16-hex hash of its sources (the cache key's generator)
"$pfx/bin/fa4gen" --version | grep -qx "fa4gen $want+[0-9a-f]\{16\}" && ok || bad "fa4gen --version: $("$pfx/bin/fa4gen" --version)"
export PKG_CONFIG_PATH="$pfx/lib/pkgconfig"
[ "$(pkg-config --modversion fa4gen)" = "$want" ] && ok || bad "pkg-config --modversion: $(pkg-config --modversion fa4gen)"

# pkg-config: the README's one-line build runs without LD_LIBRARY_PATH (fa4gen.pc's rpath)
printf '#include <fa4.h>\n#include <stdio.h>\nint main(void) { puts(fa4_version()); return 0; }\n' > "$tmp/main.c"
check "cc main.c \$(pkg-config --cflags --libs fa4gen)" sh -c "cc '$tmp/main.c' \$(pkg-config --cflags --libs fa4gen) -o '$tmp/main'"
[ "$(env -u LD_LIBRARY_PATH "$tmp/main" 2>&1)" = "$want" ] && ok ||
    bad "a program linked with pkg-config's flags does not run alone: $(env -u LD_LIBRARY_PATH "$tmp/main" 2>&1 | head -1)"

# pkg-config: the examples' own Makefile against the install (shared libfa4rt, rpath), called as its
# header says: PKG_CONFIG_PATH on make's command line, not in the environment
export FA4GEN_CACHE_DIR="$tmp/cache"
check "examples with pkg-config" env -u PKG_CONFIG_PATH $MAKE -s -C examples PKG_CONFIG_PATH="$pfx/lib/pkgconfig" O="$tmp/pc"
check "jit_host (pkg-config) first run" "$tmp/pc/jit_host"
grep -q "libfa4rt $want (header $want)" "$tmp/out.txt" && ok || bad "jit_host's fa4_version: $(head -1 "$tmp/out.txt")"
ldd "$tmp/pc/jit_host" | grep -q "$pfx/lib/libfa4rt.so.0" && ok || bad "jit_host does not load the installed libfa4rt.so.0"
check "jit_host (pkg-config) second run: disk cache" "$tmp/pc/jit_host" --expect-cached
check "aot_host (pkg-config)" "$tmp/pc/aot_host"
grep -q "in the bundle: yes" "$tmp/out.txt" && ok || bad "aot_host: its kernel is not in its bundle"

# Python: fa4.py copied on its own (no wheel beside it) finds the installed libfa4rt through
# pkg-config, and its version is the library's. The wheel (pip install ./python, which carries its
# own libfa4rt) is tests/install/wheel.sh's, run at the end.
pyver=$(sed -n 's/^version = "\(.*\)"/\1/p' python/pyproject.toml)
[ "$pyver" = "$want" ] && ok || bad "python/pyproject.toml version $pyver, fa4.h $want"
mkdir -p "$tmp/py" && cp python/fa4.py "$tmp/py/"
check "import fa4 (a copy of fa4.py, the installed libfa4rt)" env -u FA4_LIB PYTHONPATH="$tmp/py" python3 -c \
    "import fa4, sys; sys.exit(0 if fa4.version() == '$want' and fa4._lib._name.startswith('$pfx') else 1)"

# CMake: find_package(fa4gen) + fa4gen_add_bundle
if command -v cmake > /dev/null; then
    check "cmake configure" cmake -S examples/cmake -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$pfx" -DCMAKE_BUILD_TYPE=Release
    check "cmake build" cmake --build "$tmp/cm" -j 2
    check "jit_host (cmake)" "$tmp/cm/jit_host" --expect-cached
    check "aot_host (cmake)" "$tmp/cm/aot_host"
    grep -q "in the bundle: yes" "$tmp/out.txt" && ok || bad "aot_host (cmake): its kernel is not in its bundle"
    # the version file: the installed major is found, a newer one is not
    mkdir -p "$tmp/cv"
    printf 'cmake_minimum_required(VERSION 3.16)\nproject(v C)\nfind_package(fa4gen %s QUIET)\nmessage(STATUS "found=${fa4gen_FOUND} version=${fa4gen_VERSION}")\nfind_package(fa4gen 1.0 QUIET)\nmessage(STATUS "v1=${fa4gen_FOUND}")\n' "$want" > "$tmp/cv/CMakeLists.txt"
    cmake -S "$tmp/cv" -B "$tmp/cv/b" -DCMAKE_PREFIX_PATH="$pfx" > "$tmp/cv.txt" 2>&1
    grep -q "found=1 version=$want" "$tmp/cv.txt" && grep -q "v1=0" "$tmp/cv.txt" && ok ||
        bad "find_package(fa4gen) versions: $(grep -- '-- found\|-- v1' "$tmp/cv.txt" | tr '\n' ' ')"
else
    bad "cmake is not installed (CI installs it: .ci/run)"
fi
# the Python wheel: built, installed into a fresh venv, run with the toolkit hidden (its own suite line;
# a wheel.sh that stops before it exits non-zero, which make test counts as a failure)
sh tests/install/wheel.sh; wheel_rc=$?
sh tests/report.sh install "$pass" "$fail" && [ "$wheel_rc" -eq 0 ]
