"""Every registered pass on programs of a symbolic length, written back (issue 58: a pass made a
``slice_copy`` of a tensor of symbolic length, whose fake implementation fails there, and relied on
a later pass, skipped for bf16 without ``enable_bf16``, to make it writable).

The programs: the dynamic-shape test programs (tests/lowering/test_dynamic_shapes.py,
test_merge_head_chains.py) and a few encoder blocks, exported with a symbolic sequence length, in
fp32 and bf16, as ExecuTorch hands them to xir's rewrite pass (the edge program with the ops xir
keeps whole). Each is rewritten

* by the partitioner's pipeline (fp32; bf16 without ``enable_bf16``; bf16 with it and both bf16
  options' passes), written back;
* by every registered pass alone, written back when it changed the IR,

and the written program keeps its symbol and computes, at two lengths other than the example, what
the module computes in eager PyTorch (the edge program run eagerly: xir's ops have CPU kernels).
The passes that ran over the programs are all the registered passes."""

from __future__ import annotations

import attrs
import pytest
import torch
from torch.export import Dim

import lowering
import xir
from lowering.fx.writeback import write_back
from passes import PassManager
from passes.registry import get_pass_class, listed, pass_names
from tests.lowering import test_dynamic_shapes as dyn
from tests.lowering import test_merge_head_chains as heads
from xir_tools import harness

EXAMPLE, LENGTHS = 7, (3, 12)
WIDTH = dyn.WIDTH


class EncoderBlock(torch.nn.Module):
    """A BERT/ViT block's ops on a symbolic number of tokens: layer norm, fused QKV split, attention
    with softmax, tanh GELU, a select of the first token, a mean over tokens."""

    def __init__(self, heads=4):
        super().__init__()
        self.heads = heads
        self.norm, self.norm2 = torch.nn.LayerNorm(WIDTH), torch.nn.LayerNorm(WIDTH)
        self.qkv, self.out = torch.nn.Linear(WIDTH, 3 * WIDTH), torch.nn.Linear(WIDTH, WIDTH)
        self.up, self.down = torch.nn.Linear(WIDTH, 2 * WIDTH), torch.nn.Linear(2 * WIDTH, WIDTH)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.norm(x)).split(WIDTH, dim=-1)
        q, k, v = (t.view(b, s, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attention = torch.softmax(q @ k.transpose(-1, -2) * 0.25, dim=-1) @ v
        h = x + self.out(attention.transpose(1, 2).reshape(b, s, WIDTH))
        h = h + self.down(torch.nn.functional.gelu(self.up(self.norm2(h)), approximate="tanh"))
        return h, h[:, 0], h.mean(1)


class GroupNormConv(torch.nn.Module):
    """A 1-D convolution and a group norm over a symbolic length (an audio encoder's front)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(WIDTH, WIDTH, 3, padding=1)
        self.norm = torch.nn.GroupNorm(4, WIDTH)

    def forward(self, x):
        h = self.norm(self.conv(x.transpose(1, 2)))
        return torch.nn.functional.gelu(h).transpose(1, 2) + x


class WithTables(torch.nn.Module):
    """A module of test_merge_head_chains.py (x, cos, sin of the symbolic length) on x alone."""

    def __init__(self, make):
        super().__init__()
        self.inner = make()

    def forward(self, x):
        s = x.shape[1]
        angles = torch.arange(s, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1.0, heads.HEAD_DIM)[None]
        return self.inner(x, torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype))


# (test_dynamic_shapes.py's RMSNorm, QKV, Boundaries and Rotary are left out: RMSNormBf16 (in fp32 too),
# EncoderBlock, MiddleDims and PairRope have their ops, at the same boundaries; each program costs an
# export and a to_edge per dtype, most of this file's time)
PROGRAMS = {
    "rms-norm-bf16": dyn.RMSNormBf16,
    "means": dyn.Means,
    "linear-means": dyn.LinearMeans,
    "cast-pair": dyn.CastPair,
    "middle-dims": dyn.MiddleDims,
    "rotate-half": dyn.RotateHalf,
    "slices": dyn.Slices,
    "masked-attention": dyn.MaskedAttention,
    "no-ops": dyn.NoOps,
    "qk-norm-rope": lambda: WithTables(heads.QKNormRope),
    "pair-rope": lambda: WithTables(heads.PairRope),
    "encoder-block": EncoderBlock,
    "group-norm-conv": GroupNormConv,
}
# (dtype, partitioner options): bf16 without enable_bf16 is optimum-executorch's recipe as written
CONFIGS = {
    "fp32": (torch.float32, {}),
    "bf16": (torch.bfloat16, {}),
    "bf16-enabled": (
        torch.bfloat16,
        {"enable_bf16": True, "bf16_linears_as_f16": True, "bf16_activations_in_fp32": True},
    ),
}


class _Captured(Exception):
    pass


def edge_program(module, dtype):
    """``module`` exported with a symbolic length, as ExecuTorch hands it to xir's rewrite pass."""
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.pass_base import ExportedProgramPassBase

    static = tuple(module.static_inputs()) if hasattr(module, "static_inputs") else ()
    sample = (torch.randn(1, EXAMPLE, WIDTH, dtype=dtype), *(t.to(dtype) for t in static))
    ep = harness.export(module, sample, dynamic_shapes=({1: Dim("seq", min=1, max=64)}, *(None for _ in static)))
    captured = []

    class Capture(ExportedProgramPassBase):
        def call(self, program):
            captured.append(program)
            raise _Captured  # (the program is all this needs: no partitioning)

    try:
        to_edge_transform_and_lower(ep, transform_passes=[Capture()], partitioner=[lowering.XnnpackPartitioner()])
    except Exception:
        pass
    (program,) = captured
    return program, tuple(t.to(dtype) for t in static)


@pytest.fixture(scope="module")
def programs():
    cache = {}

    def get(name, dtype):
        if (name, dtype) not in cache:
            torch.manual_seed(0)
            module = PROGRAMS[name]().eval().to(dtype)
            cache[(name, dtype)] = (module, *edge_program(module, dtype))
        return cache[(name, dtype)]

    return get


RAN: dict[str, set] = {}  # config -> the passes that ran (the last test checks all of them ran)


def symbolic(program) -> bool:
    user = program.graph_signature.user_inputs
    x = next(n for n in program.graph.nodes if n.op == "placeholder" and n.name in user)
    return not isinstance(x.meta["val"].shape[1], int)


def check_runs(module, program, static, dtype, what) -> None:
    """The written ``program`` keeps its symbol and computes what ``module`` does, at LENGTHS."""
    assert symbolic(program), what
    runnable = program.module()
    for length in LENGTHS:
        torch.manual_seed(length)
        x = torch.randn(1, length, WIDTH, dtype=dtype)
        with torch.no_grad():
            expected = harness.as_list(module(x, *static))
            got = harness.as_list(runnable(x, *static))
        assert [tuple(t.shape) for t in got] == [tuple(t.shape) for t in expected], (what, length)
        kind = "bf16" if dtype is torch.bfloat16 or what.startswith("cast-pair") else "fp32"
        assert harness.max_error(got, expected) <= harness.allowed_error(expected, kind), (what, length)


def options_pass(p, options):
    """``p`` with the partitioner's enable_bf16, as the partitioner sets it."""
    if attrs.has(type(p)) and "enable_bf16" in attrs.fields_dict(type(p)):
        return attrs.evolve(p, enable_bf16=options.get("enable_bf16", False))
    return p


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_the_pipeline_written_back(programs, name, config):
    dtype, options = CONFIGS[config]
    module, program, static = programs(name, dtype)
    graph = xir.from_exported_program(program)
    pipeline = lowering.XnnpackPartitioner(**options).pipeline
    if PassManager(pipeline).run(graph).changed:
        program = write_back(graph, program)
    RAN.setdefault(config, set()).update(p.name for p in pipeline)
    check_runs(module, program, static, dtype, f"{name} {config}")


def shipped_passes() -> list[str]:
    """xir's own passes, built-in and the backend's (not those a test module defines)."""
    return [name for name in pass_names() if name in listed()]


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_every_registered_pass_alone_written_back(programs, name, config):
    dtype, options = CONFIGS[config]
    module, program, static = programs(name, dtype)
    for pass_name in shipped_passes():
        graph = xir.from_exported_program(program)
        p = options_pass(get_pass_class(pass_name)(), options)
        if PassManager([p]).run(graph).changed:
            check_runs(module, write_back(graph, program), static, dtype, f"{name} {config} {pass_name}")
        RAN.setdefault(config, set()).add(pass_name)


def test_every_registered_pass_ran_in_every_config():
    if len(RAN) < len(CONFIGS):
        pytest.skip("run with the tests above (not selected)")
    for config, names in RAN.items():
        assert names >= set(shipped_passes()), (config, set(shipped_passes()) - names)
