"""The ``misi-agent`` command line: one sub-command per module, errors as one line.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``func`` to a function taking the parsed arguments and returning an exit code.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from misi_agent.errors import MisiError

COMMAND_MODULES = (
    "misi_agent.render.cli",  # render
    "misi_agent.bench.cli",  # bench score / bench generate
    "misi_agent.agent.cli",  # answer / run
    "misi_agent.hbonds_cli",  # hbonds
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="misi-agent", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except MisiError as exc:
        print(f"misi-agent: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, KeyboardInterrupt) as exc:
        msg = f"{type(exc).__name__}: {exc}".splitlines()[0]
        print(f"misi-agent: error: {msg}", file=sys.stderr)
        return 2 if not isinstance(exc, KeyboardInterrupt) else 130


if __name__ == "__main__":
    sys.exit(main())
