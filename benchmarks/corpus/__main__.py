"""Command line: `python -m benchmarks.corpus build|list|check`.

    build [--only NAME ...] [--cache DIR]   convert what is missing or stale, then check all
    list  [--cache DIR]                     every entry with its state in the cache
    check [--cache DIR]                     check and time what is cached (no building);
                                            warns about degenerate outputs (_verify.py)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks.corpus import _build, _cache, _verify
from benchmarks.corpus._registry import BY_NAME, ENTRIES


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("build", "list", "check"):
        command = commands.add_parser(name)
        command.add_argument("--cache", type=Path, default=None,
                             help=f"cache folder (default: ${_cache.ENV_VAR} or the user cache)")
        if name == "build":
            command.add_argument("--only", nargs="+", default=[], choices=sorted(BY_NAME),
                                 metavar="NAME", help="build only these entries")
    return parser


def _list(cache: Path) -> int:
    print(f"cache: {cache}")
    for entry in ENTRIES:
        manifest = _cache.read_manifest(cache, entry.name)
        state = "not built"
        if manifest is not None:
            state = f"built, opset {manifest.opset}, IR {manifest.ir_version}"
        shapes = ", ".join(f"{n}={'x'.join(map(str, s))}" for n, s in entry.inputs)
        print(f"{entry.name:24} {entry.family.value:38} {shapes:22} {state}")
        print(f"{'':24} from {entry.source}")
    return 0


def _check(cache: Path) -> int:
    rows = [_verify.check(manifest, path) for manifest, path in _cache.cached_entries(cache)]
    if not rows:
        print(f"no corpus model in {cache}")
        return 0
    print(_verify.format_table(rows))
    return 1 if any(row.problem for row in rows) else 0


def _build_command(cache: Path, names: list[str]) -> int:
    print(f"cache: {cache}")
    start = time.perf_counter()
    results = _build.build(names, cache)
    for result in results:
        print(f"{result.name:24} {result.outcome.value:8} {result.detail}", flush=True)
    print(f"build took {time.perf_counter() - start:.0f}s\n")
    failed = any(result.outcome is _build.Outcome.FAILED for result in results)
    return max(int(failed), _check(cache))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cache = args.cache or _cache.default_cache_dir()
    if args.command == "list":
        return _list(cache)
    if args.command == "check":
        return _check(cache)
    return _build_command(cache, args.only)


if __name__ == "__main__":
    sys.exit(main())
