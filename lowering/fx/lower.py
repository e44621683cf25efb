"""ExecuTorch's ``to_edge_transform_and_lower`` with xir's rewrites, and xir's own errors raised
as themselves (not as ExecuTorch's wrapper of a failing pass)."""

from __future__ import annotations

from executorch.exir import to_edge_transform_and_lower as et_lower

from .partitioner import XnnpackPartitioner
from .xir_ops_as_aten import rewrite_edge_manager


def to_edge_transform_and_lower(
    programs,
    partitioner=None,
    transform_passes=None,
    constant_methods=None,
    compile_config=None,
    generate_etrecord: bool = False,
):
    """ExecuTorch's ``to_edge_transform_and_lower`` with xir's rewrites: every xir partitioner in
    ``partitioner`` contributes its ``transform_passes()`` before ExecuTorch partitions."""
    partitioners = list(partitioner or [])
    passes = list(transform_passes or [])
    for p in partitioners:
        if isinstance(p, XnnpackPartitioner):
            passes.extend(p.transform_passes())
    try:
        edge = et_lower(
            programs,
            partitioner=partitioners,
            transform_passes=passes or None,
            constant_methods=constant_methods,
            compile_config=compile_config,
            generate_etrecord=generate_etrecord,
        )
    except Exception as error:
        cause = _xir_cause(error)
        if cause is None:
            raise
        error.__cause__ = error.__context__ = None  # (the wrapper becomes the context of its cause: no cycle)
        raise cause from error
    # (xir's partitioners write back the xir ops no partitioner took when ExecuTorch asks them
    # after lowering; transform passes of xir's without an xir partitioner in the list leave theirs)
    rewrite_edge_manager(edge)
    return edge


def _xir_cause(error: BaseException) -> BaseException | None:
    """The first error of xir's own (a pass's PassFailure, a PipelineError, an IRError) in the chain
    of ``error``, when ``error`` is ExecuTorch's wrapper of it ("An error occurred when running the
    'XirRewritePass' pass ..."); None when ``error`` is xir's own or holds none."""
    seen, current = set(), error.__cause__ or error.__context__
    if type(error).__module__.split(".")[0] in ("xir", "passes", "lowering"):
        return None
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__module__.split(".")[0] in ("xir", "passes", "lowering"):
            return current
        current = current.__cause__ or current.__context__
    return None
