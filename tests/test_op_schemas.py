"""The op definitions against torch's own schemas (issue 29): the generated table
(xir/op_schemas.py) is what scripts/gen_op_schemas.py writes from torch, and every definition
with a torch counterpart knows each of its non-tensor arguments as an attribute, so that an
imported program never carries an attribute its op's (closed) schema refuses."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import executorch.exir.passes.dim_order_ops_registry  # noqa: F401  (registers dim_order_ops)
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)

from xir.fx_import import _tensor_kind
from xir.ops import all_ops

ROOT = Path(__file__).resolve().parents[1]

# attributes a definition has beyond one overload's torch schema: one definition covers overloads
# whose schemas differ (arange's start and step; squeeze's dim in the .dim/.dims overloads)
OVERLOAD_UNIONS = {"aten.arange": {"start", "step"}, "aten.arange.start": {"step"}, "aten.squeeze_copy": {"dim"}}


def torch_op(full: str):
    namespace, name, *overload = full.split(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload[0] if overload else "default")
    except (AttributeError, RuntimeError):
        return None


def test_the_generated_table_is_what_torch_says():
    spec = importlib.util.spec_from_file_location("gen_op_schemas", ROOT / "scripts" / "gen_op_schemas.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.table() == (ROOT / "xir" / "op_schemas.py").read_text(), (
        "xir/op_schemas.py is stale: run python scripts/gen_op_schemas.py"
    )


TORCH_OPS = [full for full in sorted(all_ops()) if not full.startswith("xir.")]


@pytest.mark.parametrize("full", TORCH_OPS)
def test_a_definition_knows_every_argument_of_its_torch_op(full):
    op = torch_op(full)
    assert op is not None, f"{full} is defined in xir.ops but torch has no such op"
    definition = all_ops()[full]
    arguments = op._schema.arguments
    tensors = {a.name for a in arguments if _tensor_kind(a) is not None}  # (split as the importer splits a call)
    others = [a.name for a in arguments if _tensor_kind(a) is None]
    missing = [name for name in others if name not in definition.attributes and name not in definition.operand_names]
    assert not missing, f"{full}: torch's arguments {missing} are no attributes of its definition"
    invented = (
        set(definition.attributes)
        - set(others)
        - tensors
        - set(definition.operand_names)
        - OVERLOAD_UNIONS.get(full, set())
    )
    assert not invented, f"{full}: attributes {sorted(invented)} are no arguments of torch's op"
    assert len(tensors) >= definition.arity()[0]
