"""An enum attribute from IR text (``{memory_format=memory_format.X}``) becomes only one of torch's
own values of that kind when it is written back: a name such as ``load`` or ``save`` is an error,
never the torch function of that name handed to an op."""

import pytest
import torch

from xir import EnumAttr
from xir.fx_import import _attribute_to_python


@pytest.mark.parametrize(
    "kind, name, value",
    [
        ("memory_format", "channels_last", torch.channels_last),
        ("layout", "strided", torch.strided),
        ("dtype", "float32", torch.float32),
        ("device", "cpu", torch.device("cpu")),
    ],
)
def test_torchs_own_values_come_back(kind, name, value):
    assert _attribute_to_python(EnumAttr(kind, name), None) == value


@pytest.mark.parametrize(
    "kind, name",
    [
        ("memory_format", "load"),
        ("layout", "save"),
        ("dtype", "compile"),
        ("memory_format", "float32"),
        ("device", "cuda_0_evil"),
    ],
)
def test_other_names_are_refused(kind, name):
    with pytest.raises(ValueError, match="cannot be turned back"):
        _attribute_to_python(EnumAttr(kind, name), None)
