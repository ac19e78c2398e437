"""results_json.py - the benchmarks' results as JSON, beside their text tables (no torch needed here).

Every benchmark given --out FILE.txt also writes FILE.json (json_path): the same numbers, machine-readable,

    {"schema": 1, "runs": [RUN, ...]}
    RUN = {"benchmark": "mha" | "decode" | "mla_sparse" | "varlen" | "score_mod" | "score_mod_ablation",
           "gpu": "NVIDIA H100 80GB HBM3", "date": "YYYY-MM-DD", "units": {field: unit, ...},
           "meta": {run-wide facts: torch, cudnn, reps, ceilings, options},
           "rows": [{"shape": ..., <numbers keyed as "units" says>, ...}, ...],
           "source": the text file a converted run came from (absent for a benchmark's own JSON)}

A benchmark run writes one RUN. The text tables of record from before the JSON existed convert with

    python3 bench/results_json.py [--first] bench/results/FILE.txt [...]   (writes bench/results/FILE.json)

which reads every table it knows in the file (--first: only the first of each benchmark, the run of record
where a file keeps earlier runs below it) (bench_mha.py's, bench_decode.py's under its '## bench_decode*'
sections, bench_mla_sparse.py's, bench_varlen.py's) into one RUN each; bench/plot.py draws them.
"""
import datetime
import json
import math
import os
import re
import sys

SCHEMA = 1


def json_path(out):
    """FILE.txt -> FILE.json (any other name: FILE + .json)."""
    base, ext = os.path.splitext(out)
    return (base if ext == ".txt" else out) + ".json"


def run_doc(benchmark, gpu, units, rows, date=None, **meta):
    return {"benchmark": benchmark, "gpu": gpu, "date": date or datetime.date.today().isoformat(),
            "units": units, "meta": meta, "rows": rows}


def _clean(x):
    """NaN and inf become null (JSON has neither)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def write_json(path, runs):
    """Write {"schema": 1, "runs": runs} to path (a RUN or a list of them)."""
    if isinstance(runs, dict):
        runs = [runs]
    with open(path, "w") as f:
        json.dump(_clean({"schema": SCHEMA, "runs": runs}), f, indent=1)
        f.write("\n")


def write_beside(out, run):
    """A benchmark's JSON beside its --out text table (nothing when no --out was given)."""
    if out:
        write_json(json_path(out), run)


def load(path):
    """The runs of a JSON results file."""
    with open(path) as f:
        doc = json.load(f)
    if doc.get("schema") != SCHEMA:
        raise ValueError("%s: schema %r, this reader knows %d" % (path, doc.get("schema"), SCHEMA))
    return doc["runs"]


# ---------------------------------------------------------------- the text tables of record

def _num(s):
    s = s.strip().rstrip("x%")
    try:
        return float(s)
    except ValueError:
        return None


def _gpu_date(line):
    m = re.search(r"(\d{4}-\d{2}-\d{2})", line)
    g = re.search(r"(NVIDIA [^,]+?)(?:,|  | \(|$)", line)
    return (g.group(1).strip() if g else None), (m.group(1) if m else None)


def _meta_versions(line):
    meta = {}
    m = re.search(r"torch (\d[^,\s]*)", line)
    if m:
        meta["torch"] = m.group(1)
    m = re.search(r"cuDNN (\d+)", line)
    if m:
        meta["cudnn"] = m.group(1)
    return meta


def parse_mha(lines, source):
    """bench_mha.py tables: '# fa4gen sm90a MHA forward vs torch SDPA, DATE, GPU, ...', the ceiling line,
    then 'shape  COL...  RATIO  %ceil  check' and rows whose cells are separated by 2+ spaces."""
    runs = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("# fa4gen sm90a MHA forward vs torch SDPA"):
            i += 1
            continue
        head = lines[i]
        gpu, date = _gpu_date(head)
        meta = _meta_versions(head)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("shape"):
            m = re.search(r"cuBLAS bf16 8192\^3 \(ceiling\): (\d+)", lines[j])
            if m:
                meta["ceiling_tflops"] = float(m.group(1))
            m = re.search(r"median of (\d+) reps", lines[j])
            if m:
                meta["reps"] = int(m.group(1))
            j += 1
        if j >= len(lines):
            break
        cols = re.split(r"\s{2,}", lines[j].strip())[1:]
        backends = [c for c in cols if "/" not in c and c not in ("%ceil", "check")]
        rows, k = [], j + 1
        while k < len(lines) and lines[k].strip() and not lines[k].startswith("# ---"):
            line = lines[k]
            k += 1
            if line.startswith("#"):
                m = re.match(r"#\s+(.+?): (mha .*)$", line)
                if m and rows and rows[-1]["shape"] == m.group(1):
                    rows[-1]["config"] = m.group(2)
                continue
            cells = re.split(r"\s{2,}", line.strip())
            if len(cells) < 1 + len(backends):
                break
            row = {"shape": cells[0], "tflops": {b: _num(c) for b, c in zip(backends, cells[1:])}}
            if len(cells) > len(backends) + 3:
                row["check"] = cells[len(backends) + 3]
            rows.append(row)
        runs.append(dict(run_doc("mha", gpu, {"tflops": "TFLOP/s"}, rows, date=date, **meta), source=source))
        i = k
    return runs


def parse_decode(lines, source):
    """bench_decode.py tables, each under a '## NAME' section (the run of record's step name) or alone."""
    runs, section = [], None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        if not line.startswith("# fa4gen decode"):
            i += 1
            continue
        gpu, date = _gpu_date(line)
        meta = _meta_versions(line)
        meta["paged"] = "K/V paged" in line
        if section:
            meta["step"] = section
        j = i + 1
        while j < len(lines) and not lines[j].startswith("shape"):
            m = re.search(r"copy: (\d+) GB/s", lines[j])
            if m:
                meta["copy_gbps"] = float(m.group(1))
            m = re.search(r"(\d+) call\(s\) per graph", lines[j])
            if m:
                meta["calls_per_graph"] = int(m.group(1))
            meta["graphs"] = meta.get("graphs", False) or "CUDA-graph" in lines[j]
            m = re.search(r"median time of (\d+) reps", lines[j])
            if m:
                meta["reps"] = int(m.group(1))
            if "kv_early=True" in lines[j]:
                meta["kv_early"] = True
            j += 1
        if j >= len(lines):
            break
        cols = re.findall(r"(\S+?) GB/s", lines[j][len("shape"):])
        rows, k = [], j + 1
        while k < len(lines) and lines[k].strip() and not lines[k].startswith("## "):
            line = lines[k]
            k += 1
            m = re.match(r"# (B\d+ Sk\d+k GQA \d+/\d+): skipped", line)
            if m:
                rows.append({"shape": m.group(1), "skipped": True})
                continue
            if line.startswith("#"):
                continue
            name, rest = line[:24].strip(), line[24:].split()
            if len(rest) < 2 + len(cols) + 2:
                continue
            s = re.match(r"B(\d+) Sk(\d+)k GQA (\d+)/(\d+)", name)
            row = {"shape": name, "kv_mb": _num(rest[0]), "splits": int(rest[1]),
                   "gbps": {c: _num(v) for c, v in zip(cols, rest[2:2 + len(cols)])},
                   "pct_copy": _num(rest[2 + len(cols)]), "check": " ".join(rest[4 + len(cols):])}
            if s:
                row.update(B=int(s.group(1)), S=int(s.group(2)) * 1024, Hq=int(s.group(3)), Hkv=int(s.group(4)))
            rows.append(row)
        runs.append(dict(run_doc("decode", gpu, {"gbps": "GB/s", "kv_mb": "MB", "pct_copy": "%"}, rows,
                                 date=date, **meta), source=source))
        i = k
    return runs


def parse_mla_sparse(lines, source):
    """bench_mla_sparse.py tables: '# sparse MLA prefill, GPU, DATE', the ceiling, then
    'shape fa4 ms torch ms fa4 TF/s vs torch relL2 [[AB] ms TF/s]' rows."""
    runs = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("# sparse MLA prefill, NVIDIA"):
            i += 1
            continue
        gpu, date = _gpu_date(lines[i])
        meta = {}
        j = i + 1
        m = re.search(r"\(cuBLAS bf16 8192\^3\): (\d+)", lines[j]) if j < len(lines) else None
        if m:
            meta["ceiling_tflops"] = float(m.group(1))
            j += 1
        if j >= len(lines) or not lines[j].startswith("shape"):
            i = j
            continue
        ab = re.search(r"\[([^\]]+)\] ms", lines[j])
        rows, k = [], j + 1
        while k < len(lines) and lines[k].strip() and not lines[k].startswith("#"):
            name = re.match(r"(.+?)\s{2,}", lines[k]).group(1)
            nums = lines[k][len(name):].split()
            k += 1
            s = re.match(r"h(\d+) topk(\d+) skv(\d+)k", name)
            fa, tr, tf = _num(nums[0]), _num(nums[1]), _num(nums[2])
            row = {"shape": name, "ms": {"fa4": fa, "torch": tr},
                   "tflops": {"fa4": tf, "torch": tf * fa / tr if fa and tr and tf else None},
                   "speedup_vs_torch": _num(nums[3]), "rel_l2": _num(nums[4])}
            if ab and len(nums) >= 7:
                key = "fa4[%s]" % ab.group(1)
                row["ms"][key], row["tflops"][key] = _num(nums[5]), _num(nums[6])
            if s:
                row.update(s_q=4096, h_q=int(s.group(1)), topk=int(s.group(2)), s_kv=int(s.group(3)) * 1024,
                           d_qk=576)
            rows.append(row)
        runs.append(dict(run_doc("mla_sparse", gpu, {"ms": "ms", "tflops": "TFLOP/s"}, rows, date=date, **meta),
                         source=source))
        i = k
    return runs


def parse_varlen(lines, source):
    """bench_varlen.py: '# bench_varlen DATETIME  GPU  torch V', then 'backend ms TFLOP/s time/fa4' rows."""
    runs = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("# bench_varlen "):
            i += 1
            continue
        parts = re.split(r"\s{2,}", lines[i][len("# bench_varlen "):].strip())
        date = parts[0][:10]
        gpu = parts[1] if len(parts) > 1 else None
        meta = _meta_versions(lines[i])
        j = i + 1
        while j < len(lines) and not lines[j].startswith("backend"):
            j += 1
        rows, k = [], j + 1
        while k < len(lines) and lines[k].strip() and not lines[k].startswith("#"):
            m = re.match(r"(.+?)\s+([\d.]+)\s+([\d.]+)\s+(\S+)$", lines[k])
            k += 1
            if m:
                rows.append({"backend": m.group(1).strip(), "ms": float(m.group(2)), "tflops": float(m.group(3)),
                             "time_vs_fa4": _num(m.group(4))})
        runs.append(dict(run_doc("varlen", gpu, {"ms": "ms", "tflops": "TFLOP/s"}, rows, date=date, **meta),
                         source=source))
        i = k
    return runs


PARSERS = (parse_mha, parse_decode, parse_mla_sparse, parse_varlen)


def convert(path, first=False):
    lines = open(path).read().split("\n")
    runs = []
    for parse in PARSERS:
        found = parse(lines, path)
        runs += found[:1] if first else found
    return runs


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    first = argv[0] == "--first"
    for path in argv[1:] if first else argv:
        runs = convert(path, first)
        if not runs:
            print("%s: no table this converter knows" % path, file=sys.stderr)
            return 1
        write_json(json_path(path), runs)
        print("%s: %d run(s): %s" % (json_path(path), len(runs), ", ".join(
            "%s (%d rows)" % (r["meta"].get("step", r["benchmark"]), len(r["rows"])) for r in runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
