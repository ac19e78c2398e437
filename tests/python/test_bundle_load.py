"""tests/python/test_bundle_load.py - fa4.load_bundle and the cache functions, without a GPU or torch.

Loads a bundle's shared object (build/tests/gen/test_bundle_kernels.so: the C source test_bundle links,
built with cc -shared -fPIC and no libfa4rt) into the process, checks that it registered with the libfa4rt fa4
loaded, that with FA4GEN_DISABLE_JIT=1 fa4.compile returns the bundled kernel's cubin (the ELF taken out of
its fatbin) and refuses another config naming the bundle it searched; then fa4.cache_dir/list/prune/clear on
an empty folder. Prints 'bundle load: N passed, N failed'. Run by make unit with FA4_LIB=build/libfa4rt.so.
"""
import os
import sys
import tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import report  # noqa: E402  (tests/report.py: the suite line make test sums)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
os.environ.setdefault("FA4_LIB", os.path.join(ROOT, "build", "libfa4rt.so"))
os.environ["FA4GEN_DISABLE_JIT"] = "1"
os.environ["FA4GEN_CACHE_DIR"] = tempfile.mkdtemp(prefix="fa4bundleload.")
sys.path.insert(0, os.path.join(ROOT, "python"))
import fa4  # noqa: E402

passed = failed = 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL %s %s" % (what, detail))


so = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "tests", "gen", "test_bundle_kernels.so")
check("no bundle before", fa4.bundles() == [], fa4.bundles())
names = fa4.load_bundle(so)
check("load_bundle names it", names == ["test_bundle_kernels"], names)
check("registered", [b[0] for b in fa4.bundles()] == ["test_bundle_kernels"] and fa4.bundles()[0][2] == 2,
      fa4.bundles())
check("again: nothing new", fa4.load_bundle(so) == names and len(fa4.bundles()) == 1)
cubin = fa4.compile("mha target=sm90a dtype=bf16 qk=64 ov=64 mask=causal persistent=1")
check("compile from the bundle", cubin[:4] == b"\x7fELF" and len(cubin) > 1000, cubin[:8])
try:
    fa4.compile("mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal")
    check("a config outside the bundle", False, "compiled")
except fa4.Fa4Error as e:
    check("a config outside the bundle", "searched 1 bundle: 'test_bundle_kernels' (2 kernels" in str(e), e)
try:
    fa4.load_bundle(os.path.join(ROOT, "build", "no-such-bundle.so"))
    check("a missing object", False, "loaded")
except fa4.Fa4Error as e:
    check("a missing object", "load_bundle:" in str(e), e)
check("cache_dir", fa4.cache_dir() == os.environ["FA4GEN_CACHE_DIR"], fa4.cache_dir())
check("cache_list empty", fa4.cache_list() == [])
check("cache_prune", fa4.cache_prune(0) == (0, 0))
check("cache_clear", fa4.cache_clear() == (0, 0))
os.rmdir(os.environ["FA4GEN_CACHE_DIR"])
sys.exit(report("bundle load", passed, failed))
