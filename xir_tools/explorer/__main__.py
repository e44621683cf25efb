"""``python -m xir_tools.explorer MODEL.pt2|IR.xir [--node-data FILE] [--port N]``: start Model
Explorer on the model with xir's adapter chosen (``model-explorer MODEL --extensions=xir_tools.explorer``
opens it too, with the adapter picked in the model list's Adapter column)."""

from __future__ import annotations

import argparse
import os
import sys

ADAPTER_ID = "xir_xnnpack_partition"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xir_tools.explorer", description=__doc__)
    parser.add_argument("models", nargs="+", metavar="MODEL", help=".pt2 programs or .xir IR text files")
    parser.add_argument(
        "--node-data",
        action="append",
        default=[],
        metavar="FILE",
        help="node data to load with the model (xir explain --explorer writes the delegate colours)",
    )
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--no-open", action="store_true", help="do not open a browser")
    args = parser.parse_args(argv)
    try:
        import model_explorer
    except ImportError:
        print("Model Explorer is not installed: pip install 'xir[explorer]'", file=sys.stderr)
        return 2
    config = model_explorer.config()
    for model in args.models:
        config.add_model_from_path(os.path.abspath(model), adapterId=ADAPTER_ID)
    for path in args.node_data:
        config.add_node_data_from_path(os.path.abspath(path))
    model_explorer.visualize_from_config(
        config, host=args.host, port=args.port, extensions=["xir_tools.explorer"], no_open_in_browser=args.no_open
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
