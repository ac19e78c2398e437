"""setup.py - the fa4gen wheel's build step (metadata: pyproject.toml).

build_py runs the repository's Makefile (make fa4gen libfa4rt.so into a folder of the build's
own) and copies the results into the package: fa4gen/lib/libfa4rt.so (the real file, no
symlinks), fa4gen/bin/fa4gen and fa4gen/include/fa4.h. It needs make, a C compiler (CC, default
gcc) and the CUDA headers (cuda.h, nvJitLink.h under $CUDA_HOME/include, default /usr/local/cuda);
nothing from CUDA is linked: libfa4rt opens the driver, nvJitLink and NVRTC at run time.

Where the C sources are: the repository this python/ folder sits in (pip >= 21.3 builds a local
folder in place), or csrc/ inside an sdist (the sdist command copies them there, so
`python -m build`, which builds the wheel from the sdist, works too).

The wheel is tagged py3-none-<platform>: it holds native code but no Python extension, so any
Python 3 on that platform can use it.
"""
import os
import re
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:  # no wheel support here: sdists still build
        bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
# What `make fa4gen libfa4rt.so` reads (the Makefile includes the simulator's .mk files).
SOURCES = ["Makefile", "gen", "runtime", "templates", "tests/sim/sim.mk", "tests/sim/tc.mk", "tests/sim/tma.mk",
           "tests/sim/harness.mk"]


class BuildError(SystemExit):
    def __init__(self, msg):
        super().__init__("fa4gen build: " + msg)


def source_root():
    """The folder holding the Makefile and the C sources."""
    for root in (os.path.join(HERE, "csrc"), os.path.dirname(HERE)):
        if os.path.isfile(os.path.join(root, "Makefile")) and os.path.isfile(os.path.join(root, "runtime", "fa4.h")):
            return root
    raise BuildError("the C sources are not beside %s: build from the fa4gen repository (pip install ./python; "
                     "pip >= 21.3 builds it in place) or from its sdist (python -m build python)" % HERE)


def header_version(root):
    with open(os.path.join(root, "runtime", "fa4.h")) as f:
        m = re.search(r'#define FA4_VERSION_STRING "([^"]+)"', f.read())
    if not m:
        raise BuildError("runtime/fa4.h has no FA4_VERSION_STRING")
    return m.group(1)


class BuildNative(build_py):
    """build_py, then libfa4rt.so and fa4gen made by the Makefile and copied into the package."""

    def run(self):
        super().run()
        if not self.dry_run:
            self.build_native()

    def build_native(self):
        root = source_root()
        version = header_version(root)
        if version != self.distribution.get_version():
            raise BuildError("pyproject.toml says version %s, runtime/fa4.h %s: make them agree"
                             % (self.distribution.get_version(), version))
        cuda = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
        missing = [h for h in ("cuda.h", "nvJitLink.h") if not os.path.isfile(os.path.join(cuda, "include", h))]
        if missing:
            raise BuildError("%s not found in %s/include: the build needs the CUDA headers; set CUDA_HOME to a "
                             "CUDA toolkit (12.8 or newer)" % (" and ".join(missing), cuda))
        make = shutil.which("make")
        cc = os.environ.get("CC") or "gcc"
        if not make:
            raise BuildError("make not found on PATH")
        if not shutil.which(cc):
            raise BuildError("the C compiler '%s' not found on PATH (set CC)" % cc)
        out = os.path.abspath(os.path.join(self.get_finalized_command("build").build_temp, "fa4gen-make"))
        jobs = os.environ.get("FA4GEN_BUILD_JOBS") or str(min(os.cpu_count() or 1, 8))
        env = dict(os.environ, CFLAGS=os.environ.get("CFLAGS", "-O2"))  # no -g: a smaller wheel
        cmd = [make, "-C", root, "-j" + jobs, "B=" + out, "CC=" + cc, "CUDA_HOME=" + cuda,
               out + "/fa4gen", out + "/libfa4rt.so"]
        self.announce("fa4gen: " + " ".join(cmd), level=2)
        if subprocess.run(cmd, env=env).returncode != 0:
            raise BuildError("make failed (its output is above): %s" % " ".join(cmd))
        pkg = os.path.join(self.build_lib, "fa4gen")
        for src, dst, mode in ((os.path.realpath(os.path.join(out, "libfa4rt.so")), "lib/libfa4rt.so", 0o755),
                               (os.path.join(out, "fa4gen"), "bin/fa4gen", 0o755),
                               (os.path.join(root, "runtime", "fa4.h"), "include/fa4.h", 0o644)):
            dst = os.path.join(pkg, dst)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)  # the file itself, never a symlink
            os.chmod(dst, mode)


class SdistWithSources(sdist):
    """An sdist that carries the C sources in csrc/, so a wheel builds from it alone."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        root = source_root()
        for rel in SOURCES:
            src, dst = os.path.join(root, rel), os.path.join(base_dir, "csrc", rel)
            if os.path.isdir(src):
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.o"))
            else:
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copyfile(src, dst)


class NativeDistribution(Distribution):
    """Native files inside: installed to platlib, and the wheel is not pure."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildNative, "sdist": SdistWithSources}

if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """No Python extension, so no Python ABI in the tag: py3-none-<platform>."""

        def get_tag(self):
            return ("py3", "none") + tuple(super().get_tag()[2:])

    cmdclass["bdist_wheel"] = PlatformWheel

setup(distclass=NativeDistribution, cmdclass=cmdclass)
