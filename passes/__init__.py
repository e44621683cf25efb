"""Passes over the xir IR: the pass API, the pass manager and its instruments, the pattern
rewriter, IR-text test helpers, and the built-in passes (one per file, registered by name)."""

from .instruments import (
    CheckChanged, DumpIR, Instrument, PrintIR, Reproducer, TimePasses, VerifyEach, constants_path, read_reproducer,
    run_reproducer,
)
from .manager import PassFailure, PassManager, PipelineResult, run_pipeline
from .pass_base import PASS_REGISTRY, Pass, PipelineError, function_pass, get_pass_class, register_pass, unregister_pass
from .pipeline import format_pipeline, parse_pipeline, pass_help
from .rewriter import PatternRewritePass, RewritePattern, Rewriter, apply_patterns_greedily, rewrite_pattern

# built-in passes register themselves on import
from . import (  # noqa: E402,F401
    dead_code_elimination, decompose_conv3d, fold_batch_norm, fold_repeat_into_bmm, layer_norm_in_fp32, mean_keepdim, remove_no_ops,
    shape_ops_as_views,
)

__all__ = [
    "CheckChanged", "DumpIR", "Instrument", "PASS_REGISTRY", "Pass", "PassFailure", "PassManager", "PatternRewritePass",
    "PipelineError", "PipelineResult", "PrintIR", "Reproducer", "RewritePattern", "Rewriter", "TimePasses", "VerifyEach",
    "apply_patterns_greedily", "constants_path", "format_pipeline", "function_pass", "get_pass_class", "parse_pipeline",
    "pass_help", "read_reproducer", "register_pass", "rewrite_pattern", "run_pipeline", "run_reproducer", "unregister_pass",
]
