"""The `taso` command line: `taso optimize IN.onnx -o OUT.onnx [...]`, `taso cache info|clear`.

Exit codes: 0 success, 2 bad input or usage (one line on stderr, no traceback),
1 internal error. Progress and the closing summary go to stderr (`taso.pipeline._summary`:
a live status line and rich tables in a terminal, plain lines in a log); stdout gets one
`wrote PATH` line per file written. `-q`: warnings only on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from taso.backends.cost_cache import cache_info, memory_only, remove_cache
from taso.errors import InputError, TasoError
from taso.pipeline._summary import Output, Status, print_summary

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
EXIT_SIGINT, EXIT_SIGTERM = 130, 143  # 128 + signal number, as shells report it
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE


class _Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C so temporary files are removed on the way out."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated()


class _UsageFailure(Exception):
    """argparse found bad usage; carries its one-line message."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageFailure(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="taso", description="Make ONNX models faster with verified graph rewrites.")
    parser.add_argument("--version", action="version", version=f"taso-onnx {_version()}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    commands = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)
    opt = commands.add_parser("optimize", help="optimize a model")
    opt.add_argument("input", type=Path, help="input .onnx model (never modified)")
    opt.add_argument("-o", "--output", type=Path, required=True, help="where to write the result")
    opt.add_argument("--report", type=Path, help="also write the report as JSON here")
    opt.add_argument("--report-html", type=Path, metavar="HTML", help="also write the report as one self-contained "
                     "HTML page here: the summary, and each kept sweep's rule with one site drawn before and after")
    opt.add_argument("--backend", default="ort-cpu", choices=["ort-cpu", "ort-cuda", "analytical"], help=BACKEND_HELP)
    opt.add_argument("--time-budget", type=float, default=None, metavar="S", help="seconds for the whole optimization: load, search, check, measure (0: no search; "
                     "default: scaled to the model's latency and size, 15 to 180 s)")
    opt.add_argument("--alpha", type=float, default=1.05, help="relaxation factor of the search")
    opt.add_argument("--no-check", action="store_true", help="skip the numeric check against the original")
    opt.add_argument("--rules", type=Path, metavar="FILE", help="rule file to search with (default: the shipped library)")
    opt.add_argument(
        "--shape", action="append", default=[], metavar="NAME=DIMS",
        help="fill dynamic dims for checking/measuring: input=1x3x640x640 or symbol=4 (repeatable)",
    )
    opt.add_argument("--target-opset", type=int, default=None, metavar="N", help="upgrade the model to opset N with "
                     "onnx's version converter before optimizing (never by default); checked and measured with the "
                     "rewrites: the original, at its own opset, is returned if the result is not faster")
    opt.add_argument("--no-cache", action="store_true", help="keep costs and measured verdicts in memory for this call "
                     "only: the cost cache is neither read nor written (every measurement is made now)")
    opt.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary on stderr (warnings only)")
    opt.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    cache = commands.add_parser("cache", help="show or remove the cost cache ($TASO_CACHE_DIR)")
    actions = cache.add_subparsers(dest="cache_command", metavar="action", parser_class=_Parser)
    info = actions.add_parser("info", help="where the cost cache is, its size and entry count")
    info.add_argument("--json", action="store_true", help="as JSON")
    actions.add_parser("clear", help="remove the cost cache (the next optimize measures afresh)")
    return parser


BACKEND_HELP = (
    "ort-cpu: candidates priced by the kernels ORT CPU compiles, sweeps measured (the default); "
    "ort-cuda: the check, the pricing, the sweeps and the decision all on the CUDA execution provider "
    "(needs onnxruntime-gpu and a GPU; refused otherwise, never run on the CPU instead); "
    "analytical: no device for the search (analytical costs; the check still runs on ORT CPU)"
)
DEBUG_HELP = "on an internal error, show the traceback instead of one line"


def _version() -> str:
    try:
        return version("taso-onnx")
    except PackageNotFoundError:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    previous = _on_sigterm(_raise_terminated)
    debug = False
    try:
        parser = _parser()
        args = parser.parse_args(argv)
        debug = args.debug
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        code = _cache(args) if args.command == "cache" else _optimize(args)
        sys.stdout.flush()  # a reader that left is noticed here, not in the flush at exit
        return code
    except BrokenPipeError:  # `taso ... | head -1`: the reader left; so do we, quietly
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except (_UsageFailure, InputError) as exc:
        print(f"taso: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TasoError as exc:
        if debug:
            raise
        print(f"taso: internal error: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("taso: interrupted; nothing was written", file=sys.stderr)
        return EXIT_SIGINT
    except _Terminated:
        print("taso: terminated; nothing was written", file=sys.stderr)
        return EXIT_SIGTERM
    except Exception as exc:  # a bug: still one line, but say it is ours (--debug: the traceback)
        if debug:
            raise
        print(f"taso: internal error ({type(exc).__name__}): {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        _on_sigterm(previous)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the flush at exit does not fail on the closed pipe."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's stdout): nothing to flush there
        pass


def _on_sigterm(handler: object) -> object:
    """Install a SIGTERM handler (main thread only); return the previous one."""
    import signal
    import threading

    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)  # type: ignore[arg-type]


def _cache(args: argparse.Namespace) -> int:
    """`taso cache info` (path, size, entries) or `taso cache clear` (remove the files)."""
    if args.cache_command is None:
        raise _UsageFailure("taso cache needs an action: info or clear")
    if args.cache_command == "clear":
        removed = remove_cache()
        print("removed " + ", ".join(map(str, removed)) if removed else f"nothing to remove at {cache_info().path}")
        return EXIT_OK
    info = cache_info()
    if args.json:
        print(json.dumps({"path": str(info.path), "exists": info.exists, "size_bytes": info.size_bytes,
                          "entries": info.entries, "problem": info.problem}, indent=2))
        return EXIT_OK
    print(f"path: {info.path}" + ("" if info.exists else " (not created yet)"))
    print(f"size: {info.size_bytes} bytes")
    print(f"entries: {info.entries}" if info.problem is None else f"entries: unreadable ({info.problem})")
    return EXIT_OK


def _optimize(args: argparse.Namespace) -> int:
    import warnings

    from taso.pipeline.api import optimize_onnx

    output = Output.for_stream(sys.stderr, quiet=args.quiet)
    status = Status(output, budget_s=args.time_budget)
    try:
        with warnings.catch_warnings(), memory_only() if args.no_cache else contextlib.nullcontext():
            warnings.simplefilter("ignore")
            result = optimize_onnx(
                args.input,
                args.output,
                backend=args.backend,
                time_budget_s=args.time_budget,
                alpha=args.alpha,
                check=not args.no_check,
                rules=args.rules,
                shapes=",".join(args.shape) or None,
                progress=status,
                report_path=args.report,
                report_html=args.report_html,
                target_opset=args.target_opset,
            )
    finally:
        status.close()
    if output is Output.QUIET:  # otherwise said as they happened, and again in the summary
        for warning in result.report.warnings:
            status.warn(warning)
    print_summary(result.report, output, sys.stderr)
    for written in (args.output, args.report, args.report_html):
        if written is not None:
            print(f"wrote {written}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
