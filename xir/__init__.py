"""xir: a small typed IR for PyTorch programs on their way to ExecuTorch's XNNPACK backend.

Every value has an explicit rank and dtype. Graphs print as ASCII text, one node per line, and
parse back. The verifier checks the invariants; :func:`from_exported_program` imports an
ExportedProgram (torch is imported only then).
"""

from .attributes import EnumAttr
from .core import Graph, InputKind, Node, Value
from .dtypes import DType
from .errors import IRError, ParseError, VerificationError
from .parser import parse_graph
from .printer import print_graph, print_node
from .types import ScalarType, Symbol, TensorType
from .verifier import verify


def from_exported_program(ep, name: str = "forward") -> Graph:
    """Import a torch.export ExportedProgram (edge dialect or aten) into a Graph."""
    from .fx_import import from_exported_program as _import

    return _import(ep, name)


__all__ = [
    "DType",
    "EnumAttr",
    "Graph",
    "IRError",
    "InputKind",
    "Node",
    "ParseError",
    "ScalarType",
    "Symbol",
    "TensorType",
    "Value",
    "VerificationError",
    "from_exported_program",
    "parse_graph",
    "print_graph",
    "print_node",
    "verify",
]
