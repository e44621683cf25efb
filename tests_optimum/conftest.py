"""The optimum-executorch integration's tests. They need the extra ``xir[optimum]`` (which pins
transformers==5.0.0rc1), so they run in the second environment ``make test`` makes, .venv-optimum,
not in the main suite (pyproject's testpaths is tests/ only). Tiny models with random weights,
built locally (bench.optimum_models); no hub access."""

import os
import warnings

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
warnings.filterwarnings("ignore")


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory):
    """name -> folder of a tiny model of bench.optimum_models, built on first use."""
    from bench import optimum_models

    root = tmp_path_factory.mktemp("models")
    built = {}

    def get(name):
        if name not in built:
            built[name] = optimum_models.save(name, root / name)
        return built[name]

    return get
