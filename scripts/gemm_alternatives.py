"""One fp32 linear, alone, in each runtime the zoo compares: ExecuTorch's XNNPACK delegate (the
linear lowered by xir, one fully connected op), ONNX Runtime's CPU provider and eager PyTorch,
each on as many threads as ExecuTorch's XNNPACK threadpool has (one per core), timed in turns
(``bench.alternatives.interleaved``). What an encoder's time mostly is at its real size (ViT's
profile: about 80% in fully connected ops), so where xir's ViT or SigLIP is slower than ONNX
Runtime, this says how much of it the GEMM kernels explain.

    .venv/bin/python scripts/gemm_alternatives.py [--runs 60]

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
    args = parser.parse_args(argv)
    print(f"one fp32 linear with bias, {CORES} threads each; median ms of {args.runs} runs in turns (GFLOP/s)")
    print(f"  {'rows x in x out':<18}{'XNNPACK (xir)':>22}{'ONNX Runtime':>22}{'eager':>22}{'XNNPACK/ORT':>13}")
    for rows, fan_in, fan_out in SHAPES:
        torch.manual_seed(0)
        module, inputs = torch.nn.Linear(fan_in, fan_out).eval(), (torch.randn(1, rows, fan_in),)
        ep = harness.export(module, inputs)
        result = harness.lower(ep, inputs)
        if not result.ran or result.delegated.get("aten.linear") != 1:
            print(f"  {rows}x{fan_in}x{fan_out}: not one delegated linear ({result.error or result.delegated})")
            continue
        _, method = harness.load_method(result.buffer)
        runners = {"xnnpack": (lambda m=method: m.execute(list(inputs)), nullcontext())}
        ort, why = onnxruntime_runner(module, inputs)
        if ort is not None:
            runners["ort"] = ort
        eager, _ = eager_runner(module, inputs, CORES)
        if eager is not None:
            runners["eager"] = eager
        ms = {name: seconds * 1e3 for name, seconds in interleaved(runners, args.runs).items()}
        flops = 2 * rows * fan_in * fan_out

        def cell(name):
            return f"{ms[name]:.3f} ({flops / ms[name] / 1e6:.0f})" if name in ms else "-"

        ratio = f"{ms['xnnpack'] / ms['ort']:.2f}x" if "ort" in ms else why
        print(f"  {f'{rows}x{fan_in}x{fan_out}':<18}{cell('xnnpack'):>22}{cell('ort'):>22}{cell('eager'):>22}{ratio:>13}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
