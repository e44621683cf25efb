"""Attribute values that are neither numbers, strings, lists nor values."""

import attrs


@attrs.frozen
class EnumAttr:
    """A named constant of some kind, printed ``kind.name``: e.g. ``memory_format.contiguous_format``,
    ``layout.strided``, ``device.cpu``. The importer makes them from torch objects and the emitter
    turns them back."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}.{self.name}"
