"""Walk a torchvision CNN in int8, op by op, with xir and stock (``xir_tools.walk``).

torchvision 0.28 does not load beside torch 2.13 ("operator torchvision::nms does not exist": its
compiled ops are built for another torch), and must not be installed into the project's venv.
Its models are plain Python, though: unpack the wheel into a folder of its own and point this
script at it; the script stubs what the models do not need (the registrations of the compiled
ops, the datasets, PIL) before importing it.

    .venv/bin/pip download --no-deps torchvision==0.28.0 -d /tmp/tvdl
    python3 -m zipfile -e /tmp/tvdl/torchvision-0.28.0-*.whl /tmp/tv
    .venv/bin/python scripts/walk_torchvision.py --torchvision /tmp/tv [--model mobilenet_v2]
        [--weights STATE_DICT.pth] [--size 224] [--mode all|prefix]

Without ``--weights`` the model has torchvision's random initialization (an untrained
``mobilenet_v2``'s activations vanish with depth: its int8 logits are 0). Quantized as ExecuTorch's
``examples/xnnpack/aot_compiler.py`` does (per-channel symmetric, one calibration call on a random
input); the table compares each activation quantize of the converted model with xir's and stock's
programs.
"""

from __future__ import annotations

import argparse
import sys
import types
import warnings


def import_torchvision(folder: str):
    """torchvision from ``folder`` (an unpacked wheel), without its compiled ops or PIL."""
    sys.path.insert(0, folder)
    for name in ("torchvision._meta_registrations", "torchvision.datasets"):
        sys.modules.setdefault(name, types.ModuleType(name))

    class _Anything(type):  # PIL's classes and constants, as far as an import touches them
        def __getattr__(cls, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Anything(name, (), {})

    class _Module(types.ModuleType):
        __version__ = "10.0.0"

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Anything(name, (), {})

    try:
        import PIL  # noqa: F401
    except ImportError:
        for name in ("PIL", "PIL.Image", "PIL.ImageColor", "PIL.ImageDraw", "PIL.ImageFont"):
            sys.modules[name] = _Module(name)
    import torchvision

    return torchvision


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torchvision", required=True, metavar="DIR", help="the unpacked torchvision wheel")
    parser.add_argument("--model", default="mobilenet_v2", help="a torchvision.models builder (default mobilenet_v2)")
    parser.add_argument("--weights", metavar="FILE", help="a state dict to load (torch.load, weights_only)")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--mode", choices=["all", "prefix"], default="all")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")

    import torch

    torchvision = import_torchvision(args.torchvision)
    from lowering.fx.quantizer import quantize_pt2e
    from xir_tools.walk import walk

    torch.manual_seed(args.seed)
    model = getattr(torchvision.models, args.model)().eval()
    if args.weights:
        model.load_state_dict(torch.load(args.weights, weights_only=True))
    inputs = (torch.randn(1, 3, args.size, args.size),)
    converted = quantize_pt2e(model, inputs, is_per_channel=True)
    print(walk(converted, inputs, mode=args.mode).table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
