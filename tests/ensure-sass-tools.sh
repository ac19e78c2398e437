#!/bin/sh
# tests/ensure-sass-tools.sh DIR - prints the path of a cuobjdump that reads sm_100a cubins.
# Looks, in order: on PATH, in the toolkit ($CUDA_HOME/bin), in a pip-installed
# nvidia-cuda-cuobjdump wheel (site-packages/nvidia/*/bin, any Python on PATH), in DIR
# (unpacked earlier); else fetches NVIDIA's cuobjdump + nvdisasm wheels (PyPI, pinned) into
# DIR once. Prints nothing and exits 1, with the reason and the fixes on stderr, when none
# can be had (e.g. offline). --check: only say whether one is found, without fetching.
fetch=1
[ "${1:-}" = --check ] && { fetch=0; shift; }
DIR=${1:-build/sasstools}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
VERSION=13.2.51
found() { [ -n "$1" ] && [ -x "$1" ] && [ -f "$1" ]; }
for c in "$(command -v cuobjdump 2>/dev/null)" "$CUDA_HOME/bin/cuobjdump" "$DIR/nvidia/cu13/bin/cuobjdump"; do
    found "$c" && { echo "$c"; exit 0; }
done
# an installed wheel: nvidia is a namespace package, its bin/ folders are not on PATH
for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    for d in $("$py" -c 'import sys, glob, os
for p in sys.path:
    for c in glob.glob(os.path.join(p, "nvidia", "*", "bin", "cuobjdump")): print(os.path.dirname(c))' 2>/dev/null); do
        found "$d/cuobjdump" && { echo "$d/cuobjdump"; exit 0; }
    done
done
hint="install the CUDA toolkit's cuobjdump, or 'python3 -m pip install nvidia-cuda-cuobjdump==$VERSION nvidia-cuda-nvdisasm==$VERSION' (found in site-packages), or put cuobjdump on PATH"
if [ $fetch = 0 ]; then
    echo "sass tools: no cuobjdump here (PATH, $CUDA_HOME/bin, pip wheels, $DIR); make sass-test will fetch NVIDIA's wheel from PyPI, which needs the network; or $hint" >&2
    exit 1
fi
PY=$(command -v python3 || command -v python) || { echo "sass tools: no cuobjdump and no python to fetch one; $hint" >&2; exit 1; }
mkdir -p "$DIR/wheels" || exit 1
echo "sass tools: fetching nvidia-cuda-cuobjdump/nvdisasm $VERSION from PyPI into $DIR" >&2
"$PY" -m pip download -q --no-deps -d "$DIR/wheels" "nvidia-cuda-cuobjdump==$VERSION" \
    "nvidia-cuda-nvdisasm==$VERSION" >&2 || { echo "sass tools: the download failed (offline?); $hint" >&2; exit 1; }
for w in "$DIR"/wheels/*.whl; do "$PY" -m zipfile -e "$w" "$DIR" || exit 1; done
chmod +x "$DIR"/nvidia/cu13/bin/* 2>/dev/null
[ -x "$DIR/nvidia/cu13/bin/cuobjdump" ] || exit 1
echo "$DIR/nvidia/cu13/bin/cuobjdump"
