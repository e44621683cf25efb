"""xnnpack.share-dynamic-quantize: linears that read one activation share its dynamic quantization.

ExecuTorch's LLM flow quantizes every linear's activation on its own (torchao's 8da4w/8da8w:
``choose_qparams_affine -> quantize_affine -> dequantize_affine`` per linear; XNNPACKQuantizer's
dynamic mode writes ``choose_qparams.tensor -> quantize_per_tensor.tensor ->
dequantize_per_tensor.tensor`` per linear), so the q, k and v
projections of a layer quantize the normed hidden state three times, and gate and up twice; each
chain is one XNNPACK conversion (f32 to per-token int8) at run time. The chains compute the same
thing: same input, same attributes. This pass keeps the first and points the others' readers at
it, as an XNNPACK program written by hand would: one conversion, several GEMMs reading it.

Only whole chains merge (choose_qparams, the quantize reading its scale and zero point, the
dequantize reading both), each node read by nothing but the next (a quantize or scale also read
elsewhere stays), and the chain kept comes first in program order.
"""

from __future__ import annotations

from typing import Any

from xir import Graph, Node, Value

from passes.common_subexpressions import _key
from passes.pass_base import function_pass

from ..capability.quantized import DYNAMIC_PATTERNS

# choose_qparams -> (its quantize, its dequantize): torchao's affine ops, quantized_decomposed's
# per-tensor ones with tensor qparams (XNNPACKQuantizer's dynamic mode)
CHAINS = {choose: (quantize, dequantize) for dequantize, (quantize, choose) in DYNAMIC_PATTERNS.items()}


def _only_reader(value: Value) -> Node | None:
    users = value.users
    return users[0] if len(users) == 1 and not value.is_graph_output() else None


def _chain(choose: Node) -> tuple[Node, Node] | None:
    """(quantize, dequantize) of the dynamic chain that starts at ``choose``, or None."""
    if len(choose.results) != 2 or any(r.is_graph_output() for r in choose.results):
        return None
    scale, zero_point = choose.results
    quantize_op, dequantize_op = CHAINS[choose.op]
    readers = {id(u): u for r in (scale, zero_point) for u in r.users}
    quantizes = [u for u in readers.values() if u.op == quantize_op]
    dequantizes = [u for u in readers.values() if u.op == dequantize_op]
    if len(readers) != 2 or len(quantizes) != 1 or len(dequantizes) != 1:
        return None
    q, dq = quantizes[0], dequantizes[0]
    if len(q.operands) < 3 or q.operands[0] is not choose.operands[0] or q.operands[1] is not scale \
            or q.operands[2] is not zero_point:
        return None
    if len(dq.operands) < 3 or dq.operands[0] is not q.result or dq.operands[1] is not scale \
            or dq.operands[2] is not zero_point or _only_reader(q.result) is not dq:
        return None
    if any(r.is_graph_output() for r in q.results + dq.results):
        return None
    return q, dq


def _signature(choose: Node, q: Node, dq: Node) -> Any:
    return (id(choose.operands[0]), tuple(id(v) for v in choose.operands[1:]),
            _key(dict(choose.attributes)), _key(dict(q.attributes)), _key(dict(dq.attributes)),
            tuple(str(r.type) for r in choose.results + q.results + dq.results))


@function_pass("xnnpack.share-dynamic-quantize")
def share_dynamic_quantize(graph: Graph) -> bool:
    """Merge the dynamic quantizations (choose_qparams -> quantize -> dequantize) of one activation."""
    first: dict[Any, Node] = {}
    changed = False
    for choose in list(graph.nodes):
        if choose.op not in CHAINS or choose.graph is None:
            continue
        chain = _chain(choose)
        if chain is None:
            continue
        q, dq = chain
        key = _signature(choose, q, dq)
        kept = first.get(key)
        if kept is None:
            first[key] = dq
            continue
        graph.replace_all_uses(dq.result, kept.result)
        for node in (dq, q, choose):
            graph.erase(node)
        changed = True
    return changed
