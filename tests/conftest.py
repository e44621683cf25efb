import warnings

import pytest

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
