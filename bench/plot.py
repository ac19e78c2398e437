"""plot.py - the README's performance figures from the benchmarks' JSON (bench/results_json.py's format).

    python3 bench/plot.py [--results DIR] [--out DIR] [FILE.json ...]

Reads every run of the given JSON files (default: DIR/*.json, DIR = bench/results) and draws, each from the
newest run of its kind (by the run's date, then the file's name):
  mha-sm90.png          fa4gen vs cuDNN and FlashAttention-2 (torch SDPA backends), TFLOP/s per shape, with
                        the run's cuBLAS ceiling
  decode-bandwidth.png  decode K+V bandwidth per shape against the device-to-device copy of the same run
                        (CUDA graphs; dense and paged fa4, cuDNN, FlashAttention-2), one panel per GQA ratio
  mla-sparse.png        sparse MLA prefill, fa4gen vs the torch gather + softmax formulation, TFLOP/s
into --out (default docs/img). Needs matplotlib (pip install matplotlib); no GPU, no torch.
"""
import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_json import load  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
COLORS = {"fa4": "#1f6f3f", "fa4 paged": "#6fbf7f", "cudnn": "#3b6ea8", "flash": "#d08a2c", "torch": "#8c8c8c"}


def all_runs(files):
    runs = []
    for order, path in enumerate(sorted(files)):
        for r in load(path):
            runs.append((r.get("date") or "", order, path, r))
    return runs


def newest(runs, want):
    found = [x for x in runs if want(x[3])]
    return max(found, key=lambda x: (x[0], x[1]))[3] if found else None


def fa4_key(d):
    return next((k for k in d if k.startswith("fa4")), None)


def plot_mha(plt, run, path):
    rows = [r for r in run["rows"] if r.get("tflops")]
    names = [r["shape"] for r in rows]
    k = fa4_key(rows[0]["tflops"])
    series = [(k, "fa4gen", COLORS["fa4"]), ("cudnn", "cuDNN (torch SDPA)", COLORS["cudnn"]),
              ("flash", "FlashAttention-2 (torch SDPA)", COLORS["flash"])]
    fig, ax = plt.subplots(figsize=(11, 4.2))
    w = 0.27
    for i, (key, label, color) in enumerate(series):
        vals = [r["tflops"].get(key) or 0 for r in rows]
        ax.bar([x + (i - 1) * w for x in range(len(rows))], vals, w, label=label, color=color)
    for x, r in enumerate(rows):
        ours, cud = r["tflops"].get(k), r["tflops"].get("cudnn")
        if ours and cud:
            ax.text(x - w, ours + 8, "%.2fx" % (ours / cud), ha="center", va="bottom", fontsize=7)
    ceil = run["meta"].get("ceiling_tflops")
    if ceil:
        ax.axhline(ceil, color="#555555", ls="--", lw=1)
        ax.text(len(rows) - 0.5, ceil + 8, "cuBLAS bf16 GEMM, same run: %.0f" % ceil, ha="right", fontsize=8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_ylim(0, (ceil or max(r["tflops"][k] for r in rows)) * 1.15)
    ax.set_title("MHA forward, sm_90a: %s, %s (labels: fa4gen / cuDNN)" % (run["gpu"], run["date"]), fontsize=10)
    ax.legend(fontsize=8, loc="upper left", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_decode(plt, dense, paged, path):
    groups = sorted({(r["Hq"], r["Hkv"]) for r in dense["rows"] if "Hq" in r}, reverse=True)
    fig, axes = plt.subplots(1, len(groups), figsize=(12, 4.2), sharey=True, squeeze=False)
    copy = dense["meta"].get("copy_gbps")
    paged_bw = {r["shape"]: r["gbps"].get("fa4") for r in (paged["rows"] if paged else []) if "gbps" in r}
    for ax, (hq, hkv) in zip(axes[0], groups):
        rows = [r for r in dense["rows"] if r.get("Hq") == hq and r.get("Hkv") == hkv and "gbps" in r]
        rows.sort(key=lambda r: (r["S"], r["B"]))
        xs = range(len(rows))
        ax.plot(xs, [r["gbps"].get("fa4") for r in rows], "o-", color=COLORS["fa4"], label="fa4gen")
        if paged_bw:
            ax.plot(xs, [paged_bw.get(r["shape"]) for r in rows], "o--", color=COLORS["fa4 paged"],
                    label="fa4gen, paged K/V (page 64, shuffled)")
        ax.plot(xs, [r["gbps"].get("cudnn") for r in rows], "s-", color=COLORS["cudnn"], label="cuDNN (torch SDPA)")
        ax.plot(xs, [r["gbps"].get("flash") for r in rows], "^-", color=COLORS["flash"],
                label="FlashAttention-2 (torch SDPA)")
        if copy:
            ax.axhline(copy, color="#555555", ls="--", lw=1, label="device-to-device copy, same run")
            ax.axhline(0.85 * copy, color="#999999", ls=":", lw=1, label="85% of the copy")
        ax.set_ylim(0, (copy or max(r["gbps"]["fa4"] for r in rows)) * 1.12)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(["B%d\n%dk" % (r["B"], r["S"] // 1024) for r in rows], fontsize=7)
        ax.set_title("GQA %d/%d, d128, seqlen_q 1" % (hq, hkv), fontsize=9)
        ax.set_xlabel("batch, seqlen_k", fontsize=8)
    axes[0][0].set_ylabel("K+V bytes / time, GB/s")
    axes[0][0].legend(fontsize=7, loc="lower right")
    calls = dense["meta"].get("calls_per_graph")
    fig.suptitle("Decode bandwidth: %s, %s (CUDA graphs%s)" % (
        dense["gpu"], dense["date"], ", %d calls per graph" % calls if calls else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_mla(plt, run, path):
    rows = run["rows"]
    fig, ax = plt.subplots(figsize=(9, 4))
    w = 0.38
    xs = range(len(rows))
    ours = [r["tflops"]["fa4"] for r in rows]
    theirs = [r["tflops"].get("torch") or 0 for r in rows]
    ax.bar([x - w / 2 for x in xs], ours, w, color=COLORS["fa4"], label="fa4gen sm_90a")
    ax.bar([x + w / 2 for x in xs], theirs, w, color=COLORS["torch"], label="torch gather + softmax")
    for x, r in zip(xs, rows):
        sp = r.get("speedup_vs_torch") or (r["ms"]["torch"] / r["ms"]["fa4"])
        ax.text(x - w / 2, r["tflops"]["fa4"] + 8, "%.0f  (%.0fx)" % (r["tflops"]["fa4"], sp), ha="center",
                fontsize=8)
    ceil = run["meta"].get("ceiling_tflops")
    if ceil:
        ax.axhline(ceil, color="#555555", ls="--", lw=1)
        ax.text(-0.5, ceil + 8, "cuBLAS bf16 GEMM, same run: %.0f" % ceil, ha="left", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r["shape"] for r in rows], fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_ylim(0, (ceil or max(ours)) * 1.3)
    ax.set_title("Sparse MLA prefill (s_q 4096, d_qk 576, sink): %s, %s" % (run["gpu"], run["date"]), fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "img"))
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py needs matplotlib: python3 -m pip install matplotlib", file=sys.stderr)
        return 1
    runs = all_runs(args.files or glob.glob(os.path.join(args.results, "*.json")))
    os.makedirs(args.out, exist_ok=True)
    made = []
    mha = newest(runs, lambda r: r["benchmark"] == "mha" and r["rows"])
    if mha:
        plot_mha(plt, mha, os.path.join(args.out, "mha-sm90.png"))
        made.append("mha-sm90.png (%s)" % mha["date"])

    def decode(paged):
        return lambda r: (r["benchmark"] == "decode" and bool(r["meta"].get("paged")) == paged and
                          not r["meta"].get("kv_early") and r["meta"].get("graphs") and
                          r["meta"].get("calls_per_graph", 1) > 1 and not r["meta"].get("no_ws") and
                          not r["meta"].get("step", "").endswith("nows"))
    dense = newest(runs, decode(False))
    if dense:
        plot_decode(plt, dense, newest(runs, decode(True)), os.path.join(args.out, "decode-bandwidth.png"))
        made.append("decode-bandwidth.png (%s)" % dense["date"])
    mla = newest(runs, lambda r: r["benchmark"] == "mla_sparse" and r["rows"])
    if mla:
        plot_mla(plt, mla, os.path.join(args.out, "mla-sparse.png"))
        made.append("mla-sparse.png (%s)" % mla["date"])
    print("plot.py: wrote %s into %s" % (", ".join(made) or "nothing (no runs found)", os.path.normpath(args.out)))
    return 0 if made else 1


if __name__ == "__main__":
    sys.exit(main())
