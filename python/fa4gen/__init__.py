"""fa4gen - what the fa4gen wheel carries, and how it finds CUDA's libraries without a toolkit.

The wheel puts the C side inside this package: lib/libfa4rt.so (the runtime the `fa4` module
binds), bin/fa4gen (the generator CLI; the `fa4gen` command runs it through main()) and
include/fa4.h. Outside a wheel (the repository's python/ folder) these are absent and `fa4`
falls back to the repository's build/ or an installed libfa4rt.

libfa4rt and the CLI open NVRTC and nvJitLink at run time (gen/cudalibs.h has the order:
FA4GEN_NVRTC / FA4GEN_NVJITLINK, the process, FA4GEN_CUDA_LIB_DIRS, the loader, the toolkit).
prepare_env() hands them the nvidia-* wheels torch installs, through FA4GEN_CUDA_LIB_DIRS:

    CUDA 13  nvidia-cuda-nvrtc, nvidia-nvjitlink          nvidia/cu13/lib
    CUDA 12  nvidia-cuda-nvrtc-cu12, nvidia-nvjitlink-cu12 nvidia/cuda_nvrtc/lib, nvidia/nvjitlink/lib

and, when the ptxas the runtime would find is missing, broken or older than 12.8, a ptxas that is
new enough from nvidia-cuda-nvcc or triton (FA4GEN_PTXAS): ptxas compiles whole programs, where
setmaxnreg works and kernels run about 2x faster than through nvJitLink (runtime/jit.c).
Variables the user set are kept: FA4GEN_PTXAS is never replaced, FA4GEN_CUDA_LIB_DIRS keeps its
folders first. With a driver installed, wheels of a newer CUDA major than it supports are left out:
a CUDA 13 nvJitLink or ptxas makes cubins a CUDA 12 driver does not load.
"""
import ctypes
import os
import re
import shutil
import subprocess
import sys

__all__ = ["library", "executable", "include_dir", "driver_cuda_version", "cuda_lib_dirs", "ptxas_version",
           "find_ptxas", "prepare_env", "main"]

_HERE = os.path.dirname(os.path.abspath(__file__))
PTXAS_MIN = (12, 8)  # sm_100a and the sm_90a features the kernels use

# (folder under a site-packages entry, its CUDA major, library files that mark it), CUDA 13 first (cudalibs.c's
# soname order)
_CUDA_LIB_DIRS = [
    ("nvidia/cu13/lib", 13, ("libnvrtc.so.13", "libnvJitLink.so.13")),
    ("nvidia/cuda_nvrtc/lib", 12, ("libnvrtc.so.12",)),
    ("nvidia/nvjitlink/lib", 12, ("libnvJitLink.so.12",)),
]
_WHEEL_PTXAS = ["nvidia/cu13/bin/ptxas", "nvidia/cuda_nvcc/bin/ptxas", "triton/backends/nvidia/bin/ptxas",
                "triton/backends/nvidia/bin/ptxas-blackwell"]

_prepared = None


def _bundled(*parts):
    path = os.path.join(_HERE, *parts)
    return path if os.path.exists(path) else None


def library():
    """The libfa4rt.so this wheel carries, or None (not a wheel install)."""
    return _bundled("lib", "libfa4rt.so")


def executable():
    """The fa4gen CLI this wheel carries, or None."""
    return _bundled("bin", "fa4gen")


def include_dir():
    """The folder holding fa4.h (libfa4rt's C API), or None."""
    return os.path.dirname(_bundled("include", "fa4.h") or "") or None


def _site_dirs(paths=None):
    """Absolute, existing sys.path folders (never '' or a relative entry: those follow the working directory)."""
    seen, out = set(), []
    for p in sys.path if paths is None else paths:
        if p and os.path.isabs(p) and p not in seen and os.path.isdir(p):
            seen.add(p)
            out.append(p)
    return out


def driver_cuda_version():
    """(major, minor) of the CUDA the installed driver supports (cuDriverGetVersion; no GPU needed), or None."""
    try:
        v = ctypes.c_int(0)
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v)) == 0 and v.value > 0:
            return v.value // 1000, v.value % 1000 // 10
    except (OSError, AttributeError):
        pass
    return None


def cuda_lib_dirs(paths=None, driver=None):
    """The nvidia-* wheels' lib folders holding NVRTC or nvJitLink, for each sys.path folder (or `paths`);
    driver (major, minor): leave out the folders of a newer CUDA major (None: keep all)."""
    out = []
    for base in _site_dirs(paths):
        for rel, major, marks in _CUDA_LIB_DIRS:
            d = os.path.join(base, rel)
            if driver and major > driver[0]:
                continue
            if d not in out and any(os.path.exists(os.path.join(d, m)) for m in marks):
                out.append(d)
    return out


def ptxas_version(path):
    """(major, minor) of a ptxas (`ptxas --version`: "release 12.8, V12.8.93"), or None if it does not run."""
    try:
        text = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _runtime_ptxas():
    """The ptxas libfa4rt finds by itself (runtime/jit.c: $CUDA_HOME/bin, /usr/local/cuda/bin, PATH)."""
    home = os.environ.get("CUDA_HOME")
    for p in ([os.path.join(home, "bin", "ptxas")] if home and os.path.isabs(home) else []) + \
            ["/usr/local/cuda/bin/ptxas"]:
        if os.access(p, os.X_OK):
            return p
    found = shutil.which("ptxas")
    return found if found and os.path.isabs(found) else None


def _ptxas_ok(path, driver):
    v = ptxas_version(path)
    return v is not None and v >= PTXAS_MIN and not (driver and v[0] > driver[0])


def find_ptxas(paths=None, driver=None):
    """A ptxas to hand the runtime, or None when it needs none: the one it finds itself runs and is
    at least 12.8, or no wheel has a better one (nvidia-cuda-nvcc, then triton; the first >= 12.8 and,
    given the driver's (major, minor), of no newer CUDA major than the driver's)."""
    own = _runtime_ptxas()
    if own and _ptxas_ok(own, None):  # the toolkit's: the user's choice, as the runtime would make it
        return None
    for base in _site_dirs(paths):
        for rel in _WHEEL_PTXAS:
            p = os.path.join(base, rel)
            if os.access(p, os.X_OK) and _ptxas_ok(p, driver):
                return p
    return None


def _has_wheel_ptxas():
    return any(os.path.exists(os.path.join(b, rel)) for b in _site_dirs() for rel in _WHEEL_PTXAS)


def prepare_env():
    """Point libfa4rt and the CLI at the CUDA libraries and the ptxas of the installed wheels (once per
    process; before libfa4rt opens them). Returns {variable: value} of what it set."""
    global _prepared
    if _prepared is not None:
        return _prepared
    done = {}
    driver = driver_cuda_version() if cuda_lib_dirs() or _has_wheel_ptxas() else None
    dirs = cuda_lib_dirs(driver=driver)
    if dirs:
        mine = [d for d in os.environ.get("FA4GEN_CUDA_LIB_DIRS", "").split(":") if d]
        value = ":".join(mine + [d for d in dirs if d not in mine])
        if value != os.environ.get("FA4GEN_CUDA_LIB_DIRS"):
            os.environ["FA4GEN_CUDA_LIB_DIRS"] = done["FA4GEN_CUDA_LIB_DIRS"] = value
    no_ptxas = os.environ.get("FA4GEN_NO_PTXAS", "")
    if not os.environ.get("FA4GEN_PTXAS") and not (no_ptxas and no_ptxas != "0"):
        ptxas = find_ptxas(driver=driver)
        if ptxas:
            os.environ["FA4GEN_PTXAS"] = done["FA4GEN_PTXAS"] = ptxas
    log = os.environ.get("FA4GEN_LOG", "")
    if done and log and log != "0":
        for k, v in sorted(done.items()):
            print("fa4: %s=%s (from the installed wheels)" % (k, v), file=sys.stderr)
    _prepared = done
    return done


def main():
    """The `fa4gen` command: the bundled CLI, with the wheels' CUDA libraries in its environment."""
    exe = executable()
    if exe is None:
        print("fa4gen: this install has no bundled CLI (%s); install the wheel (pip install fa4gen) or build it "
              "in the repository (make; build/fa4gen)" % os.path.join(_HERE, "bin", "fa4gen"), file=sys.stderr)
        return 1
    prepare_env()
    try:
        os.execv(exe, ["fa4gen"] + sys.argv[1:])
    except OSError as e:
        print("fa4gen: cannot run %s: %s" % (exe, e), file=sys.stderr)
        return 1
