"""Result-type inference against torch (issue 29): every op xir defines infers its result types,
and on a real example the types it infers are the ones torch's op returns (dtype and shape of
every result). A new definition needs inference and an example here (the coverage tests say so)."""

from __future__ import annotations

import executorch.exir.passes.dim_order_ops_registry  # noqa: F401  (registers dim_order_ops)
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # (registers quantized_decomposed)

from xir import DType, Graph, IRError, TensorType
from xir.fx_import import DTYPE_TO_TORCH, TORCH_TO_DTYPE, op_arguments
from xir.ops import all_ops
from xir.types import ScalarType, Symbol


def T(dtype, *shape):
    return TensorType(dtype, shape)


def F(*shape):
    return TensorType(DType.f32, shape)


def I64(*shape):
    return TensorType(DType.i64, shape)


def B(*shape):
    return TensorType(DType.bool, shape)


BF = DType.bf16
_Q = {"quant_min": -128, "quant_max": 127, "dtype": DType.i8}

# full op name -> examples: (operand types, attributes). A TensorType inside the attributes becomes
# a graph input the attribute names (index.Tensor's indices).
EXAMPLES: dict[str, list[tuple[list, dict]]] = {
    **{
        f"aten.{name}": [([F(2, 3)], {}), ([T(BF, 4)], {})]
        for name in (
            "abs",
            "ceil",
            "floor",
            "neg",
            "sqrt",
            "rsqrt",
            "exp",
            "log",
            "sigmoid",
            "tanh",
            "sin",
            "cos",
            "relu",
            "hardswish",
            "hardsigmoid",
            "erf",
            "reciprocal",
            "round",
            "sign",
            "silu",
            "square",
            "trunc",
            "log1p",
            "expm1",
            "alias",
            "alias_copy",
            "clone",
            "contiguous",
        )
    },
    "aten.logical_not": [([B(2, 3)], {})],
    "aten.bitwise_not": [([T(DType.i32, 2, 3)], {}), ([B(4)], {})],
    "aten.elu": [([F(2, 3)], {"alpha": 0.5})],
    "aten.leaky_relu": [([F(2, 3)], {"negative_slope": 0.2})],
    "aten.hardtanh": [([F(2, 3)], {"min_val": 0.0, "max_val": 6.0})],
    "aten.clamp": [([F(2, 3)], {"min": -1.0})],
    "aten.gelu": [([F(2, 3)], {"approximate": "tanh"})],
    "aten.pow.Tensor_Scalar": [([F(2, 3)], {"exponent": 2})],
    **{
        f"aten.{name}.Tensor": [([F(2, 3), F(3)], {}), ([T(BF, 4, 1), T(BF, 1, 5)], {})]
        for name in ("add", "sub", "mul", "div")
    },
    **{f"aten.{name}.Scalar": [([F(2, 3)], {"other": 2.0})] for name in ("add", "sub", "mul", "div", "rsub")},
    "aten.minimum": [([F(2, 1), F(1, 3)], {})],
    "aten.maximum": [([F(4), F(4)], {})],
    "aten.where.self": [([B(2, 1), F(1, 3), F(2, 3)], {}), ([B(4), I64(1), I64(4)], {})],
    "aten.linear": [([F(2, 5, 4), F(3, 4), F(3)], {}), ([F(4), F(3, 4)], {})],
    "aten.mm": [([F(2, 4), F(4, 3)], {})],
    "aten.addmm": [([F(3), F(2, 4), F(4, 3)], {})],
    "aten.bmm": [([F(2, 3, 4), F(2, 4, 5)], {})],
    "aten.matmul": [([F(2, 3, 4), F(4, 5)], {}), ([F(6, 1, 3, 4), F(5, 4, 2)], {})],
    "aten.convolution": [
        (
            [F(1, 4, 9, 9), F(8, 2, 3, 3), F(8)],
            {
                "stride": [2, 2],
                "padding": [1, 1],
                "dilation": [1, 1],
                "transposed": False,
                "output_padding": [0, 0],
                "groups": 2,
            },
        ),
        (
            [F(1, 4, 5), F(4, 3, 3)],
            {
                "bias": None,
                "stride": [2],
                "padding": [1],
                "dilation": [1],
                "transposed": True,
                "output_padding": [1],
                "groups": 1,
            },
        ),
    ],
    "aten.prelu": [([F(1, 3, 4, 4), F(3)], {})],
    "aten._native_batch_norm_legit_no_training": [
        ([F(2, 3, 4, 4), F(3), F(3), F(3), F(3)], {"momentum": 0.1, "eps": 1e-5})
    ],
    "aten._native_batch_norm_legit.no_stats": [
        ([F(2, 3, 4, 4), F(3), F(3)], {"training": True, "momentum": 0.1, "eps": 1e-5}),
        ([T(BF, 2, 3, 5)], {"weight": None, "bias": None, "training": True, "momentum": 0.1, "eps": 1e-5}),
    ],
    "aten.native_layer_norm": [([F(2, 3, 4), F(4), F(4)], {"normalized_shape": [4], "eps": 1e-5})],
    "aten.native_group_norm": [
        ([F(2, 6, 4, 4), F(6), F(6)], {"N": 2, "C": 6, "HxW": 16, "group": 3, "eps": 1e-5}),
        ([T(BF, 2, 4, 5)], {"weight": None, "bias": None, "N": 2, "C": 4, "HxW": 5, "group": 2, "eps": 1e-5}),
    ],
    "aten.max_pool2d": [
        ([F(1, 2, 7, 7)], {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1], "ceil_mode": True})
    ],
    "aten.max_pool2d_with_indices": [([F(1, 2, 8, 8)], {"kernel_size": [2, 2]})],
    "aten.avg_pool2d": [([F(2, 7, 7)], {"kernel_size": [3, 3], "stride": [2, 2]})],
    "aten.mean.dim": [([F(2, 3, 4)], {"dim": [-1], "keepdim": True})],
    "aten.sum.dim_IntList": [([F(2, 3, 4)], {"dim": [0, 2]})],
    "aten.amax": [([F(2, 3, 4)], {"dim": [1]})],
    "aten.amin": [([F(2, 3, 4)], {"dim": [1], "keepdim": True})],
    "aten.max.dim": [([F(2, 3, 4)], {"dim": 1})],
    "aten.min.dim": [([F(2, 3, 4)], {"dim": -1, "keepdim": True}), ([T(DType.i32, 5)], {"dim": 0})],
    "aten._softmax": [([F(2, 3)], {"dim": -1, "half_to_float": False})],
    "aten._log_softmax": [([F(2, 3)], {"dim": 0, "half_to_float": False})],
    "aten.upsample_bilinear2d.vec": [
        ([F(1, 2, 4, 5)], {"output_size": None, "align_corners": False, "scale_factors": [2.0, 1.5]})
    ],
    "aten.upsample_nearest2d.vec": [([F(1, 2, 4, 5)], {"output_size": [8, 10], "scale_factors": None})],
    "aten.upsample_nearest2d": [([F(1, 2, 4, 5)], {"output_size": [7, 3]})],
    "aten._adaptive_avg_pool2d": [([F(1, 3, 8, 8)], {"output_size": [2, 4]})],
    "aten.adaptive_avg_pool2d": [([F(3, 7, 9)], {"output_size": [1, 1]})],
    "aten.cat": [([F(2, 3), F(4, 3)], {"dim": 0}), ([F(2, 3), F(2, 1)], {"dim": -1})],
    "aten.slice_copy.Tensor": [([F(5, 6)], {"dim": 1, "start": 1, "end": 5, "step": 2})],
    "aten.constant_pad_nd": [([F(1, 2, 3)], {"pad": [1, 2, 0, 1], "value": 0.0})],
    "aten.permute_copy": [([F(2, 3, 4)], {"dims": [2, 0, 1]})],
    "aten.permute": [([F(2, 3, 4)], {"dims": [1, 2, 0]})],
    "aten.view_copy": [([F(2, 3, 4)], {"size": [6, -1]})],
    "aten.view": [([F(2, 3, 4)], {"size": [24]})],
    "aten.reshape": [([F(2, 3, 4)], {"shape": [-1, 2]})],
    "aten._unsafe_view": [([F(2, 3, 4)], {"size": [4, 6]})],
    "aten.expand_copy": [([F(3, 1)], {"size": [2, 3, 4]})],
    "aten.unsqueeze_copy": [([F(2, 3)], {"dim": -1})],
    "aten.as_strided_copy": [
        ([F(1, 32, 1, 1)], {"size": [1, 32, 1, 1], "stride": [32, 1, 32, 32]}),
        ([F(4, 6)], {"size": [2, 3], "stride": [6, 2], "storage_offset": 1}),
    ],
    "aten.copy": [([F(2, 3, 4), F(3, 1)], {})],
    "aten.slice_scatter": [([F(2, 8, 3), F(2, 3, 3)], {"dim": 1, "start": 1, "end": 7, "step": 2})],
    "aten.fmod.Scalar": [([I64(8)], {"other": 3})],
    "aten.fmod.Tensor": [([F(2, 3), F(3)], {})],
    "aten.remainder.Scalar": [([F(4)], {"other": 2.5})],
    "aten.remainder.Tensor": [([F(2, 1), F(3)], {})],
    "aten.squeeze_copy": [([F(1, 3, 1)], {})],
    "aten.squeeze_copy.dim": [([F(1, 3, 1)], {"dim": 0})],
    "aten.squeeze_copy.dims": [([F(1, 3, 1)], {"dim": [0, 1]})],
    "aten.t_copy": [([F(2, 3)], {})],
    "dim_order_ops._clone_dim_order": [([F(2, 3)], {})],
    "dim_order_ops._to_dim_order_copy": [([F(2, 3)], {"dtype": BF})],
    "aten._to_copy": [([F(2, 3)], {"dtype": DType.i32}), ([T(BF, 4)], {})],
    "aten.to.dtype": [([T(DType.i8, 2, 3)], {"dtype": DType.f32}), ([F(4)], {"dtype": BF})],
    "aten.embedding": [([F(10, 4), I64(2, 3)], {})],
    "aten.full": [([], {"size": [2, 3], "fill_value": 1.5})],
    "aten.zeros": [([], {"size": [3]})],
    "aten.ones": [([], {"size": [2, 1], "dtype": DType.i8})],
    "aten.arange": [([], {"end": 5})],
    "aten.arange.start": [([], {"start": 1, "end": 2.5})],
    "aten.arange.start_step": [([], {"start": 0, "end": 10, "step": 3})],
    "aten.scalar_tensor": [([], {"s": 2.0})],
    "aten.full_like": [([F(2, 3)], {"fill_value": 7})],
    "aten.zeros_like": [([F(2, 3)], {"dtype": DType.i64})],
    "aten.ones_like": [([T(BF, 4)], {})],
    **{f"aten.{op}.Scalar": [([F(2, 3)], {"other": 0.5})] for op in ("eq", "ne", "lt", "gt", "le", "ge")},
    **{f"aten.{op}.Tensor": [([F(2, 1), F(3)], {})] for op in ("eq", "ne", "lt", "gt", "le", "ge")},
    "aten.logical_and": [([B(2, 3), B(3)], {})],
    "aten.logical_or": [([B(4, 1), B(1, 2)], {})],
    "aten.flip": [([F(2, 3)], {"dims": [0]})],
    "aten.tril": [([F(3, 3)], {})],
    "aten.triu": [([F(3, 4)], {"diagonal": 1})],
    "aten.sym_size.int": [([F(2, 3)], {"dim": 1})],
    "aten.index.Tensor": [
        ([F(2, 3, 4, 5)], {"indices": [None, I64(2, 1), None, I64(3)]}),  # not adjacent: the index dims first
        ([F(2, 3, 4, 5)], {"indices": [None, I64(2, 1), I64(3)]}),  # adjacent: in place
        ([F(2, 3, 4)], {"indices": [I64(5)]}),
    ],
    "aten.bitwise_and.Tensor": [([T(DType.i32, 3), T(DType.i32, 2, 1)], {}), ([B(4), B(4)], {})],
    "aten.bitwise_or.Tensor": [([T(DType.u8, 2, 3), T(DType.u8, 3)], {})],
    "aten.any": [([F(2, 3)], {}), ([T(DType.u8, 4)], {})],
    "aten.any.dim": [([B(2, 3, 4)], {"dim": 1}), ([F(2, 3)], {"dim": -1, "keepdim": True})],
    "aten.select_copy.int": [([F(2, 3, 4)], {"dim": 1, "index": -1}), ([F(5)], {"dim": 0, "index": 2})],
    "aten.split_with_sizes_copy": [([F(2, 7)], {"split_sizes": [3, 0, 4], "dim": 1})],
    "aten.split_copy.Tensor": [
        ([F(5, 2)], {"split_size": 2}),
        ([F(2, 6)], {"split_size": 3, "dim": -1}),
        ([F(0, 2)], {"split_size": 2}),
    ],
    "aten.var_mean.correction": [
        ([F(2, 3, 4)], {"dim": [1], "correction": 1}),
        ([T(BF, 2, 3)], {}),
        ([F(2, 3, 4)], {"dim": [0, 2], "keepdim": True}),
    ],
    "aten.hardtanh_backward": [([F(3, 1), F(1, 4)], {"min_val": -1.0, "max_val": 1.0})],
    "aten.repeat": [([F(3)], {"repeats": [2, 2]}), ([F(2, 3)], {"repeats": [1, 1, 3]})],
    "aten.index_select": [([F(4, 5), I64(3)], {"dim": 1}), ([F(2, 3, 4), I64()], {"dim": 0})],
    "aten.gather": [([F(4, 5), I64(2, 3)], {"dim": 1})],
    "aten.sort": [([F(3, 4)], {}), ([T(DType.i32, 5)], {"dim": 0, "descending": True})],
    "aten.topk": [([F(3, 4)], {"k": 2}), ([F(3, 4)], {"k": 3, "dim": 0, "largest": False})],
    "aten.argmax": [([F(2, 3)], {}), ([F(2, 3, 4)], {"dim": 1, "keepdim": True}), ([F(2, 3)], {"keepdim": True})],
    "aten.argmin": [([F(2, 3)], {"dim": -1})],
    "aten.cumsum": [
        ([F(2, 3)], {"dim": 1}),
        ([T(DType.i32, 4)], {"dim": 0}),
        ([B(4)], {"dim": 0}),
        ([F(2, 3)], {"dim": 0, "dtype": DType.f64}),
    ],
    "aten.native_dropout": [([F(2, 3)], {"p": 0.5, "train": True}), ([F(4)], {"p": 0.1, "train": False})],
    "aten.pixel_shuffle": [([F(1, 8, 3, 4)], {"upscale_factor": 2})],
    "aten.pixel_unshuffle": [([F(1, 2, 6, 4)], {"downscale_factor": 2})],
    "aten.bucketize.Tensor": [([F(2, 3), F(4)], {}), ([F(5), F(3)], {"out_int32": True, "right": True})],
    "quantized_decomposed.quantize_per_tensor": [([F(2, 3)], {"scale": 0.1, "zero_point": 0, **_Q})],
    "quantized_decomposed.dequantize_per_tensor": [([T(DType.i8, 2, 3)], {"scale": 0.1, "zero_point": 0, **_Q})],
    "quantized_decomposed.quantize_per_tensor.tensor": [([F(2, 3), T(DType.f64, 1), I64(1)], _Q)],
    "quantized_decomposed.dequantize_per_tensor.tensor": [([T(DType.i8, 2, 3), T(DType.f64, 1), I64(1)], _Q)],
    "quantized_decomposed.quantize_per_channel": [([F(3, 4), T(DType.f64, 3), I64(3)], {"axis": 0, **_Q})],
    "quantized_decomposed.dequantize_per_channel": [([T(DType.i8, 3, 4), T(DType.f64, 4), I64(4)], {"axis": 1, **_Q})],
    "quantized_decomposed.choose_qparams.tensor": [
        ([F(2, 3)], {"quant_min": -128, "quant_max": 127, "eps": 1e-7, "dtype": DType.i8})
    ],
    "torchao.choose_qparams_affine": [
        (
            [F(1, 3, 8)],
            {
                "mapping_type": "ASYMMETRIC",
                "block_size": [1, 1, 8],
                "target_dtype": DType.i8,
                "quant_min": -128,
                "quant_max": 127,
                "zero_point_dtype": DType.i8,
            },
        ),
        (
            [F(4, 8)],
            {
                "mapping_type": "SYMMETRIC",
                "block_size": [1, 4],
                "target_dtype": DType.i8,
                "quant_min": -8,
                "quant_max": 7,
                "zero_point_dtype": DType.i8,
            },
        ),
        (
            [F(2, 8)],
            {
                "mapping_type": "ASYMMETRIC",
                "block_size": [1, 8],
                "target_dtype": DType.i8,
                "zero_point_dtype": DType.i32,
                "keepdim": True,
            },
        ),
    ],
    "torchao.quantize_affine": [
        (
            [F(1, 3, 8), F(1, 3), T(DType.i8, 1, 3)],
            {"block_size": [1, 1, 8], "output_dtype": DType.i8, "quant_min": -128, "quant_max": 127},
        ),
        (
            [F(4, 8), F(4, 2), T(DType.i8, 4, 2)],
            {"block_size": [1, 4], "output_dtype": DType.i8, "quant_min": -8, "quant_max": 7},
        ),
    ],
    "torchao.dequantize_affine": [
        (
            [T(DType.i8, 4, 8), F(4, 2), T(DType.i8, 4, 2)],
            {"block_size": [1, 4], "input_dtype": DType.i8, "quant_min": -8, "quant_max": 7},
        ),
        (
            [T(DType.i8, 1, 3, 8), F(1, 3), T(DType.i8, 1, 3)],
            {"block_size": [1, 1, 8], "input_dtype": DType.i8, "output_dtype": BF},
        ),
    ],
    "xir.bmm_f32out": [([T(BF, 2, 3, 4), T(BF, 2, 4, 5)], {})],
    "xir.convert": [([F(2, 3)], {"dtype": BF}), ([T(BF, 2)], {"dtype": DType.f32})],
    "xir.linear_f16w": [([F(2, 5, 3), T(DType.f16, 4, 3)], {}), ([F(2, 3), T(DType.f16, 4, 3), F(4)], {})],
    "xir.slice": [([F(2, 6)], {"dim": 1, "start": 2, "end": 5}), ([F(3, 2)], {"dim": 0, "start": 0, "end": 3})],
}

# xir's own ops, as torch computes them
XIR_OPS = {
    "xir.bmm_f32out": lambda node, a, b: torch.bmm(a.float(), b.float()),
    "xir.convert": lambda node, x: x.to(DTYPE_TO_TORCH[node.attribute("dtype")]),
    "xir.linear_f16w": lambda node, x, w, b=None: torch.nn.functional.linear(x, w.float(), b),
    "xir.slice": lambda node, x: x.narrow(
        node.attribute("dim"), node.attribute("start"), node.attribute("end") - node.attribute("start")
    ),
}

# defined ops left without inference, each with the reason (none: every definition infers)
WITHOUT_INFERENCE: dict[str, str] = {}


def _tensor(t: TensorType) -> torch.Tensor:
    """Data of type ``t`` any op of the examples takes: positive floats, zero integers (a valid
    index, a sorted boundary), true bools."""
    dtype = DTYPE_TO_TORCH[t.dtype]
    if t.dtype.is_float:
        return (torch.rand(t.shape) + 0.5).to(dtype)
    if t.dtype is DType.bool:
        return torch.ones(t.shape, dtype=dtype)
    return torch.zeros(t.shape, dtype=dtype)


def _torch_op(full: str):
    namespace, name, *overload = full.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload[0] if overload else "default")


def _types_of(out) -> list:
    if isinstance(out, (list, tuple)):
        return [t for item in out for t in _types_of(item)]
    if isinstance(out, torch.Tensor):
        return [TensorType(TORCH_TO_DTYPE[out.dtype], tuple(out.shape))]
    if isinstance(out, int):
        return [ScalarType("int")]
    raise AssertionError(f"unexpected result {out!r}")


def _build(full: str, operand_types: list, attributes: dict):
    graph = Graph()
    tensors = {}

    def value(t: TensorType):
        v = graph.add_input(f"v{len(tensors)}", t)
        tensors[v] = _tensor(t) if t.is_static else None
        return v

    def attribute(a):
        if isinstance(a, TensorType):
            return value(a)
        return [attribute(x) for x in a] if isinstance(a, list) else a

    operands = [value(t) for t in operand_types]
    node = graph.create_node(full, operands, attributes={k: attribute(a) for k, a in attributes.items()})
    return node, tensors


CASES = [
    pytest.param(full, operands, attributes, id=f"{full}-{i}")
    for full, examples in EXAMPLES.items()
    for i, (operands, attributes) in enumerate(examples)
]


@pytest.mark.parametrize("full, operand_types, attributes", CASES)
def test_inference_gives_the_types_torch_computes(full, operand_types, attributes):
    node, tensors = _build(full, operand_types, attributes)  # the result types inferred
    if full in XIR_OPS:
        out = XIR_OPS[full](node, *(tensors[v] for v in node.operands))
    else:
        op = _torch_op(full)
        args, kwargs = op_arguments(op._schema, node, tensors.__getitem__)
        with torch.no_grad():
            out = op(*args, **kwargs)
    assert [r.type for r in node.results] == _types_of(out)


def test_every_defined_op_infers_its_result_types():
    without = sorted(name for name, d in all_ops().items() if d.infer is None)
    assert without == sorted(WITHOUT_INFERENCE), "ops without inference (add it, or a reason to WITHOUT_INFERENCE)"


def test_every_op_with_inference_is_checked_against_torch():
    missing = sorted(name for name, d in all_ops().items() if d.infer is not None and name not in EXAMPLES)
    assert not missing, f"ops with inference but no example in EXAMPLES: {missing}"
    assert set(EXAMPLES) <= set(all_ops()), sorted(set(EXAMPLES) - set(all_ops()))


S = Symbol("s0")


@pytest.mark.parametrize(
    "full, operand_types, attributes, expected",
    [
        ("aten.where.self", [B(S, 1), F(1, 3), F(S, 3)], {}, [F(S, 3)]),
        ("aten.any.dim", [F(S, 3)], {"dim": 1}, [B(S)]),
        ("aten.argmax", [F(S, 3)], {"dim": -1, "keepdim": True}, [I64(S, 1)]),
        ("aten.min.dim", [F(S, 3)], {"dim": 1}, [F(S), I64(S)]),
        ("aten.var_mean.correction", [F(S, 3, 4)], {"dim": [1]}, [F(S, 4), F(S, 4)]),
        ("aten.cumsum", [T(DType.i32, S)], {"dim": 0}, [I64(S)]),
        ("aten.sort", [F(S, 4)], {}, [F(S, 4), I64(S, 4)]),
        ("aten.topk", [F(S, 4)], {"k": 2}, [F(S, 2), I64(S, 2)]),
        ("aten.gather", [F(S, 5), I64(S, 2)], {"dim": 1}, [F(S, 2)]),
        ("aten.index_select", [F(S, 5), I64(3)], {"dim": 1}, [F(S, 3)]),
        ("aten.index.Tensor", [F(2, S, 4)], {"indices": [None, I64(S)]}, [F(2, S, 4)]),
        ("aten.select_copy.int", [F(S, 3)], {"dim": 1, "index": 0}, [F(S)]),
        ("aten.split_copy.Tensor", [F(S, 4)], {"split_size": 2, "dim": 1}, [F(S, 2), F(S, 2)]),
        ("aten.split_with_sizes_copy", [F(S, 4)], {"split_sizes": [1, 3], "dim": -1}, [F(S, 1), F(S, 3)]),
        (
            "aten._native_batch_norm_legit.no_stats",
            [F(S, 3, 4)],
            {"weight": None, "bias": None, "training": True, "momentum": 0.1, "eps": 1e-5},
            [F(S, 3, 4), F(3), F(3)],
        ),
        (
            "aten.native_group_norm",
            [F(S, 4, 5)],
            {"weight": None, "bias": None, "N": 2, "C": 4, "HxW": 5, "group": 2, "eps": 1e-5},
            [F(S, 4, 5), F(S, 2), F(S, 2)],
        ),
        ("aten.native_dropout", [F(S)], {"p": 0.5, "train": True}, [F(S), B(S)]),
        ("aten.adaptive_avg_pool2d", [F(S, 3, 8, 8)], {"output_size": [1, 1]}, [F(S, 3, 1, 1)]),
        ("aten.pixel_shuffle", [F(S, 8, 3, 4)], {"upscale_factor": 2}, [F(S, 2, 6, 8)]),
        ("aten.repeat", [F(S, 3)], {"repeats": [1, 2]}, [F(S, 6)]),
        ("aten.bucketize.Tensor", [F(S), F(3)], {}, [I64(S)]),
        ("aten.hardtanh_backward", [F(S, 1), F(1, 4)], {"min_val": -1.0, "max_val": 1.0}, [F(S, 4)]),
        ("aten.bitwise_and.Tensor", [B(S), B(1)], {}, [B(S)]),
        ("aten.sym_size.int", [F(S, 3)], {"dim": 0}, [ScalarType("int")]),
        ("xir.slice", [F(1, S, 8)], {"dim": 2, "start": 4, "end": 8}, [F(1, S, 4)]),
        ("xir.slice", [F(1, S, 8)], {"dim": 1, "start": 0, "end": 1}, [F(1, 1, 8)]),
    ],
)
def test_inference_keeps_symbolic_dims(full, operand_types, attributes, expected):
    node, _ = _build(full, operand_types, attributes)
    assert [r.type for r in node.results] == expected


@pytest.mark.parametrize(
    "full, operand_types, attributes",
    [
        ("aten.split_copy.Tensor", [F(S, 4)], {"split_size": 2}),  # (the count of pieces is not known)
        ("aten.repeat", [F(S, 3)], {"repeats": [2, 1]}),
        ("aten.pixel_shuffle", [F(1, S, 3, 4)], {"upscale_factor": 2}),
        ("aten.index.Tensor", [F(2, 3)], {"indices": [B(2)]}),  # a mask: its size is known at run time
        ("aten.bitwise_or.Tensor", [T(DType.i32, 2), I64(2)], {}),  # promotion is not modelled
        ("aten.where.self", [B(2), F(2), T(BF, 2)], {}),
    ],
)
def test_what_cannot_be_told_is_not_inferred(full, operand_types, attributes):
    with pytest.raises(IRError, match="cannot infer the result types"):
        _build(full, operand_types, attributes)


@pytest.mark.parametrize(
    "full, operand_types, attributes, message",
    [
        ("aten.select_copy.int", [F(2, 3)], {"dim": 1, "index": 3}, "index 3 is out of range"),
        ("aten.split_with_sizes_copy", [F(2, 7)], {"split_sizes": [3, 3], "dim": 1}, "do not add up"),
        ("aten.topk", [F(3, 4)], {"k": 5}, "k must be an integer in"),
        ("aten.pixel_unshuffle", [F(1, 2, 5, 4)], {"downscale_factor": 2}, "not both divisible"),
        (
            "aten.native_group_norm",
            [F(2, 6, 4)],
            {"weight": None, "bias": None, "N": 2, "C": 6, "HxW": 4, "group": 4, "eps": 1e-5},
            "divides",
        ),
        ("aten.repeat", [F(2, 3)], {"repeats": [2]}, "fewer dims"),
        ("aten.any.dim", [F(2, 3)], {"dim": 2}, "out of range"),
        ("aten.where.self", [B(2), F(3), F(3)], {}, "do not broadcast"),
        ("xir.slice", [F(2, 3)], {"dim": 1, "start": 2, "end": 4}, "not in range"),
        ("xir.slice", [F(2, 3)], {"dim": 2, "start": 0, "end": 1}, "dim in"),
    ],
)
def test_impossible_attributes_are_errors(full, operand_types, attributes, message):
    with pytest.raises(IRError, match=message):
        _build(full, operand_types, attributes)
