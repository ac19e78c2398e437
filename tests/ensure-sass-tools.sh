#!/bin/sh
# tests/ensure-sass-tools.sh DIR - prints the path of a cuobjdump that reads sm_100a cubins.
# The toolkit's own when it has one; else NVIDIA's cuobjdump + nvdisasm wheels (PyPI,
# pinned), unpacked into DIR once. Prints nothing and exits 1 when neither can be had.
DIR=${1:-build/sasstools}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
VERSION=13.2.51
for c in "$(command -v cuobjdump 2>/dev/null)" "$CUDA_HOME/bin/cuobjdump" "$DIR/nvidia/cu13/bin/cuobjdump"; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; exit 0; }
done
PY=$(command -v python3 || command -v python) || exit 1
mkdir -p "$DIR/wheels" || exit 1
echo "sass tools: fetching nvidia-cuda-cuobjdump/nvdisasm $VERSION from PyPI into $DIR" >&2
"$PY" -m pip download -q --no-deps -d "$DIR/wheels" "nvidia-cuda-cuobjdump==$VERSION" \
    "nvidia-cuda-nvdisasm==$VERSION" >&2 || exit 1
for w in "$DIR"/wheels/*.whl; do "$PY" -m zipfile -e "$w" "$DIR" || exit 1; done
chmod +x "$DIR"/nvidia/cu13/bin/* 2>/dev/null
[ -x "$DIR/nvidia/cu13/bin/cuobjdump" ] || exit 1
echo "$DIR/nvidia/cu13/bin/cuobjdump"
