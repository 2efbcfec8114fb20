"""Command line: `python -m benchmarks.corpus build|list|check`.

    build [--only NAME ...] [--cache DIR]   convert what is missing or stale, then check all
    list  [--cache DIR]                     every entry with its state in the cache
    check [--cache DIR]                     check and time what is cached (no building);
                                            warns about degenerate outputs (_verify.py)

With `--held-out`, each acts on the held-out set (`_held_out.py`) instead of the corpus,
in its own cache folder (`held-out` under the corpus cache unless `--cache` says).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks.corpus import _build, _cache, _verify
from benchmarks.corpus._held_out import HELD_OUT, HELD_OUT_BY_NAME
from benchmarks.corpus._registry import BY_NAME, ENTRIES, Entry

HELD_OUT_FOLDER = "held-out"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("build", "list", "check"):
        command = commands.add_parser(name)
        command.add_argument("--cache", type=Path, default=None,
                             help=f"cache folder (default: ${_cache.ENV_VAR} or the user cache)")
        command.add_argument("--held-out", action="store_true",
                             help=f"the held-out set, not the corpus (default cache: {HELD_OUT_FOLDER}/ in the corpus's)")
        if name == "build":
            command.add_argument("--only", nargs="+", default=[], choices=sorted({*BY_NAME, *HELD_OUT_BY_NAME}),
                                 metavar="NAME", help="build only these entries")
    return parser


def _list(cache: Path, entries: tuple[Entry, ...]) -> int:
    print(f"cache: {cache}")
    for entry in entries:
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


def _build_command(cache: Path, names: list[str], held_out: bool) -> int:
    unknown = sorted(set(names) - set(_build.known_entries(held_out=held_out)))
    if unknown:
        print(f"not {'held out' if held_out else 'in the corpus'}: {', '.join(unknown)}", file=sys.stderr)
        return 2
    print(f"cache: {cache}")
    start = time.perf_counter()
    results = _build.build(names, cache, held_out=held_out)
    for result in results:
        print(f"{result.name:24} {result.outcome.value:8} {result.detail}", flush=True)
    print(f"build took {time.perf_counter() - start:.0f}s\n")
    failed = any(result.outcome is _build.Outcome.FAILED for result in results)
    return max(int(failed), _check(cache))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cache = args.cache or _cache.default_cache_dir() / (HELD_OUT_FOLDER if args.held_out else "")
    if args.command == "list":
        return _list(cache, HELD_OUT if args.held_out else ENTRIES)
    if args.command == "check":
        return _check(cache)
    return _build_command(cache, args.only, args.held_out)


if __name__ == "__main__":
    sys.exit(main())
