"""What xir's rules for small work buy, measured in fresh processes against stock's program:

* ``mm``: ``mm(a, x) + b`` of n x n matrices, with ``xnnpack.dynamic-mm-as-bmm`` as it is (a product
  under ``SMALL_MM`` multiply-adds stays an ``mm``, outside, as stock leaves it) and with its floor
  at 0 (every such ``mm`` a one-batch ``bmm`` inside);
* ``lstm``: ExecuTorch's LSTM example, with the plan's repair ``select-at-the-edge`` and without it
  (its selects of the input and initial states then run inside as slices and reshapes).

Each case's programs are timed by ``bench.time_programs`` in ``--processes`` fresh interpreters of
``--rounds`` shuffled rounds; it prints each program's median ms and the median (and range) of its
per-round ratio to stock's. ``--threads 1`` sets XNNPACK's threads (default: the runtime's).

    .venv/bin/python scripts/small_work_outside.py [--case mm lstm] [--sizes 2 8 64 96 128 256]
        [--processes 5] [--rounds 500] [--threads N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import warnings
from unittest import mock

os.environ.setdefault("OMP_NUM_THREADS", "1")
warnings.filterwarnings("ignore")
sys.path.insert(0, ".")

import torch  # noqa: E402


class MmAdd(torch.nn.Module):
    def forward(self, a, x, b):
        return torch.mm(a, x) + b


def programs_of(ep, variants: dict) -> tuple[dict, dict]:
    """The ``.pte`` of stock and of each xir variant (a function run around the lowering), and
    their delegates and kernels outside."""
    from xir_tools import harness

    buffers, shapes = {}, {}
    for name, around in [("stock", None)] + list(variants.items()):
        with around() if around else contextlib.nullcontext():
            edge, _ = harness.lower_edge(ep, "stock" if name == "stock" else "xir")
            program = harness.to_program(edge)
        buffers[name] = program.buffer
        shapes[name] = (harness.delegate_count(edge), dict(harness.kernels_outside(program)))
    return buffers, shapes


def report(title: str, buffers: dict, shapes: dict, inputs: list, args) -> None:
    from bench.llm_flow import time_in_fresh_processes

    names, results, threads = time_in_fresh_processes(buffers, args.rounds, args.processes, args.threads, inputs)
    print(f"{title} ({args.processes} processes x {args.rounds} rounds, XNNPACK threads: {threads})")
    for i, name in enumerate(names):
        ms = statistics.median(r["run"]["ms"][i] for r in results)
        ratios = [r["run"]["ratio"][i] for r in results]
        delegates, outside = shapes[name]
        ratio = f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})" if i else "1"
        print(f"  {name:28s} {ms * 1e3:9.2f} us  ratio {ratio:22s} delegates {delegates}  outside {outside}")
    sys.stdout.flush()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", nargs="+", default=["mm", "lstm"], choices=["mm", "lstm"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[2, 8, 64, 96, 128, 256])
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args(argv)

    from lowering import partition
    from lowering.passes import dynamic_mm_as_bmm

    if "mm" in args.case:
        for n in args.sizes:
            torch.manual_seed(0)
            inputs = [torch.randn(n, n) for _ in range(3)]
            ep = torch.export.export(MmAdd(), tuple(inputs))
            variants = {
                "xir": None,
                "xir, every mm as a bmm": lambda: mock.patch.object(dynamic_mm_as_bmm, "SMALL_MM", 0),
            }
            report(f"mm(a, x) + b, {n} x {n}", *programs_of(ep, variants), inputs, args)
    if "lstm" in args.case:
        from bench.example_zoo import entries, flat

        entry = next(e for e in entries() if e.name == "lstm")
        torch.manual_seed(0)
        model, example = entry.make().eval(), entry.inputs()
        ep = torch.export.export(model, example, strict=False)
        without = tuple(r for r in partition.REPAIRS if r.name != "select-at-the-edge")
        variants = {
            "xir": None,
            "xir, selects at the edge in": lambda: mock.patch.object(partition, "REPAIRS", without),
        }
        report("ExecuTorch's LSTM example", *programs_of(ep, variants), flat(example), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
