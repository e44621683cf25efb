"""Random PyTorch programs, deterministic from (seed, kind).

A program is a DAG of 3-12 ops over 1-3 inputs: results can be consumed several times, returned
and consumed, inputs shared. Every op is checked as it is added by running it on real tensors
(the same parameters the final module will have, since each op's ``__init__`` lines run after
``torch.manual_seed(param_seed + op.id)``), so shapes and dtypes are exact, value-dependent
hazards (log of negatives, overflow) are avoided, and the finished module is run once more in
eager as a guard. Any failure retries deterministically (the attempt number is part of the
random seed).
"""

from __future__ import annotations

import math
import random

from .program import KINDS, InputSpec, OpSpec, Program, instantiate

MAX_NUMEL = 4096  # every tensor: programs stay fast
MAX_INPUT_NUMEL = 1024
MAX_RANK = 8
MIN_SPREAD = 1e-3  # normalized rows: variance (layer/group norm) or mean square (RMS norm) at least this
MAX_ABS = 1e4  # |value| bound on every intermediate (fp16 overflows at 65504; keeps programs well conditioned)

WEIGHTS = {
    "fp32": dict(
        linear=8,
        conv1d=2,
        conv2d=4,
        conv3d=1.5,
        conv_transpose1d=1,
        conv_transpose2d=1.5,
        batch_norm=3,
        layer_norm=3,
        group_norm=2,
        rms_norm=2,
        activation=10,
        softmax=3,
        binary=10,
        binary_scalar=4,
        unary=5,
        matmul=3,
        reduce=4,
        reshape=4,
        permute=3,
        unsqueeze=2,
        squeeze=1.5,
        cat=3,
        slice=3,
        split=2,
        pad=2,
        pool=3,
        interpolate=2,
        where=2,
        cast=2.5,
        select=2,
    ),
    "static": dict(
        linear=14,
        conv1d=3,
        conv2d=8,
        conv3d=1,
        conv_transpose1d=1,
        conv_transpose2d=2,
        batch_norm=4,
        layer_norm=1.5,
        group_norm=1,
        rms_norm=1,
        activation=12,
        softmax=2,
        binary=10,
        binary_scalar=3,
        unary=2,
        matmul=2,
        reduce=3,
        reshape=3,
        permute=2,
        unsqueeze=1.5,
        squeeze=1,
        cat=4,
        slice=2,
        split=1.5,
        pad=1.5,
        pool=4,
        interpolate=1.5,
        where=1,
        cast=0,
        select=1,
    ),
    "dynamic": dict(
        linear=30,
        conv1d=1,
        conv2d=2,
        conv3d=0,
        conv_transpose1d=0,
        conv_transpose2d=0.5,
        batch_norm=1,
        layer_norm=2,
        group_norm=0.5,
        rms_norm=1,
        activation=8,
        softmax=2,
        binary=6,
        binary_scalar=2,
        unary=2,
        matmul=2,
        reduce=2,
        reshape=3,
        permute=2,
        unsqueeze=1,
        squeeze=1,
        cat=2,
        slice=2,
        split=1,
        pad=1,
        pool=1,
        interpolate=0.5,
        where=1,
        cast=0,
        select=1.5,
    ),
}
WEIGHTS["bf16"] = dict(WEIGHTS["fp32"], cast=2)

SHAPES = {  # input shape templates, weighted per kind
    "fp32": dict(vec=1, mat=2, seq=3, img=6, vol=1.5, sig=3, generic=2),
    "static": dict(vec=0.5, mat=2, seq=2, img=7, vol=0.5, sig=3, generic=1),
    "dynamic": dict(vec=1, mat=3, seq=3, img=1, vol=0, sig=0.5, generic=1),
}
SHAPES["bf16"] = SHAPES["fp32"]

FLOATS = ("float32", "bfloat16", "float16")
RANKS = dict(
    conv1d=(3,),
    conv2d=(4,),
    conv3d=(5,),
    conv_transpose1d=(3,),
    conv_transpose2d=(4,),
    batch_norm=(2, 3, 4),
    pool=(4,),
    interpolate=(3, 4),
    group_norm=(3, 4, 5),
    bmm=(3,),
)


class Retry(Exception):
    """This attempt cannot make a program; the next attempt (another random stream) will."""


def config(seed: int, kind: str) -> tuple[str, bool]:
    """The lowering path and (static) per-channel choice of a program: chosen by the seed."""
    rng = random.Random(f"xir-fuzz-config/{kind}/{seed}")
    via = rng.choice(["etal", "backend"])
    per_channel = kind == "dynamic" or (kind == "static" and rng.random() < 0.5)
    return via, per_channel


# The generator's editions: an op kind added to WEIGHTS changes the program of every seed (its
# weighted choice draws from another table), so each edition keeps its own set. A campaign records
# the edition it ran; --resume and --rerun build its programs with it.
GENERATOR = 2
SINCE = {"select": 2}  # op kinds added after the first edition, and the edition that added them


def _weights(kind: str, generator: int) -> dict:
    return {op: weight for op, weight in WEIGHTS[kind].items() if SINCE.get(op, 1) <= generator}


def generate(seed: int, kind: str, max_ops: int = 12, min_ops: int = 3, generator: int = GENERATOR) -> Program:
    """The program of (seed, kind): deterministic. ``generator``: the edition (1: before the
    select of one index; 2: the current one)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    if generator not in range(1, GENERATOR + 1):
        raise ValueError(f"unknown generator edition {generator!r}; expected 1 to {GENERATOR}")
    min_ops = max(1, min(min_ops, max_ops))
    last_error = None
    for attempt in range(200):
        rng = random.Random(f"xir-fuzz/{kind}/{seed}/{attempt}/{min_ops}/{max_ops}")
        try:
            program = _Builder(rng, seed, kind, min_ops, max_ops, _weights(kind, generator)).build()
            check_eager(program)
            return program
        except Retry as error:
            last_error = error
    raise RuntimeError(f"no valid program for seed {seed}, kind {kind}: {last_error}")


def check_eager(program: Program):
    """Exec the source, run it eagerly (in the kind's float dtype): outputs exist and are finite."""
    import torch

    try:
        module_class, make_inputs = instantiate(program.module_source())
        module = module_class().eval()
        inputs = make_inputs()
        if program.kind == "bf16":
            module = module.to(torch.bfloat16)
            inputs = tuple(t.to(torch.bfloat16) if t.is_floating_point() else t for t in inputs)
        with torch.no_grad():
            outputs = module(*inputs)
    except Exception as error:
        raise Retry(f"eager: {type(error).__name__}: {error}") from None
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    if len(outputs) != len(program.outputs):
        raise Retry("output count")
    for out in outputs:
        if out.is_floating_point() and not torch.isfinite(out).all():
            raise Retry("non-finite eager output")
    return outputs


def _prod(shape) -> int:
    return math.prod(shape) if shape else 1


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _factorize(n: int) -> list[int]:
    factors, d = [], 2
    while d * d <= n:
        while n % d == 0:
            factors.append(d)
            n //= d
        d += 1
    if n > 1:
        factors.append(n)
    return factors


def _fmt(value) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_fmt(v) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})"
    return repr(value)


def _kwargs(**options) -> str:
    """Non-default keyword arguments, ``None`` meaning "leave out"."""
    return "".join(f", {k}={_fmt(v)}" for k, v in options.items() if v is not None)


class _Builder:
    def __init__(self, rng: random.Random, seed: int, kind: str, min_ops: int, max_ops: int, weights: dict):
        import torch

        self.weights = weights
        self.torch = torch
        self.rng, self.seed, self.kind = rng, seed, kind
        self.min_ops, self.max_ops = min_ops, max_ops
        self.main = "bfloat16" if kind == "bf16" else "float32"
        self.values: dict = {}  # name -> tensor
        self.order: list = []  # value names in creation order (inputs first)
        self.uses: dict = {}
        self.inputs: list = []
        self.ops: list = []
        self.param_seed = seed * 100
        self.holder = torch.nn.Module()  # the module's attributes, built op by op
        self.next_id = 1

    # ----------------------------------------------------------------- helpers
    def dtype_name(self, t) -> str:
        return str(t.dtype).replace("torch.", "")

    def shape(self, name) -> tuple:
        return tuple(self.values[name].shape)

    def dtype(self, name) -> str:
        return self.dtype_name(self.values[name])

    def floats(self) -> list:
        return [n for n in self.order if self.dtype(n) in FLOATS]

    def choice_weighted(self, table: dict):
        keys = [k for k, w in table.items() if w > 0]
        return self.rng.choices(keys, weights=[table[k] for k in keys])[0]

    # ----------------------------------------------------------------- inputs
    def input_shape(self, template: str) -> list:
        r = self.rng
        for _ in range(100):
            if template == "vec":
                shape = [r.randint(3, 32)]
            elif template == "mat":
                shape = [r.randint(1, 8), r.choice([3, 4, 5, 8, 12, 16, 24, 32])]
            elif template == "seq":
                shape = [r.randint(1, 3), r.randint(2, 8), r.choice([4, 6, 8, 12, 16, 32])]
            elif template == "img":
                shape = [r.choice([1, 1, 2]), r.choice([1, 2, 3, 4, 6, 8]), r.randint(4, 12), r.randint(4, 12)]
            elif template == "vol":
                shape = [1, r.randint(1, 4), r.randint(2, 5), r.randint(3, 6), r.randint(3, 6)]
            elif template == "sig":
                shape = [r.choice([1, 2]), r.choice([1, 2, 3, 4, 8]), r.randint(4, 24)]
            else:
                shape = [r.choice([1, 2, 2, 3, 4, 5, 6]) for _ in range(r.randint(1, 6))]
            if _prod(shape) <= MAX_INPUT_NUMEL:
                return shape
        return [4, 8]

    def make_inputs(self):
        torch = self.torch
        count = self.rng.choices([1, 2, 3], weights=[5, 3, 2])[0]
        first = None
        for index in range(count):
            name = f"x{index}"
            if index > 0 and self.rng.random() < 0.12 and not any(i.dtype == "int64" for i in self.inputs):
                shape = [self.rng.randint(1, 3), self.rng.randint(2, 8)]
                spec = InputSpec(name, shape, "int64", self.seed * 100 + 90 + index, high=self.rng.randint(5, 20))
            else:
                if first is not None and self.rng.random() < 0.5:
                    shape = list(first)
                else:
                    shape = self.input_shape(self.choice_weighted(SHAPES[self.kind]))
                first = first or shape
                spec = InputSpec(name, shape, self.main, self.seed * 100 + 90 + index)
            namespace = {"torch": torch}
            exec(spec.line(), namespace)
            tensor = namespace[name]
            if spec.dtype == "bfloat16":
                tensor = tensor.to(torch.bfloat16)
            self.inputs.append(spec)
            self.values[name] = tensor
            self.order.append(name)
            self.uses[name] = 0

    # ----------------------------------------------------------------- driver
    def build(self) -> Program:
        self.make_inputs()
        via, per_channel = config(self.seed, self.kind)
        target = self.rng.randint(self.min_ops, self.max_ops)
        for spec in self.inputs:  # an int input is read by an embedding first
            if spec.dtype == "int64":
                self.add(self.op_embedding(spec.name))
        while len(self.ops) < target:
            if not self.add_random_op():
                break
        for spec in list(self.inputs):  # every float input used (or dropped)
            tries = 0
            while self.uses[spec.name] == 0 and len(self.ops) < self.max_ops + 2 and tries < 20:
                tries += 1
                self.add_random_op(first=spec.name)
        self.inputs = [i for i in self.inputs if self.uses[i.name] > 0]
        if len(self.ops) < self.min_ops or not self.inputs:
            raise Retry("too few ops")
        outputs = self.choose_outputs()
        return Program(self.seed, self.kind, via, per_channel, self.inputs, self.ops, outputs, self.param_seed)

    def choose_outputs(self) -> list:
        produced = [n for op in self.ops for n in op.outs]
        sinks = [n for n in produced if self.uses[n] == 0]
        consumed = [n for n in produced if self.uses[n] > 0 and n not in sinks]
        outputs = list(sinks)
        if consumed and (self.rng.random() < 0.35 or (len(outputs) == 1 and self.rng.random() < 0.4)):
            outputs.append(self.rng.choice(consumed))  # returned and consumed
        if not outputs:
            raise Retry("no outputs")
        if len(outputs) > 1 and self.rng.random() < 0.3:
            self.rng.shuffle(outputs)
        else:
            outputs.sort(key=produced.index)
        return outputs

    def pick(self, dtypes=FLOATS, ranks=None) -> str | None:
        candidates = [n for n in self.order if self.dtype(n) in dtypes]
        if ranks and self.rng.random() < 0.7:  # ops that need a rank: prefer values that have it
            candidates = [n for n in candidates if len(self.shape(n)) in ranks] or candidates
        if not candidates:
            return None
        unconsumed = [n for n in candidates if self.uses[n] == 0]
        r = self.rng.random()
        if r < 0.45 and unconsumed:
            return self.rng.choice(unconsumed[-3:])
        if r < 0.75:
            return candidates[-1]
        return self.rng.choice(candidates)

    def add_random_op(self, first: str | None = None) -> bool:
        weights = self.weights
        for _ in range(80):
            kind = self.choice_weighted(weights)
            x = first or self.pick(ranks=RANKS.get(kind))
            if x is None:
                return False
            spec = getattr(self, f"op_{kind}")(x)
            if spec is not None and self.add(spec):
                return True
        return False

    def add(self, spec: dict | None) -> bool:
        """Run the op on the real tensors; keep it when it is valid."""
        if spec is None:
            return False
        torch = self.torch
        op_id = self.next_id
        n_outs = spec.get("n_outs", 1)
        outs = [f"v{op_id}" if n_outs == 1 else f"v{op_id}_{k}" for k in range(n_outs)]
        template = spec["template"].replace("@ID", str(op_id))
        init = [line.replace("@ID", str(op_id)) for line in spec.get("init", [])]
        before = set(self.holder._modules) | set(self.holder._parameters) | set(self.holder._buffers)
        try:
            if init:
                torch.manual_seed(self.param_seed + op_id)
                exec("\n".join(init), {"self": self.holder, "torch": torch, "nn": torch.nn})
                if self.main == "bfloat16":
                    self.holder.to(torch.bfloat16)
                self.holder.eval()
            env = {"self": self.holder, "torch": torch, "F": torch.nn.functional, "nn": torch.nn}
            env.update({n: self.values[n] for n in spec["args"]})
            with torch.no_grad():
                result = eval(template.format(*spec["args"]), env)
            results = list(result) if isinstance(result, (tuple, list)) else [result]
            if len(results) != n_outs:
                raise Retry("result count")
            for t in results:
                if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                    raise Retry("not a float tensor")
                if t.numel() == 0 or t.numel() > MAX_NUMEL or t.dim() > MAX_RANK:
                    raise Retry("size")
                if t.dtype == torch.float64:
                    raise Retry("float64")
                if not torch.isfinite(t).all() or t.abs().max().item() > MAX_ABS:
                    raise Retry("values")
        except Exception:
            for name in set(self.holder._modules) | set(self.holder._parameters) | set(self.holder._buffers):
                if name not in before:
                    delattr(self.holder, name)
            return False
        self.next_id += 1
        for name, t in zip(outs, results):
            self.values[name] = t
            self.order.append(name)
            self.uses[name] = 0
        for a in spec["args"]:
            self.uses[a] += 1
        self.ops.append(
            OpSpec(
                op_id,
                spec["kind"],
                template,
                list(spec["args"]),
                outs,
                [list(t.shape) for t in results],
                [self.dtype_name(t) for t in results],
                init,
                bool(spec.get("exact", False)),
            )
        )
        return True

    # ----------------------------------------------------------------- ops
    # each returns a spec dict (kind, template with {0}.. operands and @ID for the op id, args,
    # init lines, n_outs, exact) or None when it does not apply to x

    def is_main(self, x) -> bool:
        return self.dtype(x) == self.main

    def spread(self, x, dims: tuple, groups: int | None = None, center: bool = True) -> float:
        """The smallest variance (``center``) or mean square over the normalized groups of x:
        normalizing a (nearly) constant row divides rounding noise by sqrt(eps), so that any two
        correct implementations differ by far more than the tolerances allow."""
        t = self.values[x].double()
        if groups is not None:
            t = t.reshape(t.shape[0], groups, -1)
            dims = (-1,)
        if center:
            return t.var(dim=dims, unbiased=False).min().item()
        return t.pow(2).mean(dim=dims).min().item()

    def op_linear(self, x):
        shape = self.shape(x)
        if not self.is_main(x) or not 1 <= len(shape) <= 5:
            return None
        out = self.rng.choice([1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32])
        if _prod(shape[:-1]) * out > MAX_NUMEL:
            return None
        bias = None if self.rng.random() < 0.8 else False
        return dict(
            kind="linear",
            template="self.linear@ID({0})",
            args=[x],
            init=[f"self.linear@ID = nn.Linear({shape[-1]}, {out}{_kwargs(bias=bias)})"],
        )

    def _conv(self, x, dims: int, transposed: bool):
        r = self.rng
        shape = self.shape(x)
        batched = len(shape) == dims + 2
        if not self.is_main(x) or not (batched or (len(shape) == dims + 1 and r.random() < 0.15)):
            return None
        channels = shape[-dims - 1]
        groups = 1 if r.random() < 0.6 else r.choice(_divisors(channels))
        out = groups * r.choice([1, 1, 2, 3, 4]) if groups > 1 else r.choice([1, 2, 3, 4, 6, 8, 12, 16])
        kernel = r.choice([1, 2, 3, 3, 3, 5]) if not transposed else r.choice([1, 2, 3, 3, 4])
        if dims == 2 and r.random() < 0.15:
            kernel = (r.choice([1, 3]), r.choice([1, 2, 3]))
        ks = kernel if isinstance(kernel, tuple) else (kernel,) * dims
        stride = r.choice([1, 1, 1, 2]) if not transposed else r.choice([1, 2, 2, 3])
        dilation = r.choice([1, 1, 1, 1, 2])
        padding = r.choice([0, 0, 1, min(ks) // 2])
        options = dict(
            stride=stride if stride != 1 else None,
            padding=padding or None,
            dilation=dilation if dilation != 1 else None,
            groups=groups if groups > 1 else None,
            bias=None if r.random() < 0.8 else False,
        )
        if transposed:
            padding = min(padding, (dilation * (min(ks) - 1)) // 2)
            options["padding"] = padding or None
            if r.random() < 0.2 and max(stride, dilation) > 1:
                options["output_padding"] = r.randint(1, max(stride, dilation) - 1)
            name = f"ConvTranspose{dims}d"
        else:
            if stride == 1 and r.random() < 0.1:
                options["padding"] = "same"
            name = f"Conv{dims}d"
        return dict(
            kind=f"conv{'_transpose' if transposed else ''}{dims}d",
            template="self.conv@ID({0})",
            args=[x],
            init=[f"self.conv@ID = nn.{name}({channels}, {out}, {_fmt(kernel)}{_kwargs(**options)})"],
        )

    def op_conv1d(self, x):
        return self._conv(x, 1, False)

    def op_conv2d(self, x):
        return self._conv(x, 2, False)

    def op_conv3d(self, x):
        return self._conv(x, 3, False)

    def op_conv_transpose1d(self, x):
        return self._conv(x, 1, True)

    def op_conv_transpose2d(self, x):
        return self._conv(x, 2, True)

    def op_batch_norm(self, x):
        shape = self.shape(x)
        if not self.is_main(x) or len(shape) not in (2, 3, 4):
            return None
        name = "BatchNorm2d" if len(shape) == 4 else "BatchNorm1d"
        affine = self.rng.random() < 0.85
        init = [
            f"self.bn@ID = nn.{name}({shape[1]}{_kwargs(affine=None if affine else False)})",
            "self.bn@ID.running_mean.uniform_(-1.0, 1.0)",
            "self.bn@ID.running_var.uniform_(0.5, 2.0)",
        ]
        if affine:
            init += ["nn.init.uniform_(self.bn@ID.weight, 0.5, 2.0)", "nn.init.uniform_(self.bn@ID.bias, -1.0, 1.0)"]
        return dict(kind="batch_norm", template="self.bn@ID({0})", args=[x], init=init)

    def op_layer_norm(self, x):
        shape = self.shape(x)
        if not self.is_main(x) or not shape:
            return None
        k = 1 if len(shape) == 1 or self.rng.random() < 0.75 else 2
        normalized = tuple(shape[-k:])
        if _prod(normalized) < 2 or self.spread(x, tuple(range(-k, 0))) < MIN_SPREAD:
            return None
        affine = self.rng.random() < 0.8
        bias = None if self.rng.random() < 0.8 else False
        arg = str(normalized[0]) if k == 1 else _fmt(normalized)
        init = [
            f"self.ln@ID = nn.LayerNorm({arg}{_kwargs(elementwise_affine=None if affine else False, bias=bias if affine else None)})"
        ]
        if affine:
            init.append("nn.init.uniform_(self.ln@ID.weight, 0.5, 1.5)")
            if bias is None:
                init.append("nn.init.uniform_(self.ln@ID.bias, -0.5, 0.5)")
        return dict(kind="layer_norm", template="self.ln@ID({0})", args=[x], init=init)

    def op_group_norm(self, x):
        shape = self.shape(x)
        if not self.is_main(x) or not 2 <= len(shape) <= 5:
            return None
        channels = shape[1]
        groups = self.rng.choice(_divisors(channels))
        if channels // groups * _prod(shape[2:]) < 2 or self.spread(x, (), groups) < MIN_SPREAD:
            return None
        affine = self.rng.random() < 0.8
        init = [f"self.gn@ID = nn.GroupNorm({groups}, {channels}{_kwargs(affine=None if affine else False)})"]
        if affine:
            init += ["nn.init.uniform_(self.gn@ID.weight, 0.5, 1.5)", "nn.init.uniform_(self.gn@ID.bias, -0.5, 0.5)"]
        return dict(kind="group_norm", template="self.gn@ID({0})", args=[x], init=init)

    def op_rms_norm(self, x):
        shape = self.shape(x)
        if not shape or self.spread(x, (-1,), center=False) < MIN_SPREAD:
            return None
        template = "{0} * torch.rsqrt({0}.pow(2).mean(-1, keepdim=True) + 1e-06)"
        if self.is_main(x) and self.rng.random() < 0.5:
            return dict(
                kind="rms_norm",
                template=template + " * self.rms@ID",
                args=[x],
                init=[f"self.rms@ID = nn.Parameter(torch.rand({shape[-1]}) + 0.5)"],
            )
        return dict(kind="rms_norm", template=template, args=[x])

    def op_activation(self, x):
        r = self.rng
        name = r.choice(
            ["relu", "sigmoid", "tanh", "hardswish", "hardtanh", "leaky_relu", "gelu", "gelu_tanh", "relu6"]
        )
        exact = name in ("relu", "hardtanh", "relu6")
        template = {
            "relu": r.choice(["torch.relu({0})", "F.relu({0})"]),
            "sigmoid": "torch.sigmoid({0})",
            "tanh": "torch.tanh({0})",
            "hardswish": "F.hardswish({0})",
            "hardtanh": f"F.hardtanh({{0}}, {r.choice([-1.0, -2.0, -0.5, 0.0])}, {r.choice([0.5, 1.0, 2.0, 6.0])})",
            "leaky_relu": f"F.leaky_relu({{0}}, {r.choice([0.01, 0.1, 0.2])})",
            "gelu": "F.gelu({0})",
            "gelu_tanh": "F.gelu({0}, approximate='tanh')",
            "relu6": "F.relu6({0})",
        }[name]
        return dict(kind=name, template=template, args=[x], exact=exact)

    def op_softmax(self, x):
        rank = len(self.shape(x))
        if rank == 0:
            return None
        dim = -1 if self.rng.random() < 0.5 else self.rng.randrange(rank)
        form = self.rng.choice(["torch.softmax({{0}}, dim={d})", "F.softmax({{0}}, dim={d})", "{{0}}.softmax({d})"])
        return dict(kind="softmax", template=form.format(d=dim), args=[x])

    def _broadcast_partner(self, x):
        """Another value (or x) whose shape broadcasts with x's."""
        torch = self.torch
        candidates = []
        for y in self.floats():
            if self.dtype(y) != self.dtype(x) and self.rng.random() < 0.8:
                continue
            try:
                shape = torch.broadcast_shapes(self.shape(x), self.shape(y))
            except RuntimeError:
                continue
            if _prod(shape) <= MAX_NUMEL and len(shape) <= MAX_RANK:
                candidates.append(y)
        if not candidates:
            return None
        others = [y for y in candidates if y != x]
        if others and self.rng.random() < 0.85:
            return self.rng.choice(others)
        return self.rng.choice(candidates)

    def _broadcast_shape(self, shape) -> tuple:
        """A shape that broadcasts to ``shape``: a suffix, some dims set to 1."""
        if not shape:
            return ()
        keep = self.rng.randint(1, len(shape))
        return tuple(d if self.rng.random() < 0.6 else 1 for d in shape[-keep:])

    def op_binary(self, x):
        r = self.rng
        op = r.choice(["add", "sub", "mul", "div", "rsub"])
        if r.random() < 0.75:
            y = self._broadcast_partner(x)
            if y is None:
                return None
            a, b = (x, y) if r.random() < 0.6 else (y, x)
            safe = self.values[b].abs().min().item() > 0.3
            template = {
                "add": r.choice(["{0} + {1}", "torch.add({0}, {1})", "torch.add({0}, {1}, alpha=2.0)"]),
                "sub": r.choice(["{0} - {1}", "torch.sub({0}, {1})", "torch.sub({0}, {1}, alpha=0.5)"]),
                "mul": r.choice(["{0} * {1}", "torch.mul({0}, {1})"]),
                "div": "{0} / {1}" if safe else "{0} / ({1}.abs() + 1.0)",
                "rsub": "torch.rsub({0}, {1})",
            }[op]
            return dict(kind=op, template=template, args=[a, b])
        # a constant operand: parameter or buffer of a broadcasting shape
        shape = self._broadcast_shape(self.shape(x))
        if not self.is_main(x):
            return None
        if op == "div":
            init = [f"self.c@ID = nn.Parameter(torch.rand({_fmt(shape)}) + 0.5)"]
        elif r.random() < 0.5:
            init = [f"self.c@ID = nn.Parameter(torch.randn({_fmt(shape)}))"]
        else:
            init = [f"self.register_buffer('c@ID', torch.randn({_fmt(shape)}))"]
        template = {
            "add": "{0} + self.c@ID",
            "sub": "self.c@ID - {0}",
            "mul": "{0} * self.c@ID",
            "div": "{0} / self.c@ID",
            "rsub": "torch.rsub({0}, self.c@ID)",
        }[op]
        return dict(kind=op, template=template, args=[x], init=init)

    def op_binary_scalar(self, x):
        r = self.rng
        c = r.choice([0.5, 2.0, -1.5, 3.0, 0.25, -0.75])
        safe = self.values[x].abs().min().item() > 0.3
        options = [
            f"{{0}} + {c}",
            f"{{0}} - {c}",
            f"{{0}} * {c}",
            f"{{0}} / {c}",
            f"{c} * {{0}}",
            f"{c} - {{0}}",
            f"torch.rsub({{0}}, {c})",
            f"{{0}} + {c} * {{0}}",
        ]
        if safe:
            options.append(f"{c} / {{0}}")
        return dict(kind="binary_scalar", template=r.choice(options), args=[x])

    def op_unary(self, x):
        r = self.rng
        t = self.values[x]
        name = r.choice(["log", "exp", "sqrt", "abs", "neg"])
        if name == "log":
            template = "torch.log({0})" if t.min().item() > 1e-2 else "torch.log({0}.abs() + 1.0)"
        elif name == "sqrt":
            template = "torch.sqrt({0})" if t.min().item() >= 0 else "torch.sqrt({0}.abs())"
        elif name == "exp":
            if t.max().item() > 8:
                return None
            template = r.choice(["torch.exp({0})", "{0}.exp()"])
        elif name == "abs":
            template = r.choice(["torch.abs({0})", "{0}.abs()"])
        else:
            template = r.choice(["torch.neg({0})", "-{0}"])
        return dict(kind=name, template=template, args=[x], exact=name in ("abs", "neg"))

    def op_matmul(self, x):
        r = self.rng
        sx = self.shape(x)
        if not sx:
            return None
        same = [y for y in self.floats() if self.dtype(y) == self.dtype(x)]
        if len(sx) == 3 and r.random() < 0.35:  # bmm
            partners = [y for y in same if len(self.shape(y)) == 3 and self.shape(y)[0] == sx[0]]
            direct = [y for y in partners if self.shape(y)[1] == sx[2]]
            transposed = [y for y in partners if self.shape(y)[2] == sx[2]]
            if direct and r.random() < 0.5:
                return dict(kind="bmm", template="torch.bmm({0}, {1})", args=[x, r.choice(direct)])
            if transposed:
                return dict(kind="bmm", template="torch.bmm({0}, {1}.transpose(1, 2))", args=[x, r.choice(transposed)])
            return None
        choice = r.random()
        if choice < 0.35 and len(sx) >= 2:  # x @ y^T with y of the same trailing dims
            partners = [y for y in same if len(self.shape(y)) >= 2 and self.shape(y)[-1] == sx[-1]]
            if partners:
                y = r.choice(partners)
                form = r.choice(["torch.matmul({0}, {1}.transpose(-2, -1))", "{0} @ {1}.transpose(-1, -2)"])
                return dict(kind="matmul", template=form, args=[x, y])
        if choice < 0.7:
            partners = [
                y
                for y in same
                if (len(self.shape(y)) >= 2 and self.shape(y)[-2] == sx[-1])
                or (len(self.shape(y)) == 1 and self.shape(y)[0] == sx[-1])
            ]
            if partners:
                return dict(
                    kind="matmul",
                    template=r.choice(["torch.matmul({0}, {1})", "{0} @ {1}"]),
                    args=[x, r.choice(partners)],
                )
        if not self.is_main(x):
            return None
        out = r.choice([1, 2, 4, 8, 16])
        return dict(
            kind="matmul",
            template="torch.matmul({0}, self.w@ID)",
            args=[x],
            init=[f"self.w@ID = nn.Parameter(torch.randn({sx[-1]}, {out}) / {math.sqrt(sx[-1]):.3f})"],
        )

    def op_reduce(self, x):
        r = self.rng
        rank = len(self.shape(x))
        if rank == 0:
            return None
        name = r.choice(["mean", "sum", "amax"])
        if rank >= 2 and r.random() < 0.3:
            dim = tuple(sorted(r.sample(range(rank), 2)))
        else:
            dim = -1 if r.random() < 0.4 else r.randrange(rank)
        keepdim = r.random() < 0.5
        if not keepdim and rank == 1 and r.random() < 0.8:
            keepdim = True
        args = f"dim={_fmt(dim)}{', keepdim=True' if keepdim else ''}"
        template = r.choice([f"{{0}}.{name}({args})", f"torch.{name}({{0}}, {args})"])
        return dict(kind=name, template=template, args=[x], exact=name == "amax")

    def op_reshape(self, x):
        r = self.rng
        shape = self.shape(x)
        numel = _prod(shape)
        rank = r.randint(1, MAX_RANK)
        factors = _factorize(numel)
        slots = [1] * rank
        for f in factors:
            slots[r.randrange(rank)] *= f
        if r.random() < 0.25 and rank >= 2:
            r.shuffle(slots)
        new = list(slots)
        if r.random() < 0.3:
            new[r.randrange(rank)] = -1
        if tuple(slots) == tuple(shape):
            return None
        if r.random() < 0.15 and len(shape) >= 2:
            start = r.randrange(len(shape) - 1)
            return dict(kind="flatten", template=f"torch.flatten({{0}}, {start})", args=[x], exact=True)
        method = r.choice(["view", "reshape"])
        return dict(kind=method, template=f"{{0}}.{method}({', '.join(str(d) for d in new)})", args=[x], exact=True)

    def op_permute(self, x):
        r = self.rng
        rank = len(self.shape(x))
        if rank < 2:
            return None
        if r.random() < 0.4:
            a, b = r.sample(range(rank), 2)
            if r.random() < 0.3:
                a, b = a - rank, b - rank
            return dict(kind="transpose", template=f"{{0}}.transpose({a}, {b})", args=[x], exact=True)
        perm = list(range(rank))
        while perm == list(range(rank)):
            r.shuffle(perm)
        form = r.choice(["{{0}}.permute({p})", "torch.permute({{0}}, {t})"])
        return dict(
            kind="permute", template=form.format(p=", ".join(map(str, perm)), t=_fmt(tuple(perm))), args=[x], exact=True
        )

    def op_unsqueeze(self, x):
        rank = len(self.shape(x))
        if rank >= MAX_RANK:
            return None
        dim = self.rng.randint(-rank - 1, rank)
        return dict(kind="unsqueeze", template=f"{{0}}.unsqueeze({dim})", args=[x], exact=True)

    def op_squeeze(self, x):
        shape = self.shape(x)
        ones = [i for i, d in enumerate(shape) if d == 1]
        if not ones:
            return None
        if self.rng.random() < 0.2 and len(ones) < len(shape):
            return dict(kind="squeeze", template="{0}.squeeze()", args=[x], exact=True)
        dim = self.rng.choice(ones)
        if self.rng.random() < 0.3:
            dim -= len(shape)
        return dict(kind="squeeze", template=f"torch.squeeze({{0}}, {dim})", args=[x], exact=True)

    def op_cat(self, x):
        r = self.rng
        shape = self.shape(x)
        if not shape:
            return None
        dim = r.randrange(len(shape))
        partners = [
            y
            for y in self.floats()
            if self.dtype(y) == self.dtype(x)
            and len(self.shape(y)) == len(shape)
            and all(a == b for i, (a, b) in enumerate(zip(self.shape(y), shape)) if i != dim)
        ]
        others = [y for y in partners if y != x]
        pool = others if others and r.random() < 0.8 else partners
        chosen = [x] + [r.choice(pool) for _ in range(r.choice([1, 1, 2]))]
        r.shuffle(chosen)
        if r.random() < 0.3:
            dim -= len(shape)
        names = ", ".join(f"{{{i}}}" for i in range(len(chosen)))
        return dict(kind="cat", template=f"torch.cat([{names}], dim={dim})", args=chosen, exact=True)

    def op_slice(self, x):
        r = self.rng
        shape = self.shape(x)
        dims = [i for i, d in enumerate(shape) if d >= 2]
        if not dims:
            return None
        dim = r.choice(dims)
        size = shape[dim]
        start = r.randrange(size - 1)
        stop = r.randint(start + 1, size)
        step = 2 if r.random() < 0.15 and stop - start >= 3 else 1
        text_stop = (
            ""
            if stop == size and r.random() < 0.5
            else (str(stop - size) if r.random() < 0.2 and stop < size else str(stop))
        )
        piece = f"{start or ''}:{text_stop}" + (f":{step}" if step > 1 else "")
        if dim == len(shape) - 1 and r.random() < 0.7:
            index = f"..., {piece}"
        else:
            index = ", ".join([":"] * dim + [piece])
        return dict(kind="slice", template=f"{{0}}[{index}]", args=[x], exact=True)

    def op_select(self, x):
        """One index of one dim, the dim dropped (``x[:, -1]``, ``x.select(1, 2)``): a number index,
        which ``hoist-row-select`` and ``xnnpack.select-as-slice`` rewrite."""
        r = self.rng
        shape = self.shape(x)
        if len(shape) < 2:
            return None
        dim = r.randrange(len(shape))
        size = shape[dim]
        index = r.choice([-1, -1, 0, r.randrange(size), r.randrange(size) - size])
        form = r.random()
        if form < 0.5:
            if dim == len(shape) - 1 and r.random() < 0.5:
                template = f"{{0}}[..., {index}]"
            else:
                template = "{0}[" + ", ".join([":"] * dim + [str(index)]) + "]"
        elif form < 0.8:
            template = f"{{0}}.select({dim if r.random() < 0.7 else dim - len(shape)}, {index})"
        else:
            template = f"torch.select({{0}}, {dim}, {index})"
        return dict(kind="select", template=template, args=[x], exact=True)

    def op_split(self, x):
        r = self.rng
        shape = self.shape(x)
        dims = [i for i, d in enumerate(shape) if d >= 2]
        if not dims:
            return None
        dim = r.choice(dims)
        size = shape[dim]
        form = r.random()
        if form < 0.4:
            chunk = r.randint(1, size - 1)
            n = -(-size // chunk)
            if n > 4:
                return None
            template = f"torch.split({{0}}, {chunk}, dim={dim})"
        elif form < 0.7 and size >= 2:
            n = r.randint(2, min(3, size))
            cuts = sorted(r.sample(range(1, size), n - 1))
            sizes = [b - a for a, b in zip([0] + cuts, cuts + [size])]
            template = f"torch.split({{0}}, {list(sizes)}, dim={dim})"
        else:
            n = r.randint(2, min(4, size))
            template = f"{{0}}.chunk({n}, dim={dim})"
            n = len(range(0, size, -(-size // n)))
        return dict(kind="split", template=template, args=[x], n_outs=n, exact=True)

    def op_pad(self, x):
        r = self.rng
        shape = self.shape(x)
        if not shape:
            return None
        k = r.randint(1, min(3, len(shape)))
        pads = [r.choice([0, 0, 1, 1, 2]) for _ in range(2 * k)]
        if not any(pads):
            pads[0] = 1
        if 3 <= len(shape) <= 4 and r.random() < 0.2:  # reflect needs pads < the dim (checked by running it)
            mode = r.choice(["reflect", "replicate"])
            pads = (pads + [1, 1, 1, 1])[: 2 * (len(shape) - 2)]
            return dict(kind="pad", template=f"F.pad({{0}}, {_fmt(tuple(pads))}, mode='{mode}')", args=[x], exact=True)
        value = r.choice([None, 0.5, -1.0])
        return dict(
            kind="pad", template=f"F.pad({{0}}, {_fmt(tuple(pads))}{_kwargs(value=value)})", args=[x], exact=True
        )

    def op_pool(self, x):
        r = self.rng
        shape = self.shape(x)
        if len(shape) != 4 and not (len(shape) == 3 and r.random() < 0.15):
            return None
        h, w = shape[-2:]
        name = r.choice(["max", "max", "avg", "adaptive"])
        if name == "adaptive":
            size = r.choice([(1, 1), (2, 2), (max(1, h // 2), max(1, w // 2)), (h, 1), 1])
            return dict(kind="adaptive_avg_pool2d", template=f"F.adaptive_avg_pool2d({{0}}, {_fmt(size)})", args=[x])
        kernel = r.choice([2, 2, 3, (2, 3)])
        ks = kernel if isinstance(kernel, tuple) else (kernel, kernel)
        stride = r.choice([None, None, 1, 2])
        padding = r.choice([0, 0, 0, 1]) if min(ks) >= 2 else 0
        ceil = r.random() < 0.15
        options = dict(stride=stride, padding=padding or None, ceil_mode=True if ceil else None)
        if name == "max":
            return dict(
                kind="max_pool2d",
                template=f"F.max_pool2d({{0}}, {_fmt(kernel)}{_kwargs(**options)})",
                args=[x],
                exact=True,
            )
        if r.random() < 0.3:
            options["count_include_pad"] = False
        return dict(kind="avg_pool2d", template=f"F.avg_pool2d({{0}}, {_fmt(kernel)}{_kwargs(**options)})", args=[x])

    def op_interpolate(self, x):
        r = self.rng
        shape = self.shape(x)
        if len(shape) not in (3, 4):
            return None
        mode = "nearest" if len(shape) == 3 else r.choice(["nearest", "bilinear", "bilinear"])
        if r.random() < 0.5:
            size_text = f"scale_factor={r.choice([2, 2, 2.0, 3])}"
        else:
            spatial = shape[2:]
            size = tuple(r.choice([max(1, d // 2), d + 1, 2 * d, d + 3]) for d in spatial)
            size_text = f"size={_fmt(size if len(size) > 1 else size[0])}"
        align = ""
        if mode == "bilinear" and r.random() < 0.4:
            align = ", align_corners=True"
        return dict(
            kind=f"interpolate_{mode}",
            template=f"F.interpolate({{0}}, {size_text}, mode='{mode}'{align})",
            args=[x],
            exact=mode == "nearest",
        )

    def op_where(self, x):
        r = self.rng
        shape = self.shape(x)
        mask = tuple(shape) if r.random() < 0.5 else self._broadcast_shape(shape)
        init = [f"self.register_buffer('mask@ID', torch.rand({_fmt(mask)}) > 0.5)"]
        if r.random() < 0.5:
            other = r.choice([0.0, -1.0, 0.5])
            return dict(
                kind="where", template=f"torch.where(self.mask@ID, {{0}}, {other})", args=[x], init=init, exact=True
            )
        same = [y for y in self.floats() if self.dtype(y) == self.dtype(x) and self.shape(y) == shape and y != x]
        if not same:
            return None
        return dict(
            kind="where",
            template="torch.where(self.mask@ID, {0}, {1})",
            args=[x, r.choice(same)],
            init=init,
            exact=True,
        )

    def op_embedding(self, name):
        spec = next(i for i in self.inputs if i.name == name)
        dim = self.rng.choice([4, 8, 16, 32])
        if _prod(spec.shape) * dim > MAX_NUMEL:
            dim = 4
        return dict(
            kind="embedding",
            template="self.emb@ID({0})",
            args=[name],
            init=[f"self.emb@ID = nn.Embedding({spec.high}, {dim})"],
            exact=True,
        )

    def op_cast(self, x):
        r = self.rng
        dtype = self.dtype(x)
        if self.kind == "bf16":
            target = "float32" if dtype == "bfloat16" else "bfloat16"
        elif dtype == "float32":
            target = r.choice(["float16", "bfloat16"])
        else:
            target = "float32" if r.random() < 0.7 else ("bfloat16" if dtype == "float16" else "float16")
        upcast = target == "float32"
        form = (
            r.choice(["{{0}}.to(torch.{t})", "{{0}}.to(dtype=torch.{t})"])
            if not upcast or r.random() < 0.7
            else "{{0}}.float()"
        )
        return dict(kind=f"to_{target}", template=form.format(t=target), args=[x], exact=upcast)
