"""What the end-to-end tests of a rewrite that must not change a number share: a module lowered by
xir with its default pipeline and with that pipeline less one pass, each loaded once on
ExecuTorch's runtime, and the two run on the same inputs against eager PyTorch and against each
other, to the bit (tests/lowering/test_merge_head_chains.py, test_fuse_sibling_linears.py)."""

from __future__ import annotations

import torch

from lowering.pipeline import DEFAULT_PIPELINE
from xir_tools import harness


def pipeline_without(name: str) -> str:
    """The default pipeline's text without the pass ``name``."""
    return ",".join(p for p in DEFAULT_PIPELINE.split(",") if p != name)


class Lowered:
    """``module`` exported on ``sample`` with ``dynamic_shapes``, lowered by xir (the default
    pipeline, or ``pipeline``; ``options`` for its partitioner, e.g. ``enable_bf16=True``),
    serialized and loaded once."""

    def __init__(self, module, sample, dynamic_shapes, pipeline=None, **options):
        self.module = module
        ep = harness.export(module, tuple(sample), dynamic_shapes=dynamic_shapes)
        options = dict(options) if pipeline is None else {**options, "pipeline": pipeline}
        self.edge, self.partitioner = harness.lower_edge(ep, "xir", **options)
        self.inside, self.outside = harness.delegated_ops(self.edge), harness.outside_ops(self.edge)
        self.delegates = harness.delegate_count(self.edge)
        self.program, self.method = harness.load_method(harness.to_buffer(self.edge))


def check_same_numbers(rewritten: Lowered, without: Lowered, args, tolerance: float, what=None) -> None:
    """Both programs on ``args``: ``rewritten``'s outputs have eager's shapes, are within
    ``tolerance`` of eager's, and equal ``without``'s to the bit (``what`` goes with a failure)."""
    with torch.no_grad():
        expected = harness.as_list(rewritten.module(*args))
    got, reference = harness.run_method(rewritten.method, args), harness.run_method(without.method, args)
    assert [tuple(a.shape) for a in got] == [tuple(e.shape) for e in expected], what
    assert harness.max_error(got, expected) <= tolerance, what
    assert all(torch.equal(a, b) for a, b in zip(got, reference)), what
