"""The ``xir`` command."""

from __future__ import annotations

import argparse
import sys


def _demo(args) -> int:
    import xir
    from lowering.examples import EXAMPLES, edge_program

    for name, example in EXAMPLES.items():
        graph = xir.from_exported_program(edge_program(example))
        xir.verify(graph)
        print(f"# {name}: {example.description}")
        print(graph)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="xir", description="Lower PyTorch programs to ExecuTorch's XNNPACK backend, correctly.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="import the built-in example models and print their IR")
    demo.set_defaults(run=_demo)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
