#!/usr/bin/env python3
"""tests/unit/layering.py [--quiet] [ROOT] [BUILD] - the generator and the runtime are layered: no include cycle and
no call cycle between their files.

A module is a source file with its header (gen/kernel.c + gen/kernel.h: "gen/kernel"). Two graphs:
  include  module A -> B when A's .c or .h includes B's header ("..." includes, as the compiler resolves
           them: beside the file, then gen/, runtime/ and BUILD/);
  call     (gen/ only) module A -> B when A's object (BUILD/gen/<module>.o) has an undefined symbol
           that B's object defines (functions and data: nm). The target table (gen/targets.c) points at every target's
           families, which point at their emitters: that dispatch is the top of the house, so its edges
           are left out; every other edge counts.
Checks: each graph has no cycle (one line per cycle found, with a path), and the named layers hold: the
shared MHA emitter (gen/kernel) sits above the plan pieces and the emitters it calls (plan, mha_plan,
softmax, varlen), the sm_100a sparse MLA family's plan above its two kernels and those above their shared
pieces, the sm_100a MHA skeleton above its role files and those above every role's start, the sm_90a MHA
consumers above the producer and epilogue files, the sm_90a
backward's kernel above its pieces; none reachable back from below. Prints one line per check and 'layering: N passed, N failed';
exits 1 on a failure (--quiet: only the failed checks and that line). ROOT defaults to the current folder, BUILD to ROOT/build (make unit builds it).
"""
import collections
import glob
import os
import re
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import report  # noqa: E402  (tests/report.py: the suite line make test sums)

DIRS = ("gen", "runtime")
DISPATCH = {"gen/targets"}  # the target table: its edges are the registry's, not a layer's
# (upper, lower): lower must not reach upper in either graph
LAYERS = [
    ("gen/kernel", "gen/plan"), ("gen/kernel", "gen/mha_plan"), ("gen/kernel", "gen/softmax"),
    ("gen/kernel", "gen/varlen"),
    ("gen/sm100/mla_sparse", "gen/sm100/mla_pair"), ("gen/sm100/mla_sparse", "gen/sm100/mla_head64"),
    ("gen/sm100/mla_pair", "gen/sm100/mla_common"), ("gen/sm100/mla_head64", "gen/sm100/mla_common"),
    ("gen/sm100/mla_pair", "gen/sm100/mla_head64"), ("gen/sm100/mla_head64", "gen/sm100/mla_pair"),
    ("gen/sm90/mha_bwd", "gen/sm90/bwd_common"), ("gen/sm90/mha_bwd_depth", "gen/sm90/bwd_common"),
    ("gen/sm90/mha_bwd", "gen/sm90/mha_bwd_depth"), ("gen/mha_bwd", "gen/config"),
    ("gen/sm100/mha", "gen/sm100/mha_softmax"), ("gen/sm100/mha", "gen/sm100/mha_correction"),
    ("gen/sm100/mha_softmax", "gen/sm100/mha_context"), ("gen/sm100/mha_correction", "gen/sm100/mha_context"),
    ("gen/sm90/mha", "gen/sm90/mha_producer"), ("gen/sm90/mha", "gen/sm90/mha_epilogue"),
    ("gen/sm90/mha_producer", "gen/sm90/mha_timeline"), ("gen/sm90/mha_epilogue", "gen/sm90/mha_timeline"),
]


def module(root, path):
    return os.path.splitext(os.path.relpath(path, root))[0]


def include_graph(root, build):
    g = collections.defaultdict(set)
    files = [f for d in DIRS for f in glob.glob(os.path.join(root, d, "**", "*.[ch]"), recursive=True)]
    for f in files:
        src = open(f, encoding="utf-8", errors="replace").read()
        for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', src, re.M):
            for base in (os.path.dirname(f), os.path.join(root, "gen"), os.path.join(root, "runtime"), build):
                t = os.path.normpath(os.path.join(base, name))
                if os.path.isfile(t):
                    break
            else:
                continue
            if os.path.relpath(t, root).split(os.sep)[0] in DIRS and module(root, t) != module(root, f):
                g[module(root, f)].add(module(root, t))
    return g


def call_graph(root, build):
    defs, undef = {}, {}
    objs = glob.glob(os.path.join(build, "gen", "**", "*.o"), recursive=True)
    for o in objs:
        m = module(build, o)
        out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        undef[m] = set()
        for line in out.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in "TDRBVW":
                defs.setdefault(f[2], m)
            elif len(f) == 2 and f[0] == "U":
                undef[m].add(f[1])
    g = collections.defaultdict(set)
    for m, syms in undef.items():
        if m in DISPATCH:
            continue
        for s in syms:
            if s in defs and defs[s] != m:
                g[m].add(defs[s])
    return g, len(objs)


def cycles(g):
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    for root in sorted(set(g) | {v for s in g.values() for v in s}):
        if root in index:
            continue
        work = [(root, iter(sorted(g.get(root, ()))))]
        index[root] = low[root] = n[0]; n[0] += 1; stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]; n[0] += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def path(g, a, b, within=None):
    """A shortest path a -> ... -> b (modules), or None."""
    prev, todo = {a: None}, collections.deque([a])
    while todo:
        v = todo.popleft()
        for w in sorted(g.get(v, ())):
            if w in prev or (within is not None and w not in within):
                continue
            prev[w] = v
            if w == b:
                p = [w]
                while prev[p[-1]] is not None:
                    p.append(prev[p[-1]])
                return p[::-1]
            todo.append(w)
    return None


def cycle_path(g, comp):
    """One cycle through the first module of a strongly connected component: a -> ... -> a."""
    a = comp[0]
    for w in sorted(g.get(a, ())):
        p = [a] if w == a else path(g, w, a, set(comp))
        if w in comp and p:
            return [a] + ([w] + p[1:] if w != a else [])
    return comp


def main():
    args = sys.argv[1:]
    quiet = bool(args) and args[0] == "--quiet"
    args = args[1:] if quiet else args
    root = os.path.abspath(args[0] if args else ".")
    build = os.path.abspath(args[1] if len(args) > 1 else os.path.join(root, "build"))
    results = []

    def check(ok, what, why=""):
        results.append(ok)
        if not (ok and quiet):
            print(("ok   " if ok else "FAIL ") + what + ("" if ok else ": " + why))

    inc = include_graph(root, build)
    calls, nobj = call_graph(root, build)
    check(nobj > 0, "objects of gen/ under %s" % build, "none: run make first")
    for name, g in (("include", inc), ("call", calls)):
        found = cycles(g)
        check(not found, "%s graph has no cycle" % name,
              "; ".join(" -> ".join(cycle_path(g, c)) for c in found))
    for upper, lower in LAYERS:
        for name, g in (("include", inc), ("call", calls)):
            known = upper in g or any(upper in s for s in g.values())
            p = path(g, lower, upper)
            check(known and p is None, "%s: %s does not reach %s" % (name, lower, upper),
                  " -> ".join(p) if p else "%s is in no %s edge (renamed? update LAYERS)" % (upper, name))
    passed = sum(results)
    return report("layering", passed, len(results) - passed)


if __name__ == "__main__":
    sys.exit(main())
