#!/usr/bin/env python3
"""Draws out/bench.json (written by bench/src/bin/bench/) as a PNG chart.

    python tools/bench/bench_chart.py out/bench.json out/bench.png

Panels: times (grouped bars of medians with min–max whiskers, library / peer / floor, log
scale), predict throughput, resident memory of N encoder sessions (shared / copied / naive),
and heap bytes allocated per predict against the size of the embedding.
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

COLORS = {"library": "#1f77b4", "peer": "#ff7f0e", "floor": "#7f7f7f"}
LABELS = {
    "library": "library (sam2)",
    "peer": "peer (OpenCV + numpy + ORT Python)",
    "floor": "floor (bandwidth / ORT alone / plain I/O)",
}


def bars(ax, rows, series, log=False, unit=""):
    n = len(rows)
    width = 0.8 / len(series)
    x = np.arange(n)
    for i, key in enumerate(series):
        med, lo, hi, xs = [], [], [], []
        for j, r in enumerate(rows):
            s = r.get(key)
            if not s:
                continue
            xs.append(x[j] + (i - (len(series) - 1) / 2) * width)
            med.append(s["median"])
            lo.append(s["median"] - s["min"])
            hi.append(s["max"] - s["median"])
        if not xs:
            continue
        ax.bar(xs, med, width, label=LABELS.get(key, key), color=COLORS.get(key),
               yerr=[lo, hi], capsize=2, error_kw={"elinewidth": 0.8})
        for xi, m, h in zip(xs, med, hi):
            ax.annotate(f"{m:.3g}", (xi, m + h), textcoords="offset points", xytext=(0, 2),
                        ha="center", va="bottom", fontsize=6.5, rotation=90)
    labels = []
    for r in rows:
        label = r["measurement"].strip()
        extra = []
        if r.get("library_over_floor") is not None:
            extra.append(f"lib/floor {r['library_over_floor']:.3f}×")
        if r.get("peer_over_library") is not None:
            extra.append(f"peer/lib {r['peer_over_library']:.3f}×")
        if r.get("met") is not None:
            extra.append("goal met" if r["met"] else "goal NOT met")
        labels.append(label + ("\n" + ", ".join(extra) if extra else ""))
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=7, rotation=20, ha="right")
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(unit)
    ax.grid(axis="y", alpha=0.3)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        doc = json.load(f)
    rows = doc["rows"]
    times = [r for r in rows if r["unit"] == "ms"]
    tput = [r for r in rows if r["unit"] == "pred/s"]
    alloc = [r for r in rows if r["id"] == "alloc_per_predict"]
    mem = doc.get("memory", {})

    fig = plt.figure(figsize=(16, 13))
    grid = fig.add_gridspec(2, 3, height_ratios=[1.25, 1], hspace=0.75, wspace=0.3)
    ax = fig.add_subplot(grid[0, :])
    bars(ax, times, ["library", "peer", "floor"], log=True, unit="ms (median, min–max; log scale)")
    ax.set_title("Time per operation, 1920×1080 image, bench models (lower is better)")
    ax.legend(fontsize=8, loc="upper left")

    ax = fig.add_subplot(grid[1, 0])
    bars(ax, tput, ["library", "floor"], unit="predictions / s")
    ax.set_title("Predict throughput, one predictor (pool 2)\n(higher is better)", fontsize=10)

    ax = fig.add_subplot(grid[1, 1])
    mrows = mem.get("rows", [])
    if mrows:
        ns = [r["sessions"] for r in mrows]
        x = np.arange(len(ns))
        width = 0.27
        for i, (key, label, color) in enumerate([
            ("shared_mib", "shared (library default)", COLORS["library"]),
            ("copy_mib", "copied (on request)", "#2ca02c"),
            ("naive_mib", "naive ORT sessions", COLORS["peer"]),
        ]):
            vals = [r.get(key) or 0 for r in mrows]
            ax.bar(x + (i - 1) * width, vals, width, label=label, color=color)
            for xi, v in zip(x + (i - 1) * width, vals):
                ax.annotate(f"{v:.0f}", (xi, v), textcoords="offset points", xytext=(0, 2),
                            ha="center", fontsize=6.5)
        ax.axhline(mem.get("weights_mib", 0), color=COLORS["floor"], ls="--", lw=1,
                   label=f"one copy of the weights ({mem.get('weights_mib', 0):.0f} MiB)")
        ax.set_xticks(x)
        ax.set_xticklabels([str(n) for n in ns])
        ax.set_xlabel("encoder sessions in one process")
        ax.set_ylabel("RssAnon added (MiB)")
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    ax.set_title("Resident memory of N encoder sessions", fontsize=10)

    ax = fig.add_subplot(grid[1, 2])
    if alloc:
        a = alloc[0]
        emb = doc["extra"]["allocations"]["embedding_bytes"] / 1048576
        ctrl = doc["extra"]["allocations"]["control_copy_to_host"]
        ctrl_b = ctrl["process_bytes"] if ctrl.get("process_bytes") is not None else ctrl["rust_bytes"]
        names = ["library predict", "ORT alone run", "control: one copy\n(copy_to_host)"]
        vals = [a["library"]["median"], a["floor"]["median"], ctrl_b / 1048576]
        colors = [COLORS["library"], COLORS["floor"], "#d62728"]
        ax.bar(names, vals, color=colors)
        for i, v in enumerate(vals):
            ax.annotate(f"{v:.2f}", (i, v), textcoords="offset points", xytext=(0, 2),
                        ha="center", fontsize=8)
        ax.axhline(emb, color="k", ls="--", lw=1, label=f"embedding ({emb:.0f} MiB)")
        ax.set_ylabel("MiB allocated per call")
        ax.legend(fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    ax.set_title(alloc[0]["measurement"] if alloc else "allocations", fontsize=10)

    goals = [r for r in rows if r.get("met") is not None]
    if goals:
        lines = []
        for r in goals:
            ratios = []
            if r.get("library_over_floor") is not None:
                ratios.append(f"lib/floor {r['library_over_floor']:.3f}×")
            if r.get("peer_over_library") is not None:
                ratios.append(f"peer/lib {r['peer_over_library']:.3f}×")
            lines.append(f"{'met    ' if r['met'] else 'NOT MET'}  {r['measurement'].strip()}: "
                         f"{r['goal']} ({', '.join(ratios)})")
        fig.text(0.01, -0.01, "Goals\n" + "\n".join(lines), family="monospace", fontsize=8,
                 va="top", ha="left")

    m = doc["machine"]
    fig.suptitle(
        f"sam2 benchmark — ONNX Runtime {m['onnxruntime']}, {m['cores']} cores, "
        f"load average {m['load_average_start']} → {m['load_average_end']}"
        + (" (quick)" if m.get("quick") else ""),
        fontsize=12,
    )
    fig.savefig(dst, dpi=110, bbox_inches="tight")


if __name__ == "__main__":
    main()
