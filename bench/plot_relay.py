#!/usr/bin/python3
"""Plots bench/relay_bench's CSV: relayed tokens/s against concurrent
streams for direct, the outrider relay and the Python relay, one panel per
engine mode. Debian: python3-matplotlib.

    /usr/bin/python3 bench/plot_relay.py relay_bench.csv docs/relay_throughput.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERIES = [("direct_tok_s", "direct to the engine"),
          ("outrider_tok_s", "outrider relay"),
          ("python_tok_s", "Python grpcio relay")]
TITLES = {"no_sleep": "engine in no-sleep mode",
          "model_speed": "engine at model speed"}


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    modes = [m for m in TITLES if any(r["engine"] == m for r in rows)]
    fig, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 4),
                             squeeze=False)
    for ax, mode in zip(axes[0], modes):
        mine = [r for r in rows if r["engine"] == mode]
        streams = [int(r["streams"]) for r in mine]
        for key, label in SERIES:
            ax.plot(streams, [float(r[key]) for r in mine], marker="o",
                    label=label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(streams)
        ax.set_xticklabels([str(s) for s in streams])
        ax.set_xlabel("concurrent streams")
        ax.set_ylabel("tokens/s")
        ax.set_ylim(bottom=0)
        ax.set_title(TITLES[mode])
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
