"""xir_fuzz: a differential fuzzer for xir's XNNPACK lowering.

Random PyTorch programs (readable module source, deterministic from (seed, kind)) are exported,
lowered with xir's XnnpackPartitioner and with ExecuTorch's stock one, run on ExecuTorch's
runtime in worker processes and compared with eager PyTorch; failures are classified, shrunk
and written as standalone repro files. ``python -m xir_tools.fuzz --help``.

- ``program``: the program as data, its source, editing (for shrinking)
- ``generator``: random programs (``generate(seed, kind)``)
- ``case``: one case in one process, on xir_tools/harness.py (both copied verbatim into repro files)
- ``pool``: worker processes with time limits and crash isolation
- ``shrink``: greedy shrinking of a failing program
- ``repro``: standalone repro files
- ``cli``: the campaign, tables, summary.json, ``--replay``
- ``regressions``: the programs of tests/lowering/test_fuzz_regressions.py (repros turned into
  tests), also run with stock by scripts/stock_evidence.py
"""

from .generator import generate
from .program import KINDS, Program

__all__ = ["KINDS", "Program", "generate"]
