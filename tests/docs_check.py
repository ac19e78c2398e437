#!/usr/bin/env python3
"""tests/docs_check.py - the documentation stays true (make unit runs it; no GPU, no build needed).

  1. counts: every row of the table under '## Counts' in docs/evidence.md equals what its source holds
     (a ptxas matrix script's entries, listed with MATRIX_LIST=1; a matrix or case-list file's lines that
     are neither blank nor comments; tests/sim/mutants.sh's `mutant` lines), optionally only the entries
     holding a word ("`SOURCE` with `WORD`"); every number written "<what> (N" in README.md or docs/
     equals that row's count; every matrix script and case list has a row.
  2. environment: every FA4GEN_* / FA4_* variable the C and Python sources read (gen/, runtime/,
     python/) has a row in the README's environment table, every FA4SIM_* one the simulator reads
     (tests/sim/) a row in docs/simulator.md, and every row names a variable that is read.
  3. CLI: every long flag the CLI's sources know (gen/main.c, gen/cli_*.c) appears in docs/cli.md; the CLI synopses of README.md and
     docs/cli.md name every command `fa4gen --help` lists, and no other.
  4. links: every relative link of README.md, CHANGELOG.md and docs/**.md resolves to a file, and its
     #anchor to a heading of that file (GitHub's rule); PENDING pages may be missing (another branch
     writes them) and are reported.
  5. the README's C example compiles against runtime/fa4.h (cc -fsyntax-only, warnings as errors) and
     its Python examples parse.
  6. the README is at most 200 lines; every fa4.X / fa4_torch.X it names is defined in python/, every
     fa4_x( and FA4_X in runtime/fa4.h.
  7. no issue numbers ("issue 12") in README.md, CHANGELOG.md or docs/.
Prints one line per failure and 'docs check: N passed, N failed'; exit 1 on failure.
"""
import glob
import os
import re
import subprocess
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import report  # noqa: E402  (tests/report.py: the suite line make test sums)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
os.chdir(ROOT)
PENDING = set()  # pages another branch writes, reported but not failed while missing
README_MAX_LINES = 200
passed = failed = 0


def ok(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL docs: " + msg)
    return cond


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def doc_files():
    files = ["README.md"] + sorted(glob.glob("docs/**/*.md", recursive=True))
    return files + (["CHANGELOG.md"] if os.path.exists("CHANGELOG.md") else [])


def table_rows(text, heading):
    """The rows (lists of stripped cells) of the first table after a heading line."""
    lines = text.split("\n")
    start = next((i for i, l in enumerate(lines) if l.strip() == heading), None)
    if start is None:
        return None
    rows, seen = [], False
    for l in lines[start + 1:]:
        if l.startswith("|"):
            seen = True
            cells = [c.strip() for c in l.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append(cells)
        elif seen or l.startswith("#"):
            break
    return rows[1:]  # without the header


# ---------------------------------------------------------------- 1. counts

def script_entries(script, label):
    env = dict(os.environ, MATRIX_LIST="1")
    r = subprocess.run(["sh", script, "/nonexistent/fa4gen"], env=env, capture_output=True, text=True)
    prefix = label + ": "
    return [l[len(prefix):] for l in r.stdout.split("\n") if l.startswith(prefix)]


def file_entries(path):
    if os.path.basename(path).startswith("mutants") and path.endswith(".sh"):
        return [l for l in read(path).split("\n") if l.startswith("mutant ")]
    return [l for l in read(path).split("\n") if l.strip() and not l.startswith("#")]


def check_counts():
    text = read("docs/evidence.md")
    rows = table_rows(text, "## Counts")
    if not ok(rows, "docs/evidence.md has no table under '## Counts'"):
        return
    counts = {}
    for cells in rows:
        if not ok(len(cells) == 3, "docs/evidence.md counts row %r: want | what | source | entries |" % cells):
            continue
        what, source, want = cells
        m = re.fullmatch(r"`([^`]+)`(?: with `([^`]+)`)?", source)
        if not ok(m and want.isdigit(), "docs/evidence.md counts row %r: source is `PATH` [with `WORD`], "
                  "entries a number" % cells):
            continue
        path, word = m.group(1), m.group(2)
        if not ok(os.path.exists(path), "docs/evidence.md counts: %s does not exist" % path):
            continue
        if path.startswith("tests/ptxas/") and path.endswith(".sh"):
            entries = script_entries(path, what.split(",")[0])
        else:
            entries = file_entries(path)
        if word:
            entries = [e for e in entries if word in e]
        ok(len(entries) == int(want), "docs/evidence.md says %s: %s entries, %s holds %d" % (
            what, want, source.replace("`", ""), len(entries)))
        counts[what] = len(entries)
    # every matrix script and case list is counted
    sources = set(re.findall(r"`(tests/[^`]+)`", "\n".join(r[1] for r in rows if len(r) == 3)))
    listed = {"tests/ptxas/run.sh", "tests/ptxas/run_features.sh", "tests/ptxas/run_serving.sh"} | set(
        glob.glob("tests/ptxas/*matrix*.txt")) | set(glob.glob("tests/sim/cases_*.txt")) | set(
        glob.glob("tests/sim/mutants*.sh"))
    for s in sorted(listed - sources):
        ok(False, "docs/evidence.md counts: no row for %s" % s)
    # "<what> (N" anywhere in the documentation
    # (the longest row name wins: "varlen sm90a cases (33" is not "sm90a cases (33")
    for f in doc_files():
        body = read(f)
        found = [(m.start(), m.end(), what, int(m.group(1))) for what in counts
                 for m in re.finditer(re.escape(what) + r" \((\d+)", body)]
        for start, end, what, got in found:
            if any(e == end and s < start for s, e, _, _ in found):
                continue
            ok(got == counts[what], "%s says '%s (%d', the count is %d" % (f, what, got, counts[what]))


# ---------------------------------------------------------------- 2. environment

def sources(globs):
    return [p for g in globs for p in glob.glob(g, recursive=True)]


def vars_read(paths, pattern):
    names = set()
    for p in paths:
        names |= set(re.findall(pattern, read(p)))
    return names


def table_vars(path, heading):
    rows = table_rows(read(path), heading)
    if rows is None:
        return None
    return {m for r in rows for m in re.findall(r"`([A-Z][A-Z0-9_]+)`", r[0])}


def check_env():
    c_src = sources(["gen/**/*.c", "gen/**/*.h", "runtime/*.c"])
    py_src = [p for p in sources(["python/**/*.py"]) if "/build/" not in p]
    read_any = vars_read(c_src, r'getenv\("([A-Z][A-Z0-9_]+)"\)') | vars_read(py_src, r'environ(?:\.get)?[\[(]"([A-Z][A-Z0-9_]+)"')
    # the project's own variables: every FA4GEN_* name the C sources spell (some reach getenv through a
    # table or a macro) and every FA4GEN_* / FA4_* one Python reads
    used = {v for v in vars_read(c_src, r'"(FA4GEN_[A-Z0-9_]+)"') | read_any if re.match(r"FA4(GEN)?_", v)}
    table = table_vars("README.md", "## Environment variables")
    if ok(table is not None, "README.md has no table under '## Environment variables'"):
        for v in sorted(used - table):
            ok(False, "README.md's environment table lacks %s (read by the sources)" % v)
        for v in sorted(table - used - read_any):
            ok(False, "README.md's environment table names %s, which no source reads" % v)
        ok(used <= table, "README.md's environment table has every FA4GEN_* / FA4_* variable the sources read")
    sim = vars_read(sources(["tests/sim/*.c"]), r'"(FA4SIM_[A-Z0-9_]+)"')
    table = table_vars("docs/simulator.md", "## Running one case")
    if ok(table is not None, "docs/simulator.md has no table under '## Running one case'"):
        for v in sorted(sim - table):
            ok(False, "docs/simulator.md's variable table lacks %s (read by tests/sim/)" % v)
        ok(sim <= table, "docs/simulator.md lists the simulator's variables")


# ---------------------------------------------------------------- 3. CLI

def cli_commands():
    """The commands `fa4gen --help` lists (its usage text in gen/cli_usage.c: '  NAME   what it does' lines)."""
    src = read("gen/cli_usage.c")
    block = src[src.index("commands:"):]
    block = block[:block.index("<command> --help")]
    return re.findall(r'"  ([a-z][a-z-]+) +[a-zA-Z]', block)


# The CLI's sources whose flags docs/cli.md documents (configs' and cache's: gen/cli_tools.c, not checked here).
CLI_SOURCES = ("gen/main.c", "gen/cli_kernel.c", "gen/cli_usage.c")


def check_cli():
    flags = set(re.findall(r'"(--[a-z][a-z0-9-]*)"', "".join(read(f) for f in CLI_SOURCES)))
    doc = read("docs/cli.md")
    missing = sorted(f for f in flags if not re.search(re.escape(f) + r"(?![a-z0-9-])", doc))
    for f in missing:
        ok(False, "docs/cli.md does not name the flag %s (the CLI's sources)" % f)
    ok(flags and not missing, "docs/cli.md names every flag of the CLI (gen/main.c, gen/cli_kernel.c, gen/cli_usage.c)")
    # every command of `fa4gen --help` in the synopsis of README.md and docs/cli.md, and nothing else
    commands = set(cli_commands())
    ok(len(commands) >= 5, "gen/cli_usage.c's usage lists %d commands (the parse is broken?)" % len(commands))
    for path, heading in (("README.md", "From the command line"), ("docs/cli.md", "## Synopsis")):
        text = read(path)
        m = re.search(re.escape(heading) + r".*?```\n(.*?)```", text, flags=re.S)
        if not ok(m, "%s has no CLI block after '%s'" % (path, heading)):
            continue
        named = set(re.findall(r"^fa4gen ([a-z][a-z-]+)", m.group(1), flags=re.M))
        named |= {w for line in re.findall(r"^fa4gen ([a-z-]+(?: \| [a-z-]+)+)", m.group(1), flags=re.M)
                  for w in line.split(" | ")}
        for c in sorted(commands - named):
            ok(False, "%s's CLI synopsis lacks the command '%s' (fa4gen --help lists it)" % (path, c))
        for c in sorted(named - commands - {"explain"}):
            ok(False, "%s's CLI synopsis names '%s', which fa4gen --help does not list" % (path, c))


# ---------------------------------------------------------------- 4. links

def slug(heading):
    h = re.sub(r"`", "", heading.strip().lower())
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    text = re.sub(r"```.*?```", "", read(path), flags=re.S)
    seen, out = {}, set()
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, flags=re.M):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        out.add(s if n == 0 else "%s-%d" % (s, n))
        seen[s] = n + 1
    return out


def check_links():
    pending_seen = set()
    for f in doc_files():
        text = re.sub(r"```.*?```", "", read(f), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            if full in PENDING and not os.path.exists(full):
                pending_seen.add(full)
                continue
            if not ok(os.path.exists(full), "%s links to %s, which does not exist" % (f, target)):
                continue
            if anchor and full.endswith(".md"):
                ok(anchor in anchors(full), "%s links to %s: %s has no heading '#%s'" % (f, target, full, anchor))
    for p in sorted(pending_seen):
        print("docs check: note: %s is linked and not here yet (written on another branch)" % p)


# ---------------------------------------------------------------- 5. examples

def check_examples():
    text = read("README.md")
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S)
    c = [b for lang, b in blocks if lang == "c"]
    if ok(c, "README.md has no C example"):
        cc = os.environ.get("CC", "cc")
        for b in c:
            r = subprocess.run([cc, "-std=c11", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-Iruntime",
                                "-x", "c", "-"], input=b, capture_output=True, text=True)
            ok(r.returncode == 0, "README.md's C example does not compile: %s" % r.stderr.strip()[:300])
    for b in [b for lang, b in blocks if lang == "python"]:
        try:
            compile(b, "README.md", "exec")
            ok(True, "")
        except SyntaxError as e:
            ok(False, "README.md's Python example: %s" % e)


def python_names(path):
    """Top-level names a Python module defines (def, class, assignment)."""
    return {a or b for a, b in re.findall(r"^(?:def|class) +([A-Za-z_]\w*)|^([A-Za-z_]\w*) *=", read(path), flags=re.M)}


def check_api_names():
    """Every fa4.X / fa4_torch.X the README names exists in python/, every fa4_x( C function it names in
    runtime/fa4.h."""
    text = read("README.md")
    header = read("runtime/fa4.h")
    for mod, path in (("fa4", "python/fa4.py"), ("fa4_torch", "python/fa4_torch.py")):
        have = python_names(path)
        for name, star in sorted(set(re.findall(r"(?<![\w/<])%s\.(?!h\b)([A-Za-z_]\w*)(\*?)" % mod, text))):
            ok(any(h.startswith(name) for h in have) if star else name in have,
               "README.md names %s.%s%s, which %s does not define" % (mod, name, star, path))
    for name in sorted(set(re.findall(r"\b(fa4_[a-z0-9_]+)\(", text))):
        ok(re.search(r"\b%s\(" % name, header), "README.md calls %s, which runtime/fa4.h does not declare" % name)
    for name in sorted(set(re.findall(r"\b(FA4_[A-Z0-9_]+)\b", text)) - {"FA4_LIB"}):
        ok(name in header, "README.md names %s, which runtime/fa4.h does not define" % name)


def check_no_history():
    """User documents carry no issue numbers (bench/NOTES.md keeps the history)."""
    for f in doc_files():
        for m in re.finditer(r"\bissue +#?\d+", read(f), flags=re.I):
            line = read(f).count("\n", 0, m.start()) + 1
            ok(False, "%s:%d says '%s': no issue numbers in user documents" % (f, line, m.group(0)))


def main():
    check_counts()
    check_env()
    check_cli()
    check_links()
    check_examples()
    check_api_names()
    check_no_history()
    n = len(read("README.md").rstrip("\n").split("\n"))
    ok(n <= README_MAX_LINES, "README.md has %d lines, more than %d: move detail into docs/" % (n, README_MAX_LINES))
    return report("docs check", passed, failed)


if __name__ == "__main__":
    sys.exit(main())
