"""The harness's runtime calls: a loaded method keeps its program alive.

ExecuTorch's ``Method`` holds no reference to its ``Program``; a method run after its program was
collected reads freed memory. CI crashed on exactly that (a test unpacked ``_, method =
load_method(...)`` and then reassigned ``_``), and only where the allocator reused the memory.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from xir_tools import harness


class Small(torch.nn.Module):
    """RMSNorm, a linear, a rotation and a softmax; a graph input returned; lifted constants."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 16))

    def forward(self, x):
        norm = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.scale
        h = self.linear(norm)
        turned = torch.cat([h[..., 8:], -h[..., :8]], dim=-1)
        return x, torch.softmax(turned * 0.5, dim=-1) + h


@pytest.fixture(scope="module")
def lowered():
    torch.manual_seed(0)
    module = Small().eval()
    x = torch.randn(1, 5, 16)
    ep = harness.export(module, (x,), dynamic_shapes=({1: torch.export.Dim("s", min=1, max=32)},))
    edge, _ = harness.lower_edge(ep, "xir")
    assert harness.delegate_count(edge) == 1
    return ep, harness.to_buffer(edge)


def test_the_method_keeps_its_program_alive(lowered):
    ep, buffer = lowered
    program, method = harness.load_method(buffer)
    alive = weakref.ref(program)
    del program
    gc.collect()
    assert alive() is not None
    for length in (5, 1, 17):
        x = torch.randn(1, length, 16)
        ok, message, *_ = harness.compare(harness.run_method(method, [x]), harness.reference(ep, (x,)), "fp32")
        assert ok, (length, message)
