"""Capability: which nodes XNNPACK can run, as units, with a reason for every rejected node.

A *unit* is the smallest set of nodes that must be delegated together: a float op alone; a
statically quantized op with its input dequantizes, fused activation and output quantize; a
dynamically quantized op with its choose_qparams, quantize and dequantize. Units are what the
partitioner groups. Quantize/dequantize nodes inside a unit are only *proposed* as folded into
its op ("implicit"); the fold is committed by emission once the unit is really in a group.

Every node gets a :class:`Verdict`. A node is supported only if every node of its unit passes
the rule of its op, every input and output has rank <= 6 and an allowed dtype. Each reason a
node is rejected is a named check (:mod:`.checks`, in tables by unit kind: :data:`checks.TABLES`);
the verdict names it (``Verdict.check``).

The modules, by role: :mod:`.base` (options, verdicts, units, the :class:`Check` type),
:mod:`.checks` (the checks), :mod:`.patterns` (predicates over the graph the checks and builders
share), :mod:`.linears` (decomposed linears), :mod:`.floats` and :mod:`.quantized` (the unit
builders), :mod:`.analysis` (:func:`analyse`).
"""

from .analysis import analyse
from .base import (
    AFFINE_RULE,
    DYNAMIC_QUANT_OPS,
    FUSED_ACTIVATIONS,
    GEMM_OPS,
    LINEAR_OPS,
    STATIC_QUANT_OPS,
    SUPPORTED,
    UNRUNNABLE_RULE,
    Capability,
    Check,
    Options,
    Unit,
    Verdict,
)
from .checks import (
    AFFINE_DECOMPOSED,
    INT4_ODD_INPUT_CHANNELS,
    QUANTIZED_FLOAT_CONV1D,
    TABLES,
    WEIGHT_ONLY_BIAS_REWRITE,
    check_names,
)
from .floats import (
    batch_norm_verdict,
    check_float_dtypes,
    check_rank,
    decomposed_float_unit,
    float_between_conversions,
    float_verdict,
)
from .linears import (
    MATMUL_OPS,
    TRANSPOSE_OPS,
    DecomposedLinear,
    decomposed_linears,
    same_dim,
)
from .patterns import (
    SAME_QPARAMS_OPS,
    float_gemm_of_dequantized_input,
    float_gemm_of_static_input,
    fp32_of_dequantized_weight,
    is_float_conv1d,
    may_run_between_conversions,
    quantized_by_preprocessing,
    zero_pad,
)
from .quantized import (
    DYNAMIC_PATTERNS,
    convert_unit,
    dynamic_unit,
    static_unit,
    weight_only_linear_reason,
    weight_only_unit,
)

__all__ = [
    "AFFINE_DECOMPOSED",
    "AFFINE_RULE",
    "DYNAMIC_PATTERNS",
    "DYNAMIC_QUANT_OPS",
    "FUSED_ACTIVATIONS",
    "GEMM_OPS",
    "INT4_ODD_INPUT_CHANNELS",
    "LINEAR_OPS",
    "MATMUL_OPS",
    "QUANTIZED_FLOAT_CONV1D",
    "SAME_QPARAMS_OPS",
    "STATIC_QUANT_OPS",
    "SUPPORTED",
    "TABLES",
    "TRANSPOSE_OPS",
    "UNRUNNABLE_RULE",
    "WEIGHT_ONLY_BIAS_REWRITE",
    "Capability",
    "Check",
    "DecomposedLinear",
    "Options",
    "Unit",
    "Verdict",
    "analyse",
    "batch_norm_verdict",
    "check_float_dtypes",
    "check_names",
    "check_rank",
    "convert_unit",
    "decomposed_float_unit",
    "decomposed_linears",
    "dynamic_unit",
    "float_between_conversions",
    "float_gemm_of_dequantized_input",
    "float_gemm_of_static_input",
    "float_verdict",
    "fp32_of_dequantized_weight",
    "is_float_conv1d",
    "may_run_between_conversions",
    "quantized_by_preprocessing",
    "same_dim",
    "static_unit",
    "weight_only_linear_reason",
    "weight_only_unit",
    "zero_pad",
]
