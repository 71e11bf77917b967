#!/usr/bin/python3
"""Plots bench/dispatch_bench's CSV: CPU per token of the router and of the
relay on the path (the sidecar, or the Python relay), by dispatch, against
concurrent streams, one row per process and one column per engine mode;
medians over the rounds, on a log scale (the Python relay costs tens of
times more). Debian: python3-matplotlib.

    /usr/bin/python3 bench/plot_dispatch.py docs/dispatch_bench.csv docs/dispatch_cpu.png
"""
import csv
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"direct": "direct (router reads the engine)",
          "relay": "relay (a stream a request)",
          "mux": "mux (one stream a sidecar)",
          "python": "Python grpcio relay"}
COLORS = {"direct": "tab:blue", "relay": "tab:orange", "mux": "tab:green",
          "python": "tab:red"}
ENGINES = {"no_sleep": "engine in no-sleep mode",
           "model_speed": "engine at model speed"}
PROCESSES = [("router_us_per_token", "router CPU µs / token"),
             ("relay_us_per_token", "relay CPU µs / token")]


def medians(rows, engine, dispatch, key):
    by_streams = {}
    for r in rows:
        if r["engine"] == engine and r["dispatch"] == dispatch:
            by_streams.setdefault(int(r["streams"]), []).append(float(r[key]))
    streams = sorted(by_streams)
    return streams, [statistics.median(by_streams[s]) for s in streams]


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    engines = [e for e in ENGINES if any(r["engine"] == e for r in rows)]
    dispatches = [d for d in LABELS if any(r["dispatch"] == d for r in rows)]
    fig, axes = plt.subplots(len(PROCESSES), len(engines),
                             figsize=(5.5 * len(engines), 8), squeeze=False)
    for row, (key, ylabel) in enumerate(PROCESSES):
        for col, engine in enumerate(engines):
            ax = axes[row][col]
            for d in dispatches:
                if key == "relay_us_per_token" and d == "direct":
                    continue  # no relay on direct dispatch's path
                streams, values = medians(rows, engine, d, key)
                if streams:
                    ax.plot(streams, values, marker="o", label=LABELS[d],
                            color=COLORS[d])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ticks = sorted({int(r["streams"]) for r in rows})
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(s) for s in ticks])
            ax.set_xlabel("concurrent SSE streams")
            ax.set_ylabel(ylabel)
            ax.set_title(ENGINES[engine])
            ax.grid(True, which="both", alpha=0.3)
            if col == 0:
                ax.legend(fontsize=8)
    fig.suptitle("CPU per token by dispatch (median of the rounds)")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)


if __name__ == "__main__":
    main()
