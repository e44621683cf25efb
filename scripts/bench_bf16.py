"""bf16 on XNNPACK, side by side: a bf16 MLP and a bf16 transformer encoder layer, each lowered

  1. with the stock partitioner's defaults (bf16 ops on ExecuTorch's portable kernels),
  2. with the stock partitioner and enable_bf16=True (where the program loads),
  3. with xir and enable_bf16=True,
  4. in fp32 with xir (the fp32 XNNPACK baseline),

then loaded with ExecuTorch's runtime and timed in one run, interleaved (median of warm runs).

    .venv/bin/python scripts/bench_bf16.py [--runs 30] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, ".")

from bench.zoo import OutputOf  # noqa: E402
from xir_tools.harness import load_method, lower, reference  # noqa: E402


class MLP(torch.nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.up, self.down = torch.nn.Linear(width, hidden), torch.nn.Linear(hidden, width)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


def models(quick: bool):
    from transformers import BertConfig, BertModel

    width = 256 if quick else 512
    yield "mlp", (lambda: MLP(width, 4 * width)), (torch.randn(64, width),)
    config = BertConfig(
        vocab_size=512,
        hidden_size=width,
        num_hidden_layers=1,
        num_attention_heads=8,
        intermediate_size=4 * width,
        max_position_embeddings=128,
    )
    yield (
        "transformer",
        (lambda: OutputOf(BertModel(config), key="last_hidden_state")),
        (torch.randint(0, 512, (1, 64)),),
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows = []
    for name, make, inputs in models(args.quick):
        configurations = [
            ("stock default", "stock", torch.bfloat16, {}),
            ("stock enable_bf16", "stock", torch.bfloat16, {"enable_bf16": True}),
            ("xir enable_bf16", "xir", torch.bfloat16, {"enable_bf16": True}),
            ("xir fp32", "xir", torch.float32, {}),
        ]
        loaded = []
        for label, which, dtype, options in configurations:
            torch.manual_seed(0)
            module = make().eval().to(dtype)
            typed = tuple(t.to(dtype) if t.is_floating_point() else t for t in inputs)
            ep = torch.export.export(module, typed)
            print(f"[{name}] lowering: {label} ...", file=sys.stderr, flush=True)
            result = lower(ep, typed, which, **options)
            error = result.err(reference(ep, typed)) if result.ran else None
            method = None
            if result.ran:
                method = load_method(result.buffer)
                method[1].execute(list(typed))
            loaded.append((label, result, error, method, typed))
        times = {label: [] for label, *_ in loaded}
        for _ in range(args.runs):
            for label, result, error, method, typed in loaded:
                if method is None:
                    continue
                start = time.perf_counter()
                method[1].execute(list(typed))
                times[label].append(time.perf_counter() - start)
        medians = {label: sorted(t)[len(t) // 2] for label, t in times.items() if t}
        for label, result, error, method, typed in loaded:
            median = medians.get(label)
            rows.append(
                (
                    name,
                    label,
                    "yes" if result.ran else "NO",
                    "-" if median is None else f"{median * 1e3:.2f}",
                    "-" if error is None else f"{error:.3g}",
                    str(result.delegates),
                    "" if result.ran else (result.error or "")[:70],
                )
            )
    header = ("model", "configuration", "loads", "median ms", "max err", "delegates", "failure")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
