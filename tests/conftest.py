import warnings

import pytest

import lowering  # noqa: F401  (declares the XNNPACK backend's passes, which IR-text tests name)

warnings.filterwarnings("ignore")


@pytest.fixture(scope="session")
def edge_programs():
    """Edge-dialect programs of the built-in examples, exported once per test session."""
    import torch

    from xir_tools.examples import EXAMPLES, edge_program

    programs = {name: edge_program(example) for name, example in EXAMPLES.items()}
    dynamic = EXAMPLES["mlp"]
    batch = torch.export.Dim("batch", min=2, max=64)
    programs["mlp-dynamic-batch"] = edge_program(dynamic, dynamic_shapes=({0: batch},))
    return programs


# The slowest files first. `pytest -n 2 --dist loadfile` hands whole files to the two workers in
# collection order, so a long file collected last runs alone at the end while the other worker
# idles; started first, the long files overlap and the short ones fill in (their seconds:
# per file from `--junitxml`, the suite alone on 2 cores at issue 29's end: 231, 126, 82,
# 71, 64, 52, 32; the whole suite 653 s).
SLOW_FIRST = (
    "tests/lowering/test_fuzz_regressions.py",
    "tests/test_fuzz.py",
    "tests/lowering/test_quantized_decoder.py",
    "tests/test_cli.py",
    "tests/lowering/test_output_boundaries.py",
    "tests/lowering/test_html_report.py",
    "tests/lowering/test_decoder.py",
    "tests/lowering/test_bf16_dynamic_decoder.py",
    "tests/lowering/test_symbolic_passes.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        path = item.nodeid.split("::", 1)[0]
        return SLOW_FIRST.index(path) if path in SLOW_FIRST else len(SLOW_FIRST)

    items.sort(key=rank)  # (stable: a file's tests keep their order)
