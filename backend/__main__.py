"""``python -m cuda2neuron.backend build``: prebuild the emulated neuron device."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] != ["build"] or len(args) > 2 or (len(args) == 2 and args[1] != "--verbose"):
        print("usage: python -m cuda2neuron.backend build [--verbose]", file=sys.stderr)
        return 2
    from ._build import BackendBuildError, build

    try:
        build(verbose="--verbose" in args)
    except BackendBuildError as exc:
        print(f"cuda2neuron: {exc}", file=sys.stderr)
        return 1
    from ._build import cached_library

    print(cached_library())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
