"""The ``xir`` command.

    xir demo [--out DIR] [--only NAME ...]   lower the built-in examples with stock and with xir,
                                              run both on ExecuTorch's runtime, compare with eager
    xir passes                                the registered passes, their options and descriptions
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TORCH_LOGS", "")
    import logging

    logging.getLogger().setLevel(logging.ERROR)


def _demo(args) -> int:
    _quiet()
    import torch

    import executorch.kernels.quantized  # noqa: F401  (Q/DQ outside delegates)

    import xir
    from passes import DumpIR

    from .compare import lower, reference
    from .examples import EXAMPLES, edge_program, export_example

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = args.only or list(EXAMPLES)
    rows = []
    for name in names:
        example = EXAMPLES[name]
        print(f"[{name}] {example.description}: exporting ...", file=sys.stderr, flush=True)
        ep = export_example(example)
        inputs = example.example_inputs()
        ref = reference(ep, inputs)
        bf16 = example.dtype == torch.bfloat16
        (out / f"{name}.xir").write_text(xir.print_graph(xir.from_exported_program(edge_program(ep))))
        results = {}
        for which in ("stock", "xir"):
            print(f"[{name}] lowering with {which} ...", file=sys.stderr, flush=True)
            options = {"enable_bf16": bf16}
            if which == "xir":
                options["instruments"] = [DumpIR(out / f"{name}-passes")]
            result = lower(ep, inputs, which, **options)
            results[which] = result
            if result.buffer is not None:
                (out / f"{name}-{which}.pte").write_bytes(result.buffer)
            latency = _latency(result.buffer, inputs) if result.ran else None
            tolerance = (2e-2 if bf16 else 1e-4) * max(1.0, max(t.abs().max().item() for t in ref))
            if example.quantize:
                tolerance = 0.05 * max(t.abs().max().item() for t in ref)
            error = result.err(ref) if result.ran else None
            rows.append((name, which, "yes" if result.ran else "NO", "-" if error is None else ("yes" if error <= tolerance else "NO"),
                         "-" if error is None else f"{error:.2g}", str(sum(result.delegated.values())),
                         str(sum(result.outside.values())), "-" if latency is None else f"{latency * 1e3:.3f}",
                         "" if result.ran else (result.error or "")[:60]))
        if results["xir"].partitioner is not None:
            (out / f"{name}-report.txt").write_text(results["xir"].partitioner.report())
    header = ("model", "partitioner", "loads", "matches", "max err", "delegated", "outside", "ms", "failure")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print(f"\n.pte files, IR dumps (per pass) and partition reports: {out}/")
    return 0


def _latency(buffer: bytes, inputs: tuple, runs: int = 20) -> float:
    """Median wall time of warm runs of the loaded program."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(buffer)
    method = program.load_method("forward")
    method.execute(list(inputs))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        method.execute(list(inputs))
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def _passes(args) -> int:
    from passes import pass_help

    for name, options, description in pass_help():
        print(f"{name}{'{' + options + '}' if options else ''}\n    {description}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="xir", description="Lower PyTorch programs to ExecuTorch's XNNPACK backend, correctly.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="lower the built-in examples with stock and with xir, run and compare them")
    demo.add_argument("--out", default="xir-demo", help="folder for .pte files, IR dumps and reports (default: xir-demo)")
    demo.add_argument("--only", nargs="*", help="run only these examples")
    demo.set_defaults(run=_demo)
    passes = commands.add_parser("passes", help="list the registered passes")
    passes.set_defaults(run=_passes)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
