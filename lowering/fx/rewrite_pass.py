"""xir's rewrites as an ExecuTorch ExportedProgram pass: import, run the partitioner's pipeline,
write the rewrites back into a copy of the program."""

from __future__ import annotations

from typing import TYPE_CHECKING

from executorch.exir.pass_base import ExportedProgramPassBase, ExportedProgramPassResult

import xir
from passes import PassManager

from .writeback import ShapeEnvState, write_back

if TYPE_CHECKING:
    from .partitioner import XnnpackPartitioner


class XirRewritePass(ExportedProgramPassBase):
    """The pass ``XnnpackPartitioner.transform_passes()`` hands ExecuTorch (its name is what
    ExecuTorch's errors say: "An error occurred when running the 'XirRewritePass' pass")."""

    def __init__(self, partitioner: XnnpackPartitioner):
        super().__init__()
        self.partitioner = partitioner

    def call(self, ep):
        partitioner = self.partitioner
        # The program is never changed in place (the rewrite is written into a copy), but it
        # shares its ShapeEnv with every program it came from: after any failure, that is put
        # back as it was here, so the caller can lower the program again (with stock)
        state = ShapeEnvState.of_program(ep)
        try:
            with partitioner._timed("import"):
                graph = xir.from_exported_program(ep)
            with partitioner._timed("passes"):
                result = PassManager(partitioner.pipeline, partitioner.instruments).run(graph)
            if not result.changed:
                return ExportedProgramPassResult(ep, False)
            with partitioner._timed("write-back"):
                rewritten = write_back(graph, ep)  # (a copy: after a failure, the caller's program is whole)
        except BaseException:
            state.restore()
            raise
        partitioner.rewrites_applied.update(result.changed_by)
        return ExportedProgramPassResult(rewritten, True)
