#!/usr/bin/env python3
"""The batch-size curve of docs/PERFORMANCE.md from `cosmos-cli bench --batch ... --json` outputs.

    docs/plots/plot_batch.py OUT.png bench_batch_bf16.json [bench_batch_fp8.json ...]

Left: decode tokens per second of all streams together; right: per stream, against batch size
(log scale). One line per file (its precision)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    fig, (total, per) = plt.subplots(1, 2, figsize=(11, 4.2))
    for path in sys.argv[2:]:
        j = json.load(open(path))
        rows = sorted(j["batch"], key=lambda r: r["batch"])
        if not rows:
            continue
        b = [r["batch"] for r in rows]
        label = f'{j["precision"]} ({j["device"]})'
        total.plot(b, [r["tok_per_s"] for r in rows], marker="o", label=label)
        per.plot(b, [r["per_stream_tok_per_s"] for r in rows], marker="o", label=label)
        prompt = j.get("batch_prompt_tokens", 0)
    for ax, title in ((total, "decode tok/s, all streams"), (per, "decode tok/s per stream")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequences decoding together")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"Cosmos-Reason1-7B shape, random weights, {prompt}-token prompts (cosmos-cli bench --batch)")
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=110)


if __name__ == "__main__":
    main()
