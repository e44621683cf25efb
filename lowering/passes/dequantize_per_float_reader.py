"""``xnnpack.dequantize-per-float-reader``: give each op that runs in fp32 on a shared dequantized tensor its own dequantize (see"""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import Node
from xir.ops import quantized_decomposed

from ..capability import Options, float_verdict, may_run_between_conversions, static_unit
from ..capability.linears import decomposed_linears
from ..capability.quantized import DYNAMIC_PATTERNS, dynamic_unit


@rewrite_pattern(quantized_decomposed.dequantize_per_tensor)
def dequantize_per_float_reader(node: Node, rewriter: Rewriter) -> bool:
    """A dequantize read by several ops, some of which are no quantized pattern XNNPACK runs (they
    run in fp32 on the dequantized tensor): each of those gets a dequantize of its own (the same
    op on the same operands: the same values). A dequantize shared with a quantized op is folded
    into it, and XNNPACK would hand the other readers the int8 tensor; one shared with a graph
    output after a convolution is moved by XNNPACK's channels-last pass for all its readers. Where
    a graph output, or a reader that stays outside (XNNPACK runs it neither quantized nor in fp32),
    shares a dequantize with quantized readers, those readers share a copy and the others keep the
    original (fuzz static seeds 2679, 42158, 43094: the dequantize, folded into the readers but
    also read outside their delegate, stayed outside with them; stock delegates them and is right)."""

    result = node.results[0]
    if len(result.users) < 2:
        return rewriter.notify_match_failure(node, "read by one op")
    options = Options()
    quantized = [
        r for r in result.readers if static_unit(r, options)[0] is not None
    ]  # (the dequantize may fold into them)
    readers = [
        r
        for r in result.readers
        if r not in quantized
        and may_run_between_conversions(r)
        and float_verdict(r, options, dequantized_ok=True).supported
    ]
    # a graph output, or a reader that runs neither quantized nor in fp32 (it stays outside), keeps the original
    shared_copy = bool(quantized) and (result.is_graph_output() or len(quantized) + len(readers) < len(result.readers))
    if shared_copy:  # the quantized readers share a copy (the float ones get their own below)
        copy = rewriter.insert_after(
            node, rewriter.create(node.op, list(node.operands), attributes=dict(node.attributes))
        ).result
        for reader in quantized:
            for index, operand in enumerate(reader.operands):
                if operand is result:
                    rewriter.set_operand(reader, index, copy)
    elif len(readers) == len(result.users):
        readers = readers[1:]  # the first keeps the original
    if not readers and not shared_copy:
        return rewriter.notify_match_failure(node, "no reader runs in fp32 beside a shared dequantize")
    for reader in readers:
        copy = rewriter.op_before(reader, node.op, list(node.operands), **dict(node.attributes))
        for index, operand in enumerate(reader.operands):
            if operand is result:
                rewriter.set_operand(reader, index, copy)
    return True


@rewrite_pattern(*DYNAMIC_PATTERNS)
def dynamic_quantization_per_float_reader(node: Node, rewriter: Rewriter) -> bool:
    """A dynamic quantization (choose_qparams -> quantize -> dequantize) read by a dynamically
    quantized op and by ops that are not (a conv behind a view, a graph output): those get a chain
    of their own, the same ops on the same input (the same values), run outside XNNPACK. XNNPACK
    folds the chain into the quantized op, so it cannot hand the others the dequantized tensor: xir
    kept the quantized op outside with them, and stock, delegating it, handed the others a wrong
    tensor (fuzz dynamic seed 30924, made observable: a conv's output off by its whole peak)."""
    result = node.results[0]
    if len(result.users) < 2 and not (result.users and result.is_graph_output()):
        return rewriter.notify_match_failure(node, "read by one op")
    options, linears = Options(), decomposed_linears(rewriter.graph).values()
    linear_of = {id(linear.reshapes[0]): linear for linear in linears if linear.reshapes and linear.input is result}

    def is_quantized(reader: Node) -> bool:  # (a decomposed linear is read through its first view)
        linear = linear_of.get(id(reader))
        return dynamic_unit(linear.matmul if linear else reader, options, linear)[0] is not None

    quantized = [r for r in result.readers if is_quantized(r)]
    others = [r for r in result.readers if r not in quantized]
    if not quantized:
        return rewriter.notify_match_failure(node, "no dynamically quantized op reads it")
    if not others and not result.is_graph_output():
        return rewriter.notify_match_failure(node, "only dynamically quantized ops read it")
    quantize = node.operands[0].producer
    choose = quantize.operands[1].producer if quantize is not None and len(quantize.operands) > 1 else None
    if quantize is None or choose is None:
        return rewriter.notify_match_failure(node, "its quantize or choose_qparams is not found")
    copies: dict = {}
    for original in (choose, quantize, node):  # a copy of the chain, before the first quantized reader
        copy = rewriter.create(
            original.op,
            [copies.get(v, v) for v in original.operands],
            result_types=[r.type for r in original.results],
            attributes=dict(original.attributes),
        )
        rewriter.insert_before(quantized[0], copy)
        copies.update(zip(original.results, copy.results))
    for reader in quantized:  # the quantized readers read the copy; the others keep the original
        for index, operand in enumerate(reader.operands):
            if operand is result:
                rewriter.set_operand(reader, index, copies[result])
    return True


@attrs.frozen
class DequantizePerFloatReader(PatternRewritePass):
    """Give each op that runs in fp32 on a shared dequantized tensor its own dequantize (see
    :func:`dequantize_per_float_reader`), so that XNNPACK runs it beside a conversion."""

    name = "xnnpack.dequantize-per-float-reader"

    rules = (dequantize_per_float_reader, dynamic_quantization_per_float_reader)
