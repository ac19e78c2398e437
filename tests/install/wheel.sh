#!/bin/sh
# tests/install/wheel.sh - the Python wheel as a new user gets it: built from a copy of the tree
# (what a clone has), and again from its sdist (what `python -m build` does), installed into a
# fresh venv, then run with the CUDA toolkit hidden: under `unshare -m` a tmpfs covers the
# toolkit's folder, and the environment is emptied (PATH without it, no LD_LIBRARY_PATH,
# CUDA_HOME=/nonexistent). Without unshare (not root, or no mount namespaces) only the environment
# hides it, and the checks that need it hidden are skipped, saying so.
#   no nvidia wheels: the fa4gen command (--version, --help), fa4.version() from the bundled
#     libfa4rt, a JIT compile and a module load through the simulated driver
#     (build/sim/libcuda.so.1, FA4GEN_COMPILER=driver-ptx), the torch-less errors, and NVRTC /
#     nvJitLink reported missing with the places searched
#   nvidia wheels pip-installed into the venv (CUDA 13 names; FA4_WHEEL_CUDA=12 for the -cu12 ones):
#     a PTX -> cubin compile by their nvJitLink and a score_mod by their NVRTC, FA4GEN_LOG naming the
#     files; FA4GEN_NVJITLINK beats them; a copy already loaded beats them
#   the Python side's search on made-up site-packages: CUDA 12 and 13 folders, a ptxas from
#     nvidia-cuda-nvcc or triton taken only at 12.8 or newer, nothing of a newer CUDA major than the driver
# FA4_WHEEL_NVIDIA=skip leaves out the nvidia wheels (offline); =require fails when they cannot be
# installed (default: skipped with a notice). FA4_WHEEL_NO_UNSHARE=1 runs the fallback without
# unshare; FA4_WHEEL_KEEP=1 keeps the work folder and prints when each step starts.
# Prints 'wheel: N skipped (T s; toolkit hidden: yes|no)', then 'wheel: N passed, N failed' (tests/report.sh). About 1.5 to 3 minutes:
# two builds (the tree, the sdist), each with pip's isolated setuptools, and 250 MB of nvidia wheels.
set -u
cd "$(dirname "$0")/../.."
REPO=$PWD
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
if [ -n "${FA4_WHEEL_KEEP:-}" ]; then echo "wheel: keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi
t0=$(date +%s)
pass=0; fail=0; skip=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL wheel: $*"; }
skipped() { skip=$((skip + 1)); echo "SKIP wheel: $*"; }
# check NAME CMD...: CMD succeeds (its output, in $tmp/out.txt, is shown on failure)
check() {
    name=$1; shift
    [ -z "${FA4_WHEEL_KEEP:-}" ] || echo "$(( $(date +%s) - t0 )) s: $name"
    if "$@" > "$tmp/out.txt" 2>&1; then ok; else bad "$name"; tail -25 "$tmp/out.txt"; fi
}
# has NAME PATTERN: the last check's output matches
has() { if grep -q -- "$2" "$tmp/out.txt"; then ok; else bad "$1: no '$2' in:"; tail -15 "$tmp/out.txt"; fi; }
want=$(sed -n 's/^#define FA4_VERSION_STRING "\(.*\)"/\1/p' runtime/fa4.h)

# ---- build: a copy of the tree (tracked + untracked-not-ignored files: what a clone has, plus work
# in progress), so nothing from build/ or python/build/ leaks in
mkdir -p "$tmp/src"
git ls-files -z --cached --others --exclude-standard | (cd "$REPO" && xargs -0 sh -c \
    'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh) | tar -C "$REPO" --null -T - -cf - | tar -C "$tmp/src" -xf -
# pip builds a local folder in place (pip >= 21.3); without build isolation first (offline hosts,
# needs setuptools >= 70.1 or wheel), else pip fetches setuptools
pipwheel() {
    "$PY" -m pip wheel -q --no-deps --no-build-isolation "$@" > "$tmp/pw.txt" 2>&1 ||
        "$PY" -m pip wheel -q --no-deps "$@" > "$tmp/pw.txt" 2>&1
}
check "pip wheel ./python (from a copy of the tree)" pipwheel "$tmp/src/python" -w "$tmp/dist"
whl=$(ls "$tmp"/dist/fa4gen-"$want"-py3-none-linux_*.whl 2>/dev/null | head -1)
[ -n "$whl" ] && ok || { bad "no fa4gen-$want-py3-none-linux_*.whl in: $(ls "$tmp/dist" 2>/dev/null)"; tail -20 "$tmp/pw.txt"; }
if [ -n "$whl" ]; then
    echo "wheel: $(basename "$whl"), $(du -k "$whl" | cut -f1) KB"
    "$PY" - "$whl" > "$tmp/out.txt" 2>&1 <<'PY'
import stat, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
mode = {i.filename: i.external_attr >> 16 for i in z.infolist()}
for f in ("fa4.py", "fa4_torch.py", "fa4gen/__init__.py", "fa4gen/lib/libfa4rt.so", "fa4gen/bin/fa4gen",
          "fa4gen/include/fa4.h"):
    assert f in mode, "missing " + f
    assert not stat.S_ISLNK(mode[f]), f + " is a symlink"
for f in ("fa4gen/lib/libfa4rt.so", "fa4gen/bin/fa4gen"):
    assert mode[f] & 0o111, f + " is not executable"
wheel = z.read([n for n in mode if n.endswith(".dist-info/WHEEL")][0]).decode()
assert "Root-Is-Purelib: false" in wheel, wheel
assert "fa4gen = fa4gen:main" in z.read([n for n in mode if n.endswith("entry_points.txt")][0]).decode()
PY
    [ $? -eq 0 ] && ok || { bad "wheel contents"; cat "$tmp/out.txt"; }
fi
# the sdist carries the C sources (csrc/); pip builds its wheel in a folder of its own, away from the tree
# (the sdist through setuptools' PEP 517 hook, as `python -m build --sdist` calls it, without needing build)
if ! "$PY" -c "import setuptools" 2> /dev/null; then
    skipped "the sdist: $PY has no setuptools"
elif check "sdist" sh -c "cd '$tmp/src/python' && '$PY' -c \"from setuptools import build_meta as b; b.build_sdist('$tmp/sdist')\"" &&
        sdist=$(ls "$tmp"/sdist/fa4gen-"$want".tar.gz 2>/dev/null); then
    check "pip wheel (from the sdist)" pipwheel "$sdist" -w "$tmp/dist2"
    [ "$("$PY" -m zipfile -l "$tmp"/dist2/*.whl 2>/dev/null | awk 'NR>1{print $1}' | sort)" = \
      "$("$PY" -m zipfile -l "$whl" | awk 'NR>1{print $1}' | sort)" ] && ok || bad "the sdist's wheel holds other files"
else
    bad "no fa4gen-$want.tar.gz in $tmp/sdist"
fi

# ---- a fresh venv with the wheel; the simulated driver for the JIT checks
# (without pip of its own when this pip can install into it: --python, pip >= 22.3; saves half a minute)
V=$tmp/venv
if "$PY" -m venv --without-pip "$V" && "$PY" -m pip --python "$V/bin/python" --version > /dev/null 2>&1; then
    vpip() { "$PY" -m pip --python "$V/bin/python" "$@"; }
else
    vpip() { "$V/bin/python" -m pip "$@"; }
    check "venv" "$PY" -m venv --clear "$V"
fi
check "pip install the wheel" vpip install -q --no-deps --no-index "$whl"
site=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
check "make build/sim/libcuda.so.1" ${MAKE:-make} -s build/sim/libcuda.so.1
SIM=$REPO/build/sim

# The toolkit's folder (what /usr/local/cuda points at) and CUDA_HOME's, covered by a tmpfs under unshare.
cuda_dirs=$(for d in /usr/local/cuda "${CUDA_HOME:-}"; do [ -n "$d" ] && [ -d "$d" ] && readlink -f "$d"; done | sort -u)
hidden=0
[ -z "${FA4_WHEEL_NO_UNSHARE:-}" ] && unshare -m sh -c 'mount -t tmpfs none /mnt' 2>/dev/null && hidden=1
# run CMD...: in the venv, the toolkit hidden, an empty environment but for what the test names
run() {
    set -- env -i HOME="$tmp/home" TMPDIR="$tmp" PATH="$V/bin:/usr/bin:/bin" CUDA_HOME=/nonexistent \
        FA4GEN_CACHE_DIR="$tmp/cache" $extra "$@"
    if [ $hidden = 1 ]; then
        unshare -m sh -c 'for d in $0; do mount -t tmpfs none "$d" || exit 99; done; exec "$@"' "$cuda_dirs" "$@"
    else
        "$@"
    fi
}
extra=
mkdir -p "$tmp/home"
[ $hidden = 1 ] || echo "note: no unshare -m (unavailable, or FA4_WHEEL_NO_UNSHARE): the toolkit stays" \
    "reachable through the loader ($cuda_dirs)"
check "the toolkit is hidden" run sh -c '! command -v ptxas && [ ! -e /usr/local/cuda/bin/ptxas ] || [ '$hidden' = 0 ]'
check "fa4gen --version" run fa4gen --version
grep -qx "fa4gen $want+[0-9a-f]\{16\}" "$tmp/out.txt" && ok || bad "fa4gen --version: $(cat "$tmp/out.txt")"
check "fa4gen --help" run fa4gen --help
has "fa4gen --help" "usage: fa4gen"
check "python -m fa4gen explain" run python -m fa4gen explain --target sm90a --dtype bf16 --depth 128
check "fa4.version() from the bundled libfa4rt" run python -c "import fa4, sys
print(fa4.version(), fa4._lib._name)
sys.exit(fa4.version() != '$want' or not fa4._lib._name.startswith('$site/fa4gen/lib/'))"
check "without torch: one Fa4Error" run python -c "import fa4
try:
    fa4.mha_fwd(None, None, None)
except fa4.Fa4Error as e:
    assert str(e) == 'fa4.mha_fwd needs PyTorch: pip install fa4gen[torch]', e
else:
    raise SystemExit('no error')
try:
    import fa4_torch
except ImportError as e:
    assert 'fa4_torch needs PyTorch: pip install fa4gen[torch]' in str(e), e
else:
    raise SystemExit('fa4_torch imported')"

# JIT through the simulated driver: fa4.compile (the driver takes PTX) and fa4_get_kernel (the
# simulator loads the module: parses its PTX, sets its shared memory)
cat > "$tmp/jit.py" <<'PY'
import ctypes, fa4
cfg = "mha target=sm90a dtype=bf16 depth=64"
ptx = fa4.compile(cfg)
assert b".entry" in ptx and b".target sm_90a" in ptx, ptx[:200]
lib = fa4._load()
k = ctypes.c_void_p()
lib.fa4_get_kernel.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
fa4._check(lib.fa4_get_kernel(fa4.context(0), cfg.encode(), ctypes.byref(k), None), fa4.context(0))
print("jit: %d bytes of PTX, kernel loaded by the simulated driver" % len(ptx))
PY
extra="LD_LIBRARY_PATH=$SIM FA4SIM_CC=90 FA4GEN_COMPILER=driver-ptx FA4GEN_LOG=1"
check "JIT compile + load through the simulated driver" run python "$tmp/jit.py"
has "JIT through the simulated driver" "kernel loaded by the simulated driver"
extra=
printf '__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n{ return s * 0.5f; }\n' \
    > "$tmp/mod.cu"
if [ $hidden = 1 ]; then
    extra="FA4GEN_NO_PTXAS=1"
    run python -c "import fa4; fa4.compile('mha target=sm90a dtype=bf16 depth=64')" > "$tmp/out.txt" 2>&1
    has "no nvJitLink without the toolkit" "nvJitLink (libnvJitLink.so.13, .12 or libnvJitLink.so) was not found"
    extra=
    run fa4gen mha --target sm90a --depth 64 --score-mod "$tmp/mod.cu" -o "$tmp/mod.ptx" > "$tmp/out.txt" 2>&1
    has "no NVRTC without the toolkit" "NVRTC (libnvrtc.so.13, .12 or libnvrtc.so) was not found"
else
    skipped "the libraries' absence (the toolkit is not hidden)"
fi

# ---- the Python side's search, on made-up site-packages (no download: CUDA 12 and 13 layouts)
f=$tmp/fake
mkdir -p "$f/a/nvidia/cu13/lib" "$f/b/nvidia/cuda_nvrtc/lib" "$f/b/nvidia/nvjitlink/lib" "$f/b/nvidia/cublas/lib" \
         "$f/c/triton/backends/nvidia/bin" "$f/d/nvidia/cuda_nvcc/bin" "$f/e/nvidia/cu13/bin"
touch "$f/a/nvidia/cu13/lib/libnvJitLink.so.13" "$f/b/nvidia/cuda_nvrtc/lib/libnvrtc.so.12" \
      "$f/b/nvidia/nvjitlink/lib/libnvJitLink.so.12" "$f/b/nvidia/cublas/lib/libcublas.so.12"
printf '#!/bin/sh\necho "Cuda compilation tools, release 12.4, V12.4.131"\n' > "$f/d/nvidia/cuda_nvcc/bin/ptxas"
printf '#!/bin/sh\necho "Cuda compilation tools, release 12.8, V12.8.93"\n' > "$f/c/triton/backends/nvidia/bin/ptxas"
printf '#!/bin/sh\necho "Cuda compilation tools, release 13.0, V13.0.88"\n' > "$f/e/nvidia/cu13/bin/ptxas"
chmod +x "$f/d/nvidia/cuda_nvcc/bin/ptxas" "$f/c/triton/backends/nvidia/bin/ptxas" "$f/e/nvidia/cu13/bin/ptxas"
# (find_ptxas looks at wheels only when the toolkit's ptxas is missing: hidden)
check "fa4gen.cuda_lib_dirs / find_ptxas (CUDA 12 and 13 layouts, the driver's major)" run python -c "import fa4gen
d = fa4gen.cuda_lib_dirs(['$f/a', '$f/b', 'relative', '$f/nonexistent'])
assert d == ['$f/a/nvidia/cu13/lib', '$f/b/nvidia/cuda_nvrtc/lib', '$f/b/nvidia/nvjitlink/lib'], d
d = fa4gen.cuda_lib_dirs(['$f/a', '$f/b'], driver=(12, 4))
assert d == ['$f/b/nvidia/cuda_nvrtc/lib', '$f/b/nvidia/nvjitlink/lib'], d  # no CUDA 13 for a 12.4 driver
if $hidden:
    tri = '$f/c/triton/backends/nvidia/bin/ptxas'
    assert fa4gen.find_ptxas(['$f/d', '$f/c']) == tri  # 12.4 too old, 12.8 taken
    assert fa4gen.find_ptxas(['$f/d']) is None
    assert fa4gen.find_ptxas(['$f/e', '$f/c']) == '$f/e/nvidia/cu13/bin/ptxas'
    assert fa4gen.find_ptxas(['$f/e', '$f/c'], driver=(12, 9)) == tri  # 13.0 cubins: not for a 12.9 driver"
if [ $hidden = 1 ]; then
    # the fa4gen command hands the wheels' folders and ptxas to the CLI (FA4GEN_LOG says so)
    extra="PYTHONPATH=$f/b:$f/c FA4GEN_LOG=1"
    check "the fa4gen command's environment" run fa4gen --version
    has "FA4GEN_CUDA_LIB_DIRS handed to the CLI" "FA4GEN_CUDA_LIB_DIRS=$f/b/nvidia/cuda_nvrtc/lib:$f/b/nvidia/nvjitlink/lib"
    has "FA4GEN_PTXAS handed to the CLI" "FA4GEN_PTXAS=$f/c/triton/backends/nvidia/bin/ptxas"
    extra=
fi

# ---- NVRTC and nvJitLink from pip's nvidia wheels
case ${FA4_WHEEL_CUDA:-13} in
12) nv="nvidia-nvjitlink-cu12 nvidia-cuda-nvrtc-cu12"; jl=nvidia/nvjitlink/lib/libnvJitLink.so.12
    rtc=nvidia/cuda_nvrtc/lib/libnvrtc.so.12 ;;
*)  nv="nvidia-nvjitlink nvidia-cuda-nvrtc"; jl=nvidia/cu13/lib/libnvJitLink.so.13; rtc=nvidia/cu13/lib/libnvrtc.so.13 ;;
esac
nvok=0
if [ "${FA4_WHEEL_NVIDIA:-}" = skip ]; then
    skipped "the nvidia wheels (FA4_WHEEL_NVIDIA=skip)"
elif vpip install -q --no-deps $nv > "$tmp/nv.txt" 2>&1; then
    nvok=1
elif [ "${FA4_WHEEL_NVIDIA:-}" = require ]; then
    bad "pip install $nv:"; tail -5 "$tmp/nv.txt"
else
    skipped "the nvidia wheels: pip install $nv failed (offline?): $(tail -1 "$tmp/nv.txt")"
fi
if [ $nvok = 1 ]; then
    echo "wheel: $nv installed ($(du -sm "$site/nvidia" | cut -f1) MB)"
    cubin='import fa4, sys; c = fa4.compile("mha target=sm90a dtype=bf16 depth=64"); sys.exit(c[:4] != b"\x7fELF")'
    extra="FA4GEN_LOG=1 FA4GEN_NO_PTXAS=1"
    check "a cubin by the wheel's nvJitLink" run python -c "$cubin"
    has "FA4GEN_LOG names the wheel's nvJitLink" "fa4: nvJitLink: $site/$jl (found by FA4GEN_CUDA_LIB_DIRS)"
    check "a score_mod by the wheel's NVRTC (the CLI)" run fa4gen mha --target sm90a --depth 64 --score-mod "$tmp/mod.cu" \
        -o "$tmp/mod.ptx"
    has "FA4GEN_LOG names the wheel's NVRTC" "fa4: NVRTC: $site/$rtc (found by FA4GEN_CUDA_LIB_DIRS)"
    grep -q "score_mod" "$tmp/mod.ptx" && ok || bad "the score_mod is not in the kernel's PTX"
    extra="FA4GEN_LOG=1 FA4GEN_NO_PTXAS=1 FA4GEN_NVJITLINK=/nonexistent/libnvJitLink.so.13"
    run python -c "$cubin" > "$tmp/out.txt" 2>&1
    has "FA4GEN_NVJITLINK beats the wheels" "FA4GEN_NVJITLINK=/nonexistent/libnvJitLink.so.13: the file does not load"
    extra="FA4GEN_LOG=1 FA4GEN_NO_PTXAS=1"
    check "a copy already loaded comes first" run python -c "import ctypes, sys
ctypes.CDLL('$site/$jl')
import fa4
fa4.compile('mha target=sm90a dtype=bf16 depth=128')"
    has "FA4GEN_LOG: already loaded" "fa4: nvJitLink: $site/$jl (found by already loaded)"
    extra=
fi
[ $hidden = 1 ] && hid=yes || hid=no
echo "wheel: $skip skipped ($(( $(date +%s) - t0 )) s; toolkit hidden: $hid)"
sh tests/report.sh wheel "$pass" "$fail"
