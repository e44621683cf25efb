"""What an op inside an XNNPACK delegate costs at run time, what a dynamic shape adds, and what
fusing the linears that read one input saves.

    .venv/bin/python scripts/delegate_op_cost.py

A chain of N elementwise ops (relu, then x * 1.001 + 0.001, alternating) on a [1, s, 256] fp32
input, lowered with xir into one delegate, exported once with s static (2) and once with s a
symbol (1..128, run at 2): the median microseconds of a call (300 runs after 20 warm-up runs,
through executorch.runtime, so a few microseconds of it are the Python call).

Then a decoder layer's projections at dim 256 (q 256, k 64, v 64, gate and up 768 each, no bias),
as five linears or as two fused ones (q/k/v in one, gate/up in one) with slices, one delegate
each, the sequence length a symbol: the median call at 1 and 7 tokens (5 interleaved rounds).
"""

from __future__ import annotations

import statistics
import time

import torch

from xir_tools import harness


class Chain(torch.nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def forward(self, x):
        for i in range(self.n):
            x = x * 1.001 + 0.001 if i % 2 else torch.relu(x)
        return x


def median_us(method, inputs, runs: int = 300) -> float:
    for _ in range(20):
        method.execute(inputs)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        method.execute(inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


D = 256


class Separate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(D, n, bias=False) for n in (256, 64, 64))
        self.w1, self.w3 = (torch.nn.Linear(D, 768, bias=False) for _ in range(2))

    def forward(self, x):
        return self.q(x) * 2, self.k(x) * 2, self.v(x) * 2, torch.nn.functional.silu(self.w1(x)) * self.w3(x)


class Fused(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.w13 = torch.nn.Linear(D, 384, bias=False), torch.nn.Linear(D, 1536, bias=False)

    def forward(self, x):
        a, g = self.qkv(x), self.w13(x)
        return (
            a[..., :256] * 2,
            a[..., 256:320] * 2,
            a[..., 320:] * 2,
            torch.nn.functional.silu(g[..., :768]) * g[..., 768:],
        )


def fusion() -> None:
    shapes = ({1: torch.export.Dim("s", min=1, max=128)},)
    x = torch.randn(1, 2, D)
    methods = {}
    for name, module in (("separate", Separate()), ("fused", Fused())):
        edge, _ = harness.lower_edge(torch.export.export(module.eval(), (x,), dynamic_shapes=shapes), "xir")
        methods[name] = harness.load_method(harness.to_buffer(edge))
    print(f"\n{'tokens':>6} {'5 linears us':>13} {'2 fused us':>11}")
    for tokens in (1, 7):
        inputs = [torch.randn(1, tokens, D)]
        rounds = {name: [] for name in methods}
        for _ in range(5):
            for name, (_, method) in methods.items():
                rounds[name].append(median_us(method, inputs, 400))
        print(f"{tokens:>6} {statistics.median(rounds['separate']):>13.1f} {statistics.median(rounds['fused']):>11.1f}")


def main() -> None:
    x = torch.randn(1, 2, 256)
    print(f"{'ops':>5} {'delegates':>10} {'static us':>10} {'dynamic us':>11}")
    for n in (10, 40, 160):
        row = {}
        for dynamic in (False, True):
            shapes = ({1: torch.export.Dim("s", min=1, max=128)},) if dynamic else None
            edge, _ = harness.lower_edge(torch.export.export(Chain(n).eval(), (x,), dynamic_shapes=shapes), "xir")
            _, method = harness.load_method(harness.to_buffer(edge))
            row[dynamic] = (harness.delegate_count(edge), median_us(method, [x]))
        print(f"{n:>5} {row[False][0]:>10} {row[False][1]:>10.1f} {row[True][1]:>11.1f}")
    fusion()


if __name__ == "__main__":
    main()
