"""One fp32 linear, alone, in each runtime the zoo compares: ExecuTorch's XNNPACK delegate (the
linear lowered by xir, one fully connected op), ONNX Runtime's CPU provider and eager PyTorch,
each on as many threads as ExecuTorch's XNNPACK threadpool has (one per core), timed in turns
(``bench.alternatives.interleaved``). What an encoder's time mostly is at its real size (ViT's
profile: about 80% in fully connected ops), so where xir's ViT or SigLIP is slower than ONNX
Runtime, this says how much of it the GEMM kernels explain.

    .venv/bin/python scripts/gemm_alternatives.py [--runs 60] [--bf16]

``--bf16``: the linear in bf16 instead: xir's program (``enable_bf16``), the same with
``bf16_linears_as_f16`` (XNNPACK's fp16 GEMM), and eager bf16 (ONNX Runtime's CPU provider has
no bf16 GEMM); the last column is then xir's default over eager's.

Shapes (rows x in x out): ViT's and SigLIP's MLP up and down projections and attention
projection at ``python -m bench``'s sizes (197 tokens, hidden 384, MLP 1536), and a 1B-class
decoder's MLP at one token.
"""

from __future__ import annotations

import argparse
import sys
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, ".")

from contextlib import nullcontext  # noqa: E402

import torch  # noqa: E402

SHAPES = ((197, 384, 1536), (197, 1536, 384), (197, 384, 384), (1, 2048, 5632))


def main(argv=None) -> int:
    from bench.alternatives import CORES, eager_runner, interleaved, onnxruntime_runner
    from xir_tools import harness

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60, help="timed runs of each runtime per shape")
    parser.add_argument("--bf16", action="store_true", help="the linear in bf16: xir, xir with fp16 GEMMs, eager")
    args = parser.parse_args(argv)
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    # {column: xir's partitioner options}, then the other runtimes' columns
    programs = (
        {"xir bf16": {"enable_bf16": True}, "xir f16 GEMM": {"enable_bf16": True, "bf16_linears_as_f16": True}}
        if args.bf16
        else {"XNNPACK (xir)": {}}
    )
    others = ("eager",) if args.bf16 else ("ONNX Runtime", "eager")
    columns = (*programs, *others)
    last = "xir/eager" if args.bf16 else "XNNPACK/ORT"
    print(
        f"one {'bf16' if args.bf16 else 'fp32'} linear with bias, {CORES} threads each; median ms of {args.runs} runs in turns (GFLOP/s)"
    )
    print(f"  {'rows x in x out':<18}" + "".join(f"{c:>22}" for c in columns) + f"{last:>13}")
    for rows, fan_in, fan_out in SHAPES:
        torch.manual_seed(0)
        module = torch.nn.Linear(fan_in, fan_out).eval().to(dtype)
        inputs = (torch.randn(1, rows, fan_in, dtype=dtype),)
        ep = harness.export(module, inputs)
        runners, shape = {}, f"{rows}x{fan_in}x{fan_out}"
        for name, options in programs.items():
            result = harness.lower(ep, inputs, **options)
            if not result.ran or result.delegated.get("aten.linear") != 1 or result.outside:
                print(
                    f"  {shape}: {name} is not one delegated linear ({result.error or (result.delegated, result.outside)})"
                )
                continue
            _, method = harness.load_method(result.buffer)
            runners[name] = (lambda m=method: m.execute(list(inputs)), nullcontext())
        why = "-"
        if not args.bf16:
            ort, why = onnxruntime_runner(module, inputs)
            if ort is not None:
                runners["ONNX Runtime"] = ort
        eager, _ = eager_runner(module, inputs, CORES)
        if eager is not None:
            runners["eager"] = eager
        ms = {name: seconds * 1e3 for name, seconds in interleaved(runners, args.runs).items()}
        flops = 2 * rows * fan_in * fan_out

        def cell(name):
            return f"{ms[name]:.3f} ({flops / ms[name] / 1e6:.0f})" if name in ms else "-"

        ours, theirs = columns[0], ("eager" if args.bf16 else "ONNX Runtime")
        ratio = f"{ms[ours] / ms[theirs]:.2f}x" if ours in ms and theirs in ms else why
        print(f"  {shape:<18}" + "".join(f"{cell(c):>22}" for c in columns) + f"{ratio:>13}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
