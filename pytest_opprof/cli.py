"""The `opprof` command: `opprof analyze TRACE [--json] [--top N]`.

Exit codes: 0 fine, 1 a regression found, 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .errors import OpprofError

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT = 0, 1, 2
DEFAULT_TOP = 20


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, not argparse's usage block: scripts read our stderr.
        raise _UsageError(f"{message} (see {self.prog} --help)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="opprof", description="Operator-level profiles of PyTorch traces and baselines.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    analyze = sub.add_parser("analyze", help="tables (or JSON) for a Kineto/Chrome trace (.json, .json.gz)")
    analyze.add_argument("trace", metavar="TRACE", help="a trace written by torch.profiler")
    analyze.add_argument("--json", action="store_true", help="print Profile.to_dict() as JSON instead of tables")
    analyze.add_argument(
        "--top",
        type=_positive_int,
        default=None,
        metavar="N",
        help=f"rows per table (default {DEFAULT_TOP}); with --json, keep the N costliest ops and kernels (default all)",
    )
    return parser


def _analyze(args: argparse.Namespace) -> int:
    from .trace import load_trace

    profile = load_trace(args.trace)
    if args.json:
        data = profile.to_dict()
        if args.top is not None:
            data["ops"] = data["ops"][: args.top]
            data["kernels"] = data["kernels"][: args.top]
        json.dump(data, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print(profile.table(top=args.top or DEFAULT_TOP))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_BAD_INPUT
        return _analyze(args)
    except _UsageError as exc:
        print(f"opprof: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OpprofError as exc:
        print(f"opprof: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `opprof analyze t.json | head`
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
