"""What ``bf16_linears_as_f16`` buys: a stack of MLP blocks (linear, relu, linear) at one token,
at growing weight sizes, in fp32, in bf16 as XNNPACK runs it by default, and in bf16 with its
linears as XNNPACK's fp16 GEMM; stock's bf16 program beside them.

    .venv/bin/python scripts/bf16_linear_f16.py [--runs N]

Each program is lowered with to_edge_transform_and_lower, written, loaded by the runtime and run
interleaved with the others (median ms of --runs calls on one token). The error columns are the
max abs error against the fp32 model (what the bf16 weights approximate) and against eager bf16.
XNNPACK as ExecuTorch 1.5.1 builds it runs a bf16 linear as converts around an fp32 GEMM (its
weights unpacked to fp32 when the program loads), so bf16 takes as long as fp32; its fp16 GEMM
reads fp16 weights, half the bytes, which is what a one-token step is bound by once the weights
no longer fit in the caches.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from xir_tools.harness import load_method, lower_edge, to_buffer  # noqa: E402

SIZES = ((256, 1024, 4), (512, 1536, 4), (1024, 2816, 4))  # (dim, hidden, blocks)


class Blocks(torch.nn.Module):
    def __init__(self, dim: int, hidden: int, blocks: int):
        super().__init__()
        self.up = torch.nn.ModuleList(torch.nn.Linear(dim, hidden, bias=False) for _ in range(blocks))
        self.down = torch.nn.ModuleList(torch.nn.Linear(hidden, dim, bias=False) for _ in range(blocks))

    def forward(self, x):
        for up, down in zip(self.up, self.down):
            x = down(torch.relu(up(x))) + x
        return x


VARIANTS = (  # name, dtype, partitioner, options
    ("fp32 xir", torch.float32, "xir", {}),
    ("bf16 stock", torch.bfloat16, "stock", {"enable_bf16": True}),
    ("bf16 xir", torch.bfloat16, "xir", {"enable_bf16": True}),
    ("bf16 xir f16-linears", torch.bfloat16, "xir", {"enable_bf16": True, "bf16_linears_as_f16": True}),
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    print(
        f"one token, median ms of {args.runs} interleaved calls; err = max abs error against the fp32 model / "
        f"against eager bf16 (OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']})\n"
    )
    header = f"{'dim x hidden x blocks':<22}{'fp32 MB':>8}  " + "".join(f"{name:>22}" for name, *_ in VARIANTS)
    print(header + f"{'f16-linears / fp32':>20}{'err f16-linears':>18}{'err bf16 xir':>16}")
    for dim, hidden, blocks in SIZES:
        model = Blocks(dim, hidden, blocks).eval()
        model_bf16 = copy.deepcopy(model).to(torch.bfloat16)
        x = torch.randn(1, dim).to(torch.bfloat16)
        with torch.no_grad():
            truth, eager_bf16 = model(x.float()), model_bf16(x).float()
        methods, errors = {}, {}
        for name, dtype, which, options in VARIANTS:
            module, inputs = (model, (x.float(),)) if dtype is torch.float32 else (model_bf16, (x,))
            edge, _ = lower_edge(torch.export.export(module, inputs), which, **options)
            program, method = load_method(to_buffer(edge))
            out = method.execute(list(inputs))[0].float()
            methods[name] = (program, method, list(inputs))
            errors[name] = ((out - truth).abs().max().item(), (out - eager_bf16).abs().max().item())
        times = {name: [] for name in methods}
        for _ in range(5):
            for _, method, inputs in methods.values():
                method.execute(inputs)
        for _ in range(args.runs):
            for name, (_, method, inputs) in methods.items():
                start = time.perf_counter()
                method.execute(inputs)
                times[name].append(time.perf_counter() - start)
        ms = {name: statistics.median(t) * 1e3 for name, t in times.items()}
        megabytes = 2 * blocks * dim * hidden * 4 / 1e6
        f16 = "bf16 xir f16-linears"
        print(
            f"{f'{dim} x {hidden} x {blocks}':<22}{megabytes:>8.1f}  "
            + "".join(f"{ms[name]:>22.3f}" for name, *_ in VARIANTS)
            + f"{ms[f16] / ms['fp32 xir']:>19.2f}x"
            + f"{errors[f16][0]:>10.2g} / {errors[f16][1]:<6.2g}{errors['bf16 xir'][0]:>8.2g} / {errors['bf16 xir'][1]:<6.2g}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
