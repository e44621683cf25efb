"""Errors raised by the IR: each names what went wrong and where."""


class IRError(Exception):
    """A misuse of the IR's editing API (for example erasing a value still in use)."""


class ParseError(IRError):
    """Malformed IR text. Carries the line and column of the problem."""

    def __init__(self, message: str, line: int, column: int, source_line: str = ""):
        self.message = message
        self.line = line
        self.column = column
        self.source_line = source_line
        text = f"line {line}, column {column}: {message}"
        if source_line:
            text += f"\n  {source_line}\n  {' ' * (column - 1)}^"
        super().__init__(text)


class VerificationError(IRError):
    """The IR breaks an invariant. Names the node (printed) and the rule, and for a node read from
    IR text the line and column of its text (``line`` and ``column`` are None otherwise)."""

    def __init__(self, message: str, node_text: str | None = None, line: int | None = None, column: int | None = None):
        self.message = message
        self.node_text = node_text
        self.line = line
        self.column = column
        text = message if line is None else f"line {line}, column {column}: {message}"
        if node_text is not None:
            text += f"\n  at: {node_text}"
        super().__init__(text)
