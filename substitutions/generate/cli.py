"""``taso-gen``: command-line entry point for the rule generator's tools.

A small dispatcher over argparse subcommands.  Each subcommand is one function
``(args) -> exit code`` registered in ``COMMANDS``: ``ops``, ``check-axioms``,
``generate``, ``verify`` and ``merge``. Z3 resource limits: ``generate`` defaults to
`GENERATE_RLIMIT` (250k: the 3-op run over TASO's operators finishes in minutes; pairs
that need more are counted as timed out), ``merge`` to `DEFAULT_RLIMIT` (2M, what the
shipped library is proved under) and ``verify`` to twice that.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from taso.errors import InputError, TasoError
from taso.substitutions.rule import RuleLibrary, dump_rules

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as shells report a reader that left (`| head -1`)


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line on stderr and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"taso-gen: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def cmd_ops(args: argparse.Namespace) -> int:
    """List operator specs: name, ONNX op types, kind, number of axioms mentioning it."""
    from taso.opspecs import all_specs
    from taso.opspecs.axioms import axioms_for

    rows = [(s.name, ",".join(s.onnx_ops) or "-", s.kind.value, len(axioms_for(s.name)))
            for s in all_specs()]
    if args.json:
        keys = ("name", "onnx_ops", "kind", "axioms")
        print(json.dumps([dict(zip(keys, r, strict=True)) for r in rows], indent=2))
        return EXIT_OK
    print(f"{'spec':<22}{'onnx ops':<22}{'kind':<10}axioms")
    for name, ops, kind, count in rows:
        print(f"{name:<22}{ops:<22}{kind:<10}{count}")
    print(f"{len(rows)} specs")
    return EXIT_OK


def cmd_check_axioms(args: argparse.Namespace) -> int:
    """Validate every axiom numerically and symbolically; non-zero exit if any fails."""
    from taso.opspecs.axioms import all_axioms
    from taso.opspecs.axioms.validate import validate_axiom

    start = time.perf_counter()
    reports = [validate_axiom(a, seed=args.seed) for a in all_axioms()
               if not args.only or a.name in args.only]
    failed = [r for r in reports if not r.ok]
    elapsed = time.perf_counter() - start
    if args.json:
        print(json.dumps(_reports_json(reports, elapsed), indent=2))
    else:
        _print_reports(reports, elapsed)
    return EXIT_FAILED if failed else EXIT_OK


def _reports_json(reports: Sequence, elapsed: float) -> dict:
    return {
        "axioms": len(reports),
        "failed": sum(not r.ok for r in reports),
        "seconds": round(elapsed, 3),
        "results": [
            {"axiom": r.axiom, "ok": r.ok,
             "checks": [{"config": c.config_index, "method": c.method.value,
                         "status": c.status.value, "detail": c.detail,
                         "seconds": round(c.seconds, 4), "reproducer": c.reproducer}
                        for c in r.checks]}
            for r in reports
        ],
    }


def _print_reports(reports: Sequence, elapsed: float) -> None:
    for report in reports:
        print(f"{'ok  ' if report.ok else 'FAIL'} {report.axiom}")
        for check in report.failures:
            print(f"     config {check.config_index} {check.method.value}: {check.detail}")
            print("     reproduce:\n       " + check.reproducer.replace("\n", "\n       "))
    failed = sum(not r.ok for r in reports)
    print(f"{len(reports)} axioms, {failed} failed, {elapsed:.1f}s")


def cmd_generate(args: argparse.Namespace) -> int:
    """Enumerate, prove and write a rule library; stage counts on stderr."""
    from taso.substitutions.generate._pipeline import Settings, generate_library

    settings = Settings(max_ops=args.max_ops, ops=tuple(args.ops or ()), workers=args.workers,
                        rlimit=args.rlimit, seed=args.seed)
    start = time.perf_counter()
    library, counts = generate_library(settings, with_axioms=not args.no_axioms)
    out = _write_rules(library, args.output)
    for stage, count in counts.items():
        sys.stderr.write(f"{stage:>28}: {count}\n")
    sys.stderr.write(f"{len(library.rules)} rules -> {out} in {time.perf_counter() - start:.1f}s"
                     f" wall; {_usage()}\n")
    return EXIT_OK


def _write_rules(library: RuleLibrary, output: str) -> Path:
    """Write a rule file through a temporary file renamed into place."""
    out = Path(output)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(dump_rules(library))
    tmp.replace(out)
    return out


def _usage() -> str:
    """CPU time and peak resident memory of this process and its (finished) workers."""
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + workers.ru_utime + workers.ru_stime
    return (f"{cpu:.1f}s CPU; peak RSS {me.ru_maxrss // 1024} MB (main), "
            f"{workers.ru_maxrss // 1024} MB (largest worker)")


def cmd_verify(args: argparse.Namespace) -> int:
    """Give every rule of a file a verdict; exit 1 unless every rule is proved."""
    from taso.substitutions.generate._verify import checks_json, summary, verify_rule
    from taso.substitutions.rule import RuleError, load_rules

    try:
        library = load_rules(args.file)
    except (RuleError, OSError) as err:
        sys.stderr.write(f"taso-gen: error: {err}\n")
        return EXIT_USAGE
    spec_set = _spec_set(library)
    if not spec_set["matches"]:
        made_from = f"spec set {spec_set['file']}" if spec_set["file"] else "no recorded spec set"
        sys.stderr.write(f"taso-gen: warning: {args.file} was made from {made_from}, "
                         f"the loaded specs are {spec_set['loaded']}\n")
    checks = [verify_rule(r, rlimit=args.rlimit) for r in library.rules]
    if args.json:
        print(checks_json(checks, spec_set=spec_set))
    else:
        for check in checks:
            if not check.ok:
                print(f"{check.verdict.value} {check.rule}: {check.detail}")
                if check.counterexample:
                    print("  counterexample:\n    " + check.counterexample.replace("\n", "\n    "))
        print(json.dumps(summary(checks)))
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED


def _spec_set(library: RuleLibrary) -> dict:
    """The file's ``spec_set_hash`` (None when it records none) against the loaded specs'."""
    from taso.substitutions.generate._pipeline import spec_set_hash

    recorded = dict(library.provenance).get("spec_set_hash")
    loaded = spec_set_hash()
    return {"file": recorded, "loaded": loaded, "matches": recorded == loaded}


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge generated rule files (re-proved) with the hand rules into one library."""
    from taso.substitutions.generate._merge import merge

    library, counts = merge([Path(f) for f in args.files], args.rlimit)
    _write_rules(library, args.output)
    for stage, count in counts.items():
        sys.stderr.write(f"{stage:>40}: {count}\n")
    return EXIT_OK


COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], str]] = {
    "merge": (cmd_merge, "merge generated rule files with the hand rules"),
    "ops": (cmd_ops, "list operator specs"),
    "check-axioms": (cmd_check_axioms, "validate every operator axiom"),
    "generate": (cmd_generate, "generate and prove a rule library"),
    "verify": (cmd_verify, "re-prove a rule file"),
}


def _add_generate(sub: argparse._SubParsersAction) -> None:
    from taso.substitutions.generate._prove import DEFAULT_RLIMIT, GENERATE_RLIMIT

    gen = sub.add_parser("generate", help=COMMANDS["generate"][1])
    gen.add_argument("--max-ops", type=int, default=3, help="operators per graph (default 3)")
    gen.add_argument("--ops", nargs="+", metavar="OP", help="restrict to these spec names")
    gen.add_argument("--workers", type=int, default=1, help="worker processes")
    gen.add_argument("--rlimit", type=int, default=GENERATE_RLIMIT,
                     help="Z3 resource limit per proof (deterministic, unlike a timeout; "
                          f"default {GENERATE_RLIMIT})")
    gen.add_argument("--seed", type=int, default=0, help="fingerprint seed")
    gen.add_argument("--no-axioms", action="store_true", help="omit the axiom-derived rules")
    gen.add_argument("-o", "--output", required=True, help="rule file to write")
    mrg = sub.add_parser("merge", help=COMMANDS["merge"][1])
    mrg.add_argument("files", nargs="+", help="generated rule files (JSON)")
    mrg.add_argument("--rlimit", type=int, default=DEFAULT_RLIMIT,
                     help=f"Z3 resource limit per re-proof (default {DEFAULT_RLIMIT})")
    mrg.add_argument("-o", "--output", required=True, help="rule file to write")
    ver = sub.add_parser("verify", help=COMMANDS["verify"][1])
    shipped = shipped_library()
    ver.add_argument("file", nargs="?", default=str(shipped), help=f"rule file (JSON; default: the shipped library, {shipped})")
    ver.add_argument("--json", action="store_true", help="per-rule status and totals as JSON")
    ver.add_argument("--rlimit", type=int, default=2 * DEFAULT_RLIMIT,
                     help=f"Z3 resource limit per proof (default {2 * DEFAULT_RLIMIT})")


def shipped_library() -> Path:
    """The rule library installed with the package (what `taso optimize` searches with)."""
    return Path(str(resources.files("taso.substitutions").joinpath("library", "rules.json")))


def _version() -> str:
    try:
        return version("taso-onnx")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="taso-gen", description="TASO rule generation tools")
    parser.add_argument("--version", action="version", version=f"taso-gen (taso-onnx) {_version()}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    ops = sub.add_parser("ops", help=COMMANDS["ops"][1])
    ops.add_argument("--json", action="store_true", help="machine-readable output")
    check = sub.add_parser("check-axioms", help=COMMANDS["check-axioms"][1])
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.add_argument("--seed", type=int, default=0, help="seed of the random tensors")
    check.add_argument("--only", nargs="+", metavar="AXIOM", help="check only these axioms")
    _add_generate(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``taso-gen`` console script."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    if args.command is None:  # bare `taso-gen`: the help, not "required: command"
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    handler, _ = COMMANDS[args.command]
    try:
        code = handler(args)
        sys.stdout.flush()  # a reader that left is noticed here, not in the flush at exit
        return code
    except BrokenPipeError:  # `taso-gen ops | head -1`: the reader left; so do we, quietly
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except InputError as exc:  # UsageError included: one line, no traceback
        sys.stderr.write(f"taso-gen: {exc}\n")
        return EXIT_USAGE
    except TasoError as exc:
        sys.stderr.write(f"taso-gen: {exc}\n")
        return EXIT_FAILED


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the flush at exit does not fail on the closed pipe."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's stdout): nothing to flush there
        pass


if __name__ == "__main__":
    raise SystemExit(main())
