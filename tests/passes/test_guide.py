"""The guide's code runs as written, so the guide cannot rot."""

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "writing-a-pass.md"


def test_guide_code_blocks_run_in_order():
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
    assert len(blocks) >= 4
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(GUIDE), "exec"), namespace)
    assert "square-to-mul" in namespace["SquareToMul"].name


def test_guide_pass_is_under_30_lines():
    first = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)[0]
    assert len(first.strip().splitlines()) < 30
