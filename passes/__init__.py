"""Passes over the xir IR: the pass API, the pass manager and its instruments, the pattern
rewriter, IR-text test helpers, the pass registry, and the generic built-in passes (one per file,
found by name when a pipeline asks for them: :mod:`passes.registry`)."""

from .instruments import (
    CheckChanged,
    DumpIR,
    Instrument,
    PrintIR,
    Reproducer,
    TimePasses,
    VerifyEach,
    constants_path,
    read_reproducer,
    run_reproducer,
)
from .manager import PassFailure, PassManager, PipelineResult, run_pipeline
from .pass_base import Pass, function_pass
from .pipeline import check_order, format_pipeline, parse_pipeline, pass_help
from .registry import (
    PipelineError,
    get_pass_class,
    pass_names,
    register_pass,
    registered_passes,
    unregister_pass,
)
from .rewriter import (
    PatternRewritePass,
    RewritePattern,
    Rewriter,
    apply_patterns_greedily,
    rewrite_pattern,
)

__all__ = [
    "CheckChanged",
    "DumpIR",
    "Instrument",
    "Pass",
    "PassFailure",
    "PassManager",
    "PatternRewritePass",
    "PipelineError",
    "PipelineResult",
    "PrintIR",
    "Reproducer",
    "RewritePattern",
    "Rewriter",
    "TimePasses",
    "VerifyEach",
    "apply_patterns_greedily",
    "check_order",
    "constants_path",
    "format_pipeline",
    "function_pass",
    "get_pass_class",
    "parse_pipeline",
    "pass_help",
    "pass_names",
    "registered_passes",
    "read_reproducer",
    "register_pass",
    "rewrite_pattern",
    "run_pipeline",
    "run_reproducer",
    "unregister_pass",
]
