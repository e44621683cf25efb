"""What an op inside an XNNPACK delegate costs at run time, and what a dynamic shape adds.

    .venv/bin/python scripts/delegate_op_cost.py

A chain of N elementwise ops (relu, then x * 1.001 + 0.001, alternating) on a [1, s, 256] fp32
input, lowered with xir into one delegate, exported once with s static (2) and once with s a
symbol (1..128, run at 2): the median microseconds of a call (300 runs after 20 warm-up runs,
through executorch.runtime, so a few microseconds of it are the Python call).
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


if __name__ == "__main__":
    main()
