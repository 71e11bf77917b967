#!/usr/bin/python3
"""A multi-turn conversation workload in the Mooncake trace's format, for
bench/trace_replay.py --trace: each turn's prompt is the conversation so far
(a system prompt shared with other conversations, every earlier user turn
and answer) plus the new user turn, and the next turn follows the answer
after a think time. Deterministic for a seed.

  bench/conversation_trace.py --conversations 300 --seed 1 --out /tmp/conv.jsonl
  bench/trace_replay.py --trace /tmp/conv.jsonl --workers 3 --time-scales 4

A time scale shortens think times as much as it speeds arrivals: scaled far
(90x: think times of 0.2 s) every conversation waits mostly on its own
answers, a closed loop whose TTFT follows the throughput. To load the
engines with think times still long against an answer, start conversations
faster instead (--rate, more --conversations) at a modest scale;
--show-load prints the load that offers (docs/benchmarks.md).

Each line: timestamp (ms; the first turn's arrival, later turns' nominal
times as if answers were instant), input_length, output_length, hash_ids
(one id per 512 tokens of the conversation's text: a full block keeps its id
in every later turn; a turn's last partial block gets an id of its own, as a
hash of a cut block would), and, for the replay, conversation, turn and
think_ms (the pause between the previous answer and this turn: the replay
sends a conversation's turns one after another, each think_ms / scale after
the last answer ended, so that a turn finds what its predecessor left).

Shapes (all overridable; medians and spreads of log-normal draws):
conversations start as a Poisson process; 2-20 turns (2 + a geometric draw,
mean --mean-turns); one of --system-prompts system prompts (Zipf-popular,
300-3,000 tokens) each; user turns median 150 tokens; answers median 250;
think times median 20 s. These are this generator's choices, not a fitted
public distribution (none could be fetched here); the seed, the shape flags
and the summary line make a run reproducible and its shape visible.
"""
import argparse
import json
import math
import random
import sys

HASH_TOKENS = 512  # tokens per hash id, as the Mooncake trace
TOKEN_IDS = 31000  # trace_replay.py turns id h into tokens by h mod 31000


def lognormal(rng, median, sigma, lo, hi):
    return int(min(hi, max(lo, round(median * math.exp(rng.gauss(0.0, sigma))))))


class Ids:
    """Hash ids handed out in order, so that no two blocks share one: the
    replay derives a block's tokens from its id modulo 31,000, so more ids
    than that would alias."""

    def __init__(self):
        self.next = 1

    def take(self):
        if self.next >= TOKEN_IDS:
            sys.exit("conversation_trace: more than 31,000 distinct blocks; "
                     "fewer conversations or shorter turns")
        self.next += 1
        return self.next - 1


def build(args):
    rng = random.Random(args.seed)
    ids = Ids()
    # System prompts: lengths, whole-block ids, popularity (Zipf, s = 1).
    systems = []
    for _ in range(args.system_prompts):
        n = lognormal(rng, args.system_median, 0.6, 300, 3000)
        systems.append({"tokens": n, "blocks": [ids.take() for _ in range(n // HASH_TOKENS)]})
    weights = [1.0 / (i + 1) for i in range(len(systems))]
    recs, t_start = [], 0.0
    for c in range(args.conversations):
        t_start += rng.expovariate(args.rate) * 1000.0
        sysp = rng.choices(systems, weights)[0] if systems else {"tokens": 0, "blocks": []}
        turns = min(args.max_turns, 2 + int(rng.expovariate(1.0 / max(0.01, args.mean_turns - 2))))
        length, blocks, t = sysp["tokens"], list(sysp["blocks"]), t_start
        for k in range(turns):
            user = lognormal(rng, args.user_median, 1.0, 8, 4096)
            answer = lognormal(rng, args.answer_median, 0.7, 16, 2048)
            think = 0 if k == 0 else lognormal(rng, args.think_median_s * 1000, 0.8, 2000, 600000)
            t += think
            prompt = length + user
            if prompt + answer > args.max_context:
                break
            while len(blocks) < prompt // HASH_TOKENS:  # full blocks keep their ids
                blocks.append(ids.take())
            hash_ids = list(blocks)
            if prompt % HASH_TOKENS:
                hash_ids.append(ids.take())  # the cut last block: its own id
            recs.append({"timestamp": round(t), "input_length": prompt,
                         "output_length": answer, "hash_ids": hash_ids,
                         "conversation": c, "turn": k, "think_ms": think})
            length = prompt + answer
    recs.sort(key=lambda r: (r["timestamp"], r["conversation"], r["turn"]))
    return recs


def summary(recs):
    convs = {}
    for r in recs:
        convs[r["conversation"]] = max(convs.get(r["conversation"], 0), r["turn"] + 1)
    turns = sorted(convs.values())
    lens = sorted(r["input_length"] for r in recs)
    span = (recs[-1]["timestamp"] - recs[0]["timestamp"]) / 1000.0 if recs else 0
    return (f"{len(recs)} requests in {len(convs)} conversations "
            f"(turns: median {turns[len(turns) // 2]}, max {turns[-1]}); prompts "
            f"median {lens[len(lens) // 2]} tokens, max {lens[-1]}; nominal span "
            f"{span:.0f} s")


def offered_load(recs, scale, answer_s, window_s=10.0):
    """Requests a second the replay would send in each window at `scale`,
    were every answer to take `answer_s` (the load the trace offers before
    any queueing: a conversation's next turn waits for its answer)."""
    convs = {}
    for r in recs:
        convs.setdefault(r["conversation"], []).append(r)
    t0 = min(r["timestamp"] for r in recs)
    times = []
    for turns in convs.values():
        turns.sort(key=lambda r: r["turn"])
        t = (turns[0]["timestamp"] - t0) / 1000.0 / scale
        for r in turns:
            if r["turn"] > 0:
                t += answer_s + r["think_ms"] / 1000.0 / scale
            times.append(t)
    counts = [0] * (int(max(times) // window_s) + 1)
    for t in times:
        counts[int(t // window_s)] += 1
    return [c / window_s for c in counts]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=1.0,
                    help="conversations started per second (Poisson)")
    ap.add_argument("--mean-turns", type=float, default=6.0)
    ap.add_argument("--max-turns", type=int, default=20)
    ap.add_argument("--system-prompts", type=int, default=12)
    ap.add_argument("--system-median", type=int, default=1200, help="tokens")
    ap.add_argument("--user-median", type=int, default=150, help="tokens")
    ap.add_argument("--answer-median", type=int, default=250, help="tokens")
    ap.add_argument("--think-median-s", type=float, default=20.0)
    ap.add_argument("--max-context", type=int, default=32768,
                    help="a conversation ends before a turn would pass this")
    ap.add_argument("--out", help="file to write (default: standard output)")
    ap.add_argument("--show-load", type=float, metavar="SCALE",
                    help="also print the requests a second the replay at this "
                         "time scale would offer, per 10 s, were answers to "
                         "take 0.3 s")
    args = ap.parse_args()
    if args.mean_turns < 2 or args.max_turns < 2:
        ap.error("conversations have at least 2 turns")
    recs = build(args)
    out = open(args.out, "w") if args.out else sys.stdout
    for r in recs:
        out.write(json.dumps(r, separators=(",", ":")) + "\n")
    if args.out:
        out.close()
    print(summary(recs), file=sys.stderr)
    if args.show_load and recs:
        rates = offered_load(recs, args.show_load, 0.3)
        print(f"offered at {args.show_load:g}x, requests/s per 10 s: "
              + " ".join(f"{r:.0f}" for r in rates) + f"; peak {max(rates):.0f}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
