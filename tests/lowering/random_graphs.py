"""Random IR graphs for property tests of the partitioner (no torch.export, no runtime).

A graph is described by a small *program* that hypothesis draws (and, on request, shrinks):
graph inputs (dtype, shape), *steps*, each a kind (``"binary"``, ``"linear"``, ``"q_conv"``,
...) and six small integers, output choices, and whether a dequantize may be shared.
:func:`build` interprets the program with the Graph API: every integer picks among what is
available (``pick(seq, i)`` takes the i-th value counting back from the most recent), a step
that does not apply to the values at hand is skipped, and result types come from the op
definitions' inference (so the verifier accepts every graph; the tests call ``xir.verify``).
A step and a shape are each drawn as one integer: hypothesis' cost is per draw.

What the graphs contain:

* float ops XNNPACK takes (relu, add/mul/sub, linear and convolution with constant weights,
  permute_copy, view_copy, _softmax over the last dim, mean.dim over (2, 3), cat, max pooling,
  batch norm after a conv) and what it rejects (alpha != 1, softmax over dim 0, mean over other
  dims, cat of one tensor twice, tanh-approximated gelu, cumsum, opaque ``custom.thing`` with
  one or two results, weights that are user inputs or computed, 3-D convolutions, dtype
  conversions);
* tensors of rank 1..8 (inputs, ``view_copy`` splits and ``unsqueeze_copy`` push ranks above 6);
* values used several times and returned, multiple outputs (a value may be returned twice);
* "traps": a -> b (rejected) -> c and a -> c, the classic convexity case; "crosses": two
  chains whose supported ops feed each other through rejected ops; quantized residuals around
  a rejected op (a -> Q/DQ -> add and a -> rejected -> Q/DQ -> add);
* static quantization: ``dequantize_per_tensor -> op [-> relu] -> quantize_per_tensor`` (i8),
  weights as i8 constants behind per-tensor or per-channel dequantizes (also through a
  permute), shared quantize and shared dequantize nodes (``shared_dq=False`` makes one
  dequantize per reader, as ExecuTorch's quantizer does), quantized ops whose output is not
  quantized; and dynamic quantization (choose_qparams -> quantize.tensor -> dequantize.tensor
  -> linear with a per-channel weight);
* bf16 values (inputs and ``_to_copy``), for ``enable_bf16``.
"""

from __future__ import annotations

import functools
import random

from hypothesis import strategies as st

from xir import DType, Graph, InputKind, IRError, TensorType, Value

Q = "quantized_decomposed.quantize_per_tensor"
DQ = "quantized_decomposed.dequantize_per_tensor"
DQ_CHANNEL = "quantized_decomposed.dequantize_per_channel"

FLOAT_KINDS = (
    "unary",
    "binary",
    "linear",
    "conv",
    "permute",
    "view",
    "unsqueeze",
    "softmax",
    "mean",
    "cat",
    "opaque",
    "cumsum",
    "trap",
    "cross",
    "maxpool",
    "batchnorm",
    "to_copy",
    "scalar",
)
QUANT_KINDS = (
    "q_unary",
    "q_binary",
    "q_linear",
    "q_conv",
    "q_permute",
    "q_view",
    "q_cat",
    "q_maxpool",
    "q_mean",
    "q_softmax",
    "dyn_linear",
    "q_trap",
    "q_trap",
)
KINDS = FLOAT_KINDS + QUANT_KINDS

UNARY = (
    "aten.relu",
    "aten.neg",
    "aten.sigmoid",
    "aten.tanh",
    "aten.abs",
    "aten.hardtanh",
    "aten.exp",
    "aten.gelu",
    "aten.leaky_relu",
    "aten.clamp",
)
BINARY = ("aten.add.Tensor", "aten.mul.Tensor", "aten.sub.Tensor", "aten.div.Tensor", "aten.maximum")
REJECTED_UNARY = ("aten.cumsum", "custom.thing")


def pick(seq, i: int):
    """The i-th item counting back from the last (0 is the most recent)."""
    return seq[-1 - (i % len(seq))]


def qparams(r: int, dtype: DType = DType.i8) -> dict:
    return {"scale": (0.1, 0.2, 0.05)[r % 3], "zero_point": 0, "quant_min": -128, "quant_max": 127, "dtype": dtype}


def _broadcastable(a: tuple, b: tuple) -> bool:
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and x != 1 and y != 1:
            return False
    return True


class Builder:
    """Interprets one program into a Graph."""

    def __init__(self, name: str = "random", shared_dq: bool = True):
        self.g = Graph(name)
        # False: every dequantize has one reader, as in the programs ExecuTorch's quantizer makes
        # (it duplicates a dequantize per user); True: a dequantize may be read by several nodes
        self.shared_dq = shared_dq
        self.floats: list[Value] = []  # float tensors usable as data (dequantize results included)
        self.int8: list[Value] = []  # results of static quantizes
        self.values: list[Value] = []  # everything that may be returned
        self.quantizes_of: dict[int, list[Value]] = {}  # id(float value) -> i8 values quantizing it
        self.dequantizes_of: dict[int, list[Value]] = {}  # id(i8 value) -> its dequantized values
        self._names = 0

    # ------------------------------------------------------------------ helpers
    def name(self, base: str) -> str:
        self._names += 1
        return f"{base}{self._names}"

    def constant(self, base: str, dtype: DType, shape, kind: InputKind = InputKind.parameter) -> Value:
        return self.g.add_input(self.name(base), TensorType(dtype, tuple(shape)), kind)

    def user_input(self, dtype: DType, shape) -> Value:
        return self.g.add_input(self.name("in"), TensorType(dtype, tuple(shape)))

    def node(self, op: str, operands, attributes=None, result_types=None, track=True):
        """Append a node (result types inferred unless given); None when they cannot be inferred."""
        try:
            node = self.g.create_node(op, operands, result_types, attributes or {})
        except IRError:
            return None
        self.g.append(node)
        if not self.shared_dq:  # a dequantize read once is no longer available
            for v in node.inputs():
                if self.is_dequantized(v):
                    self.floats = [f for f in self.floats if f is not v]
                    for dqs in self.dequantizes_of.values():
                        if v in dqs:
                            dqs.remove(v)
        if track:
            for r in node.results:
                self.values.append(r)
                if isinstance(r.type, TensorType) and r.type.dtype.is_float and r.type.rank >= 1:
                    self.floats.append(r)
        return node

    @staticmethod
    def is_dequantized(v: Value) -> bool:
        return v.producer is not None and v.producer.op in (DQ, DQ_CHANNEL)

    def float_value(self, i: int, predicate=None) -> Value | None:
        candidates = [v for v in self.floats if predicate is None or predicate(v)]
        return pick(candidates, i) if candidates else None

    def partner(self, a: Value, i: int) -> Value:
        """A second operand for a binary op with ``a``: same dtype, broadcastable (maybe ``a`` itself)."""
        candidates = [v for v in self.floats if v.dtype == a.dtype and _broadcastable(a.shape, v.shape)]
        return pick(candidates, i)

    # ------------------------------------------------------------- float steps
    def weight(self, dtype: DType, n: int, k: int, how: int) -> Value:
        """A [n, k] linear weight: constant, constant behind a permute, a user input, or computed."""
        how %= 5
        if how == 1:  # constant seen through a layout op (a linear decomposed to addmm reads permute(w))
            w = self.constant("wt", dtype, (k, n))
            return self.node("aten.permute_copy", [w], {"dims": [1, 0]}).result
        if how == 2:  # not a constant
            return self.user_input(dtype, (n, k))
        if how == 3:  # computed from a constant: not static either
            w = self.constant("w", dtype, (n, k))
            return self.node("aten.relu", [w]).result
        return self.constant("w", dtype, (n, k))

    def bias(self, dtype: DType, n: int, how: int):
        how %= 4
        if how == 0:
            return [], {}
        if how == 1:
            return [], {"bias": None}
        if how == 2:
            return [self.user_input(dtype, (n,))], {}
        return [self.constant("b", dtype, (n,))], {}

    def op_unary(self, x: Value, r) -> object:
        op = UNARY[r[1] % len(UNARY)]
        attrs = {}
        if op == "aten.gelu":
            attrs = {"approximate": ("none", "tanh")[r[2] % 2]}
        elif op == "aten.hardtanh":
            attrs = {"min_val": 0.0, "max_val": 6.0}
        elif op == "aten.clamp":
            attrs = {"min": 0.0, "max": None}
        return self.node(op, [x], attrs)

    def op_binary(self, a: Value, b: Value, r):
        op = BINARY[r[1] % len(BINARY)]
        attrs = {}
        if op in ("aten.add.Tensor", "aten.sub.Tensor"):
            attrs = {"alpha": (1, 1, 1, 2)[r[3] % 4]}
        return self.node(op, [a, b], attrs)

    def op_linear(self, x: Value, w: Value, bias: list, bias_attrs: dict):
        return self.node("aten.linear", [x, w, *bias], bias_attrs)

    def conv_weight_shape(self, x: Value, r):
        """(weight shape, attributes) for a convolution on ``x`` (rank 3..5), or None."""
        if x.rank not in (3, 4, 5):
            return None
        spatial = x.rank - 2
        channels = x.shape[1]
        groups = channels if (r[2] % 3 == 2 and channels > 1) else 1
        out = (1, 2, 3, 4)[r[3] % 4] * (groups if groups > 1 else 1)
        padding = r[4] % 2
        kernel = []
        for d in x.shape[2:]:
            k = 1 + (r[5] % 3)
            while k > 1 and d + 2 * padding - (k - 1) < 1:
                k -= 1
            kernel.append(k)
        attrs = {
            "stride": [1] * spatial,
            "padding": [padding] * spatial,
            "dilation": [1] * spatial,
            "transposed": False,
            "output_padding": [0] * spatial,
            "groups": groups,
        }
        return (out, channels // groups, *kernel), attrs

    def op_conv(self, x: Value, r):
        spec = self.conv_weight_shape(x, r)
        if spec is None:
            return None
        shape, attrs = spec
        how = r[1] % 4
        w = self.user_input(x.dtype, shape) if how == 2 else self.constant("cw", x.dtype, shape)
        operands = [x, w]
        if r[1] % 3 == 0:
            operands.append(self.constant("cb", x.dtype, (shape[0],)))
        else:
            attrs["bias"] = None
        return self.node("aten.convolution", operands, attrs)

    def op_permute(self, x: Value, r):
        dims = list(range(x.rank))
        random.Random(r[1]).shuffle(dims)
        return self.node("aten.permute_copy", [x], {"dims": dims})

    def op_view(self, x: Value, r):
        shape = list(x.shape)
        how = r[1] % 4
        if how == 0:  # split a dim in two (rank + 1)
            i = r[2] % len(shape)
            d = shape[i]
            f = next((f for f in (2, 3) if d % f == 0), 1)
            shape[i : i + 1] = [f, d // f]
        elif how == 1 and len(shape) > 1:  # merge two neighbours (rank - 1)
            i = r[2] % (len(shape) - 1)
            shape[i : i + 2] = [shape[i] * shape[i + 1]]
        elif how == 2:  # flatten with -1
            shape = [-1]
        else:  # insert a 1 (rank + 1)
            shape.insert(r[2] % (len(shape) + 1), 1)
        return self.node("aten.view_copy", [x], {"size": shape})

    def op_unsqueeze(self, x: Value, r):
        dim = (x.rank, -1, 0)[r[1] % 3]
        return self.node("aten.unsqueeze_copy", [x], {"dim": dim})

    def op_softmax(self, x: Value, r):
        return self.node("aten._softmax", [x], {"dim": (-1, 0, x.rank - 1)[r[1] % 3], "half_to_float": False})

    def op_mean(self, x: Value, r):
        if x.rank == 4 and r[1] % 3 != 2:
            attrs = {"dim": [2, 3] if r[1] % 3 == 0 else [-1, -2], "keepdim": r[2] % 4 != 3}
        else:
            attrs = {"dim": [-1], "keepdim": bool(r[2] % 2)}
        return self.node("aten.mean.dim", [x], attrs)

    def op_cat(self, x: Value, r, pool=None):
        pool = self.floats if pool is None else pool
        dim = r[1] % x.rank
        same = [
            v
            for v in pool
            if v.dtype == x.dtype
            and v.rank == x.rank
            and all(a == b for j, (a, b) in enumerate(zip(v.shape, x.shape)) if j != dim)
        ]
        others = [pick(same, r[2])] + ([pick(same, r[3])] if r[4] % 2 else [])
        return self.node("aten.cat", [x, *others], {"dim": dim - x.rank if r[5] % 2 else dim})

    def op_maxpool(self, x: Value, r):
        if x.rank != 4:
            return None
        k = 2 if min(x.shape[2:]) >= 2 and r[1] % 2 == 0 else 1
        op = ("aten.max_pool2d", "aten.max_pool2d_with_indices")[r[2] % 2]
        node = self.node(op, [x], {"kernel_size": [k, k], "stride": [k, k]}, track=False)
        if node is not None:
            self.values.extend(node.results)
            self.floats.append(node.results[0])
        return node

    def op_opaque(self, xs: list[Value], r):
        types = [xs[0].type] + ([TensorType(xs[0].dtype, (2, 3))] if r[2] % 2 else [])
        return self.node("custom.thing", xs, {"mode": r[3] % 3}, result_types=types)

    def step_float(self, kind: str, r) -> None:
        x = self.float_value(r[0])
        if x is None:
            return
        if kind == "unary":
            self.op_unary(x, r)
        elif kind == "binary":
            self.op_binary(x, self.partner(x, r[2]), r)
        elif kind == "linear":
            n = 1 + r[1] % 4
            bias, bias_attrs = self.bias(x.dtype, n, r[3])
            self.op_linear(x, self.weight(x.dtype, n, x.shape[-1], r[2]), bias, bias_attrs)
        elif kind == "conv":
            self.op_conv(self.float_value(r[0], lambda v: v.rank in (3, 4, 5)) or x, r)
        elif kind == "permute":
            self.op_permute(x, r)
        elif kind == "view":
            self.op_view(x, r)
        elif kind == "unsqueeze":
            self.op_unsqueeze(x, r)
        elif kind == "softmax":
            self.op_softmax(x, r)
        elif kind == "mean":
            self.op_mean(self.float_value(r[0], lambda v: v.rank == 4) or x, r)
        elif kind == "cat":
            self.op_cat(x, r)
        elif kind == "maxpool":
            self.op_maxpool(self.float_value(r[0], lambda v: v.rank == 4) or x, r)
        elif kind == "opaque":
            xs = [x] + ([self.float_value(r[1])] if r[1] % 2 else [])
            self.op_opaque(xs, r)
        elif kind == "cumsum":
            self.node("aten.cumsum", [x], {"dim": 0}, result_types=[x.type])
        elif kind == "scalar":
            op = ("aten.mul.Scalar", "aten.add.Scalar", "aten.pow.Tensor_Scalar")[r[1] % 3]
            self.node(op, [x], {"exponent": (2, 3)[r[2] % 2]} if "pow" in op else {"other": 2.0})
        elif kind == "to_copy":
            dtype = DType.bf16 if x.dtype is DType.f32 else DType.f32
            if r[1] % 2:
                self.node("aten._to_copy", [x], {"dtype": dtype})
            else:
                self.node("dim_order_ops._to_dim_order_copy", [x], {"dtype": (dtype, x.dtype)[r[2] % 2]})
        elif kind == "batchnorm":
            self.step_batchnorm(x, r)
        elif kind == "trap":
            self.step_trap(x, r)
        elif kind == "cross":
            self.step_cross(x, r)

    def step_batchnorm(self, x: Value, r) -> None:
        if r[1] % 2:  # after a conv (it may fold)
            conv = self.op_conv(self.float_value(r[0], lambda v: v.rank in (3, 4)) or x, r)
            if conv is None:
                return
            x = conv.result
        if x.rank < 2:
            return
        c = x.shape[1]
        stats = [
            self.constant(n, x.dtype, (c,), InputKind.parameter if n in ("g", "beta") else InputKind.buffer)
            for n in ("g", "beta", "mean", "var")
        ]
        if r[2] % 4 == 3:
            stats[2] = self.user_input(x.dtype, (c,))  # statistics not constants
        node = self.node(
            "aten._native_batch_norm_legit_no_training", [x, *stats], {"momentum": 0.1, "eps": 1e-5}, track=False
        )
        if node is not None:
            self.floats.append(node.results[0])
            self.values.append(node.results[0])
            if r[3] % 4 == 3:
                self.values.append(node.results[1])  # a used statistic output (may be returned)

    def step_trap(self, x: Value, r) -> None:
        """a -> b (rejected) -> c and a -> c; sometimes a -> d (supported) -> c instead of a -> c."""
        a = self.op_unary(x, r)
        if a is None:
            return
        a = a.result
        b = self.node(REJECTED_UNARY[r[2] % 2], [a], {"dim": 0} if r[2] % 2 == 0 else {}, result_types=[a.type]).result
        other = a
        if r[4] % 2:
            other = self.node(("aten.neg", "aten.sigmoid")[r[5] % 2], [a]).result
        ops = (other, b) if r[3] % 2 else (b, other)
        self.op_binary(ops[0], ops[1], (0, r[1], 0, 0, 0, 0))

    def step_cross(self, x: Value, r) -> None:
        """Two chains that cross through rejected ops: a = f(x), b = g(y), a2 = a + rejected(b),
        c = h(rejected(a)). Each supported op may join a group; the groups must not form a cycle."""
        y = self.partner(x, r[1])
        a = self.op_unary(x, (0, r[2], 0, 0, 0, 0))
        b = self.op_unary(y, (0, r[3], 0, 0, 0, 0))
        if a is None or b is None:
            return
        a, b = a.result, b.result
        rejected = REJECTED_UNARY[r[4] % 2]
        attrs = {"dim": 0} if rejected == "aten.cumsum" else {}
        crossed = self.node(rejected, [b], attrs, result_types=[b.type]).result
        self.op_binary(a, crossed, (0, r[5], 0, 0, 0, 0))
        back = self.node(rejected, [a], attrs, result_types=[a.type]).result
        self.op_unary(back, (0, r[5] // 2, 0, 0, 0, 0))

    # -------------------------------------------------------- quantized steps
    def quantize(self, x: Value, r: int, scale: int = 0) -> Value:
        """A dequantized version of ``x``: a dequantize result as is; else a new Q->DQ, a new DQ of
        an existing Q (shared quantize) or an existing DQ (shared dequantize)."""
        if self.is_dequantized(x):
            if self.shared_dq or not x.uses or x.producer.op != DQ:
                return x
            return self.dequantize(x.producer.input)  # read already: a dequantize of its own
        if x.dtype is not DType.f32:
            x = self.node("aten._to_copy", [x], {"dtype": DType.f32}).result
        existing = self.quantizes_of.get(id(x), [])
        how = r % 3
        if existing and how == 2 and self.shared_dq:
            q = pick(existing, r // 3)
            dqs = self.dequantizes_of.get(id(q), [])
            if dqs:
                return pick(dqs, r // 3)
        if existing and how >= 1:
            q = pick(existing, r // 3)
        else:
            q = self.node(Q, [x], qparams(scale)).result
            self.int8.append(q)
            self.quantizes_of.setdefault(id(x), []).append(q)
        return self.dequantize(q)

    def dequantize(self, q: Value) -> Value:
        producer = q.producer
        attrs = dict(producer.attributes) if producer is not None and producer.op == Q else qparams(0)
        dq = self.node(DQ, [q], attrs).result
        self.dequantizes_of.setdefault(id(q), []).append(dq)
        return dq

    def quantized_weight(self, n: int, k: int, r) -> Value:
        """A [n, k] weight: i8 constant behind a per-tensor or per-channel dequantize (maybe
        through a permute), or a plain f32 constant (then only the input is quantized)."""
        how = r % 5
        if how == 4:
            return self.constant("w", DType.f32, (n, k))
        return self.quantized_constant((n, k), how)

    def quantized_constant(self, shape, how: int) -> Value:
        transposed = how == 3 and len(shape) == 2
        stored = (shape[1], shape[0]) if transposed else shape
        w = self.constant("qw", DType.i8, stored)
        if how == 1:
            scales = self.constant("scales", DType.f32, (stored[0],), InputKind.buffer)
            zeros = self.constant("zeros", DType.i64, (stored[0],), InputKind.buffer)
            dq = self.node(
                DQ_CHANNEL,
                [w, scales, zeros],
                {"axis": 0, "quant_min": -127, "quant_max": 127, "dtype": DType.i8},
                track=False,
            ).result
        else:
            dq = self.node(DQ, [w], {**qparams(1), "quant_min": -127}, track=False).result
        if transposed:
            dq = self.node("aten.permute_copy", [dq], {"dims": [1, 0]}, track=False).result
        return dq

    def output(self, node, r) -> None:
        """What follows a quantized op: [relu ->] Q -> DQ, Q only, or nothing (a float output)."""
        if node is None:
            return
        y = node.results[0]
        if r[4] % 5 == 4:
            relu = self.node("aten.relu", [y])
            y = relu.result
        how = r[5] % 4
        if how == 3:
            return  # a quantized op whose output is not quantized
        q = self.node(Q, [y], qparams(r[3] if how == 2 else 0)).result
        self.int8.append(q)
        self.quantizes_of.setdefault(id(y), []).append(q)
        if how != 1:
            self.dequantize(q)

    def step_quant(self, kind: str, r) -> None:
        if kind == "dyn_linear":
            return self.step_dynamic(r)
        if kind == "q_trap":
            return self.step_quantized_trap(r)
        f32 = [v for v in self.floats if v.dtype is DType.f32]
        if not f32:
            return
        x = pick(f32, r[0])
        node = None
        if kind == "q_unary":
            node = self.node(("aten.relu", "aten.hardtanh", "aten.sigmoid")[r[1] % 3], [self.quantize(x, r[2])])
        elif kind == "q_binary":
            b = self.partner(x, r[3])
            a = self.quantize(x, r[2])
            node = self.op_binary(a, self.quantize(b, r[3] // 2, r[1]), r)
        elif kind == "q_linear":
            n = 1 + r[1] % 4
            w = self.quantized_weight(n, x.shape[-1], r[2])
            bias = [self.constant("b", DType.f32, (n,))] if r[3] % 2 else []
            node = self.op_linear(self.quantize(x, r[3] // 2), w, bias, {})
        elif kind == "q_conv":
            x = pick([v for v in f32 if v.rank in (3, 4)] or [x], r[0])
            spec = self.conv_weight_shape(x, r)
            if spec is not None:
                shape, attrs = spec
                w = self.quantized_constant(shape, r[1] % 3) if r[1] % 4 != 3 else self.constant("cw", DType.f32, shape)
                node = self.node("aten.convolution", [self.quantize(x, r[2]), w], {**attrs, "bias": None})
        elif kind == "q_permute":
            node = self.op_permute(self.quantize(x, r[2]), r)
        elif kind == "q_view":
            node = self.op_view(self.quantize(x, r[2]), r)
        elif kind == "q_cat":
            dim = r[1] % x.rank
            same = [
                v
                for v in f32
                if v.rank == x.rank and all(a == b for j, (a, b) in enumerate(zip(v.shape, x.shape)) if j != dim)
            ]
            pool = [self.quantize(v, r[2] + i) for i, v in enumerate([pick(same, r[3]), pick(same, r[4])])]
            node = self.op_cat(self.quantize(x, r[2]), r, pool=pool)
        elif kind == "q_maxpool":
            x = pick([v for v in f32 if v.rank == 4] or [x], r[0])
            node = self.op_maxpool(self.quantize(x, r[2]), r)
        elif kind == "q_mean":
            x = pick([v for v in f32 if v.rank == 4] or [x], r[0])
            node = self.op_mean(self.quantize(x, r[2]), r)
        elif kind == "q_softmax":
            node = self.op_softmax(self.quantize(x, r[2]), r)
        self.output(node, r)

    def step_quantized_trap(self, r) -> None:
        """A quantized residual around a rejected op: a -> Q/DQ -> add, and a -> [Q/DQ ->]
        rejected op -> Q/DQ -> add (a is a float op's or a quantized op's output)."""
        f32 = [v for v in self.floats if v.dtype is DType.f32]
        if not f32:
            return
        a = pick(f32, r[0])
        if r[1] % 2:  # a comes out of a quantized op
            a = self.dequantize(
                self.node(Q, [self.node("aten.relu", [self.quantize(a, r[2])]).result], qparams(0)).result
            )
        middle_input = self.quantize(a, r[3]) if r[4] % 2 else a
        middle = self.node(
            REJECTED_UNARY[r[5] % 2],
            [middle_input],
            {"dim": 0} if r[5] % 2 == 0 else {},
            result_types=[middle_input.type],
        ).result
        operands = [self.quantize(a, r[2] + 1), self.quantize(middle, r[3])]
        if r[4] // 2 % 2:
            operands.reverse()
        self.output(self.node("aten.add.Tensor", operands), (0, 0, 0, 0, 0, r[5] // 2 % 3))

    def step_dynamic(self, r) -> None:
        f32 = [v for v in self.floats if v.dtype is DType.f32]
        if not f32:
            return
        x = pick(f32, r[0])
        qp = {"quant_min": -128, "quant_max": 127}
        choose = self.node(
            "quantized_decomposed.choose_qparams.tensor", [x], {**qp, "eps": 1e-5, "dtype": DType.i8}, track=False
        )
        scale, zero = choose.results
        q = self.node(
            "quantized_decomposed.quantize_per_tensor.tensor", [x, scale, zero], {**qp, "dtype": DType.i8}, track=False
        ).result
        dq = self.node(
            "quantized_decomposed.dequantize_per_tensor.tensor",
            [q, scale, zero],
            {**qp, "dtype": DType.i8},
            track=False,
        ).result
        n = 1 + r[1] % 4
        w = self.quantized_constant((n, x.shape[-1]), (1, 1, 0, 3)[r[2] % 4])
        self.op_linear(dq, w, [], {})


# ----------------------------------------------------------------------------- strategies


def shape_of(n: int) -> tuple[int, ...]:
    """A shape of rank 1..8 with dims 1..4 from one integer (0 is [1]; the rank is n mod 8)."""
    rank, n = 1 + n % 8, n // 8
    return tuple(1 + n // 4**i % 4 for i in range(rank))


def digits(n: int) -> tuple[int, ...]:
    """Six base-12 digits, least significant first."""
    return tuple(n // 12**i % 12 for i in range(6))


def steps(kinds) -> st.SearchStrategy:
    """One step (kind, six digits) from one integer: drawing is what costs, so one draw a step."""
    n = len(kinds)
    return st.integers(0, n * 12**6 - 1).map(lambda v: (kinds[v % n], digits(v // n)))


shapes = st.integers(0, 8 * 4**8 - 1).map(shape_of)


@functools.lru_cache(maxsize=None)
def programs(bf16: bool | None = None, kinds=KINDS, max_steps: int = 12, shared_dq: bool | None = None):
    """Programs: (shared_dq, inputs as (dtype, shape), steps, outputs), interpreted by
    :func:`build`. ``bf16``: whether inputs may be bf16 (None: drawn); ``shared_dq``: whether a
    dequantize may have several readers (None: drawn). The strategy is built once per
    arguments (building one on every draw costs as much as the draw)."""
    flag = lambda value: st.booleans() if value is None else st.just(value)  # noqa: E731
    inputs = st.tuples(flag(bf16), st.lists(st.tuples(st.booleans(), shapes), min_size=1, max_size=3)).map(
        lambda drawn: [(DType.bf16 if drawn[0] and wants else DType.f32, shape) for wants, shape in drawn[1]]
    )
    body = st.lists(steps(tuple(kinds)), max_size=max_steps)
    outputs = st.lists(st.integers(0, 40), min_size=1, max_size=3)
    return st.tuples(inputs, body, outputs, flag(shared_dq))


def build(program) -> Graph:
    inputs, body, outputs, shared_dq = program
    b = Builder(shared_dq=shared_dq)
    for dtype, shape in inputs:
        v = b.user_input(dtype, shape)
        b.floats.append(v)
        b.values.append(v)
    for kind, r in body:
        if kind in QUANT_KINDS:
            b.step_quant(kind, r)
        else:
            b.step_float(kind, r)
    returnable = b.values
    if not shared_dq:  # a dequantize read by a node is not returned too
        returnable = [v for v in b.values if not (b.is_dequantized(v) and v.uses)] or b.values
    b.g.outputs = [pick(returnable, i) for i in outputs]
    return b.g


def graphs(bf16: bool | None = None, kinds=KINDS, max_steps: int = 12, shared_dq: bool | None = None):
    """Random graphs (verifiable by construction)."""
    return programs(bf16, tuple(kinds), max_steps, shared_dq).map(build)
