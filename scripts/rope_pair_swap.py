"""What ``xnnpack.rope-as-pair-swap`` buys: one decoder layer's q and k rotary embeddings, written as
ExecuTorch's Llama writes them (``unbind`` of the pairs, rotate, ``stack``), on a dynamic sequence
length, lowered by xir with its default pipeline and with the same pipeline without the pass;
both programs in one interleaved loop (median), at 1 and 7 tokens, with their errors against eager.

``--hf``: the same for the Hugging Face rotation (``rotate_half``: halves swapped, the upper one
negated) and ``xnnpack.rotate-half-sign-in-sin``, also at 64 tokens.

    .venv/bin/python scripts/rope_pair_swap.py [--hf] [--runs 3000] [--heads 8] [--kv-heads 2] [--head-dim 32]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import warnings

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, ".")


class Rope(torch.nn.Module):
    """The flow's ``apply_rotary_emb`` (examples/models/llama/rope.py), for q and k of one layer."""

    def __init__(self, heads, kv_heads, head_dim):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim

    def forward(self, q, k, cos, sin):
        def rotate(x, heads):
            x = x.view(1, -1, heads, self.head_dim)
            r, i = x.reshape(x.shape[:-1] + (-1, 2)).unbind(-1)
            c, s = cos.view(1, -1, 1, self.head_dim // 2), sin.view(1, -1, 1, self.head_dim // 2)
            return torch.stack([r * c - i * s, r * s + i * c], dim=-1).flatten(3)

        return rotate(q, self.heads), rotate(k, self.kv_heads)


class RotateHalf(torch.nn.Module):
    """Transformers' ``apply_rotary_pos_emb`` (and the flow's ``hf_apply_rotary_emb``) for q and k of one
    layer, the tables of the head dim's size unsqueezed at the heads' dim."""

    def __init__(self, heads, kv_heads, head_dim):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim

    def forward(self, q, k, cos, sin):
        def rotate_half(x):
            half = x.shape[-1] // 2
            return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

        q, k = q.view(1, -1, self.heads, self.head_dim), k.view(1, -1, self.kv_heads, self.head_dim)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def main() -> int:
    from lowering import XnnpackPartitioner
    from lowering.pipeline import DEFAULT_PIPELINE
    from xir_tools.harness import delegated_ops, load_method, lower_edge, max_error, run_method, to_buffer

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument(
        "--hf", action="store_true", help="the Hugging Face rotation and xnnpack.rotate-half-sign-in-sin"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = (RotateHalf if args.hf else Rope)(args.heads, args.kv_heads, args.head_dim).eval()
    rewrite, rewritten, lengths = (
        ("xnnpack.rotate-half-sign-in-sin", "sign in sin", (1, 7, 64))
        if args.hf
        else ("xnnpack.rope-as-pair-swap", "pair swap", (1, 7))
    )
    d = args.head_dim
    table = d if args.hf else d // 2

    def inputs(n):
        return (
            torch.randn(1, n, args.heads * d),
            torch.randn(1, n, args.kv_heads * d),
            torch.randn(n, table),
            torch.randn(n, table),
        )

    seq = torch.export.Dim("seq", min=1, max=128)
    ep = torch.export.export(model, inputs(7), dynamic_shapes=({1: seq}, {1: seq}, {0: seq}, {0: seq}))
    without = ",".join(p for p in DEFAULT_PIPELINE.split(",") if p != rewrite)
    programs = {}
    for name, pipeline in (("as written", without), (rewritten, None)):
        edge, _ = lower_edge(ep, partitioner=XnnpackPartitioner(pipeline=pipeline))
        inside = delegated_ops(edge)
        programs[name] = load_method(to_buffer(edge))
        print(
            f"{name:<11} ops inside: {sum(inside.values())} ({', '.join(f'{op} x{n}' for op, n in sorted(inside.items()))})"
        )
    print(
        f"\nrotary embedding of q ({args.heads} heads) and k ({args.kv_heads}), head dim {d}, one delegate each; "
        f"median of {args.runs} interleaved runs"
    )
    for n in lengths:
        x = inputs(n)
        expected = list(model(*x))
        times = {label: [] for label in programs}
        for _ in range(args.runs):
            order = list(programs)
            random.shuffle(order)
            for label in order:
                start = time.perf_counter()
                programs[label][1].execute(list(x))
                times[label].append(time.perf_counter() - start)
        cells = []
        for label, (_, method) in programs.items():
            error = max_error(run_method(method, list(x)), expected)
            cells.append(f"{label} {sorted(times[label])[len(times[label]) // 2] * 1e6:.1f} us (max err {error:.1g})")
        print(f"  {n} token{'s' if n > 1 else ''}: " + ", ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
