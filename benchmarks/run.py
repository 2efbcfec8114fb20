"""The benchmark harness: the original vs onnxsim, onnxslim, onnxoptimizer and taso, side by side.

Run from the repository root:

    python -m benchmarks.run [--models NAME ...] [--tools NAME ...] [--threads 2]
        [--size full|small] [--repeats N | --seconds-per-pair S] [--time-budget S]
        [--out results.json] [--markdown results.md]
    python -m benchmarks.run --corpus [DIR] [--models NAME ...] [same options]

For each model (built on demand into the cache) it measures, interleaved and in one run,
the original against itself (the noise row) and against each tool's output, all under
ORT_ENABLE_ALL; each tool runs in its own fresh subprocess. A tool that is missing or
fails is a row in the table, never fatal. Prints a markdown table; writes JSON.

`--corpus` measures the real-converter corpus instead of the model builders: every entry
cached in DIR (default: the corpus cache, `benchmarks.corpus.default_cache_dir`), or those
named by `--models`. Each model runs at its manifest's input shapes (taso gets them as
`--shape`, the timing feeds them) and is first profiled on ORT (`_corpus_run`); the
output is one table per model and a per-group geomean summary.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchmarks._corpus_run import ModelFile, OpProfile, corpus_models, profile_ops
from benchmarks._measure import ModelJob, Row, TimingPlan, measure_model
from benchmarks._report import Results, machine_info, to_json, to_markdown
from benchmarks._tools import DEFAULT_TIMEOUT_S, TOOLS, Tool, ToolOptions
from benchmarks.corpus import default_cache_dir
from benchmarks.models import MODELS, Size, build_cached


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--corpus", nargs="?", type=Path, const=default_cache_dir(),
                        default=None, metavar="DIR",
                        help="measure the cached real-converter corpus (default DIR: its cache)")
    parser.add_argument("--models", nargs="+", default=[], metavar="NAME",
                        help="default: every builder model, or every cached corpus entry")
    parser.add_argument("--tools", nargs="+", default=list(TOOLS), metavar="NAME")
    parser.add_argument("--size", choices=[s.value for s in Size], default=Size.FULL.value)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=None, help="fixed iterations per pair")
    parser.add_argument("--seconds-per-pair", type=float, default=10.0, help="adaptive target")
    parser.add_argument("--min-repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--time-budget", type=float, default=None,
                        help="taso's time budget, s (default: taso's own default)")
    parser.add_argument("--tool-timeout", type=float, default=DEFAULT_TIMEOUT_S)
    parser.add_argument("--out", type=Path, default=None, help="JSON results file")
    parser.add_argument("--markdown", type=Path, default=None, help="markdown results file")
    args = parser.parse_args(argv)
    if args.corpus is not None:
        try:
            corpus_models(args.corpus, args.models)
        except ValueError as error:
            parser.error(str(error))
        return args
    unknown = [name for name in args.models if name not in MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {sorted(MODELS)}")
    return args


def resolve_tools(names: Sequence[str]) -> tuple[Tool, ...]:
    """Known tools by name; an unknown name becomes a tool that is reported as not installed."""
    return tuple(TOOLS.get(name, Tool(name, package="", target="")) for name in names)


def run(args: argparse.Namespace, *, command: str) -> Results:
    plan = TimingPlan(
        seconds_per_pair=args.seconds_per_pair,
        min_repeats=args.min_repeats,
        fixed_repeats=args.repeats,
        warmup=args.warmup,
        threads=args.threads,
    )
    tools = resolve_tools(args.tools)
    start = time.perf_counter()
    rows: list[Row] = []
    profiles: list[OpProfile] = []
    with tempfile.TemporaryDirectory(prefix="taso-bench-", ignore_cleanup_errors=True) as temp:
        folder = Path(temp)
        for model in _models(args):
            if args.corpus is not None:
                profiles.append(_profile(model, plan, folder))
            options = ToolOptions(time_budget_s=args.time_budget, shapes=model.shapes)
            job = ModelJob(model.name, model.path, folder, tools, plan, options, args.tool_timeout)
            rows += measure_model(job, _say)
    duration = time.perf_counter() - start
    return Results(tuple(rows), machine_info(), _config(args, command), duration, tuple(profiles))


def _models(args: argparse.Namespace) -> Iterator[ModelFile]:
    """The models to measure: cached corpus entries, or builder models built on demand."""
    if args.corpus is not None:
        yield from corpus_models(args.corpus, args.models)
        return
    for name in args.models or list(MODELS):
        _say(f"{name}: building or loading from the cache")
        yield ModelFile(name, build_cached(name, Size(args.size)), shapes="")


def _profile(model: ModelFile, plan: TimingPlan, folder: Path) -> OpProfile:
    _say(f"{model.name}: profiling on ORT at {model.shapes or 'its own shapes'}")
    profile = profile_ops(model, threads=plan.threads, folder=folder)
    share = profile.outside_share
    _say(f"{model.name}: {'-' if share is None else f'{share:.0%}'} outside Conv/MatMul/Gemm")
    return profile


def _config(args: argparse.Namespace, command: str) -> dict[str, object]:
    return {
        "command": command,
        "corpus": None if args.corpus is None else str(args.corpus),
        "models": list(args.models) or "all",
        "tools": list(args.tools),
        "size": args.size,
        "threads": args.threads,
        "repeats": args.repeats if args.repeats is not None else "adaptive",
        "seconds_per_pair": args.seconds_per_pair,
        "min_repeats": args.min_repeats,
        "warmup": args.warmup,
        "taso_time_budget_s": "taso default" if args.time_budget is None else args.time_budget,
        "tool_timeout_s": args.tool_timeout,
    }


def _say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(arguments)
    command = shlex.join(["python", "-m", "benchmarks.run", *arguments])
    results = run(args, command=command)
    markdown = to_markdown(results)
    print(markdown)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(to_json(results), encoding="utf-8")
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
