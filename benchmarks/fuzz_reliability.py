"""Reliability fuzzing: mutated benchmark models must never crash `optimize_onnx`, never get a
rewrite returned unchecked, and never make it touch a file outside its output folder.

Run from the repository root:

    python -m benchmarks.fuzz_reliability --examples 2000 --seed 0 [--budget 0.5] [--jobs 1]
        [--backend ort-cpu|analytical] [--keep DIR] [--only INDEX] [--timeout S] [--memory-gb G]

Each example (`benchmarks._fuzz_example`) takes a base model (every benchmark model at its
SMALL size, the test fixtures, the example CNN), applies 1-3 mutations
(`benchmarks._fuzz_mutations`), writes it into a fresh folder (inline or with external
data; hostile locations where a mutation says so), and optimizes it by path, as a
ModelProto with or without `base_dir`, or through the CLI in-process. It runs in its own
child process, forked from a clean server: a hang is killed after --timeout (a crash), a
dead child is a crash, and memory is capped at --memory-gb.

Prints a table by mutation, the distinct failures, and the first reproducer of each
failure kind; exits 1 if any example crashed, got a rewrite returned unchecked, or touched
a file outside its output folder. Replay one example with `--only INDEX` (same --seed);
`--keep DIR` writes each failing example's files (and example.json) under DIR.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from benchmarks._fuzz_example import (
    BASES_ENV,
    Finding,
    Kind,
    Result,
    Settings,
    child_main,
    lay_out,
    lost,
    plan,
)

FAILURES: tuple[Result | Kind, ...] = (
    Result.REFUSED_VALID, Result.CRASH, Kind.UNCHECKED, Kind.TOUCHED, Kind.HOSTILE_READ, Kind.STRAY,
    Result.HARNESS_ERROR,
)
GATING: tuple[Result | Kind, ...] = (Result.CRASH, Kind.UNCHECKED, Kind.TOUCHED)
"""The issue's "done means": zero of each over 2,000 examples."""

COLUMNS: tuple[Result | Kind, ...] = (Result.OK, Result.REFUSED_INVALID, *FAILURES)


@dataclass(frozen=True)
class FuzzOptions:
    examples: int = 200
    seed: int = 0
    backend: str = "ort-cpu"
    budget_s: float = 0.5
    jobs: int = 1
    timeout_s: float = 120.0
    memory_gb: float = 8.0
    only: int | None = None


def fuzz(options: FuzzOptions, *, on_finding: Callable[[Finding], None] = lambda _f: None) -> list[Finding]:
    """Run the examples, `options.jobs` children at a time; the findings in index order."""
    with tempfile.TemporaryDirectory(prefix="taso-fuzz-") as run_root:
        settings = Settings(
            backend=options.backend, budget_s=options.budget_s, run_root=run_root,
            cache_dir=str(Path(run_root) / "cache"), memory_bytes=int(options.memory_gb * (1 << 30)),
        )
        indices = [options.only] if options.only is not None else list(range(options.examples))
        findings = _schedule(indices, settings, options, on_finding)
    return sorted(findings, key=lambda f: f.example.index)


@dataclass(frozen=True)
class _Child:
    process: multiprocessing.process.BaseProcess
    index: int
    started: float


def _schedule(
    indices: list[int], settings: Settings, options: FuzzOptions, on_finding: Callable[[Finding], None]
) -> list[Finding]:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["benchmarks._fuzz_example"])
    todo, running, findings = list(reversed(indices)), {}, []
    try:
        while todo or running:
            while todo and len(running) < max(1, options.jobs):
                index = todo.pop()
                receive, send = context.Pipe(duplex=False)
                process = context.Process(target=child_main, args=(options.seed, index, settings, send))
                process.start()
                send.close()
                running[receive] = _Child(process, index, time.monotonic())
            first_deadline = min(child.started for child in running.values()) + options.timeout_s
            for conn in wait(list(running), timeout=min(1.0, max(0.01, first_deadline - time.monotonic()))):
                findings.append(_collect(running.pop(conn), conn, options, settings))  # type: ignore[arg-type]
                conn.close()  # type: ignore[union-attr]
                on_finding(findings[-1])
            for conn, child in list(running.items()):
                if time.monotonic() - child.started > options.timeout_s:
                    child.process.kill()
                    del running[conn]
                    conn.close()
                    findings.append(_finish(child, settings, lost(
                        options.seed, child.index, Result.CRASH, f"no answer within {options.timeout_s:g} s: killed")))
                    on_finding(findings[-1])
    finally:
        for child in running.values():
            child.process.kill()
            child.process.join()
    return findings


def _collect(child: _Child, conn: Connection, options: FuzzOptions, settings: Settings) -> Finding:
    try:
        finding = conn.recv()
    except EOFError:
        child.process.join(10)
        finding = lost(options.seed, child.index, Result.CRASH, f"the child process died (exit code {child.process.exitcode})")
    return _finish(child, settings, finding)


def _finish(child: _Child, settings: Settings, finding: Finding) -> Finding:
    child.process.join(10)
    shutil.rmtree(Path(settings.run_root) / f"ex{child.index}", ignore_errors=True)
    return finding


def kinds_of(finding: Finding) -> list[Result | Kind]:
    """The finding's result and every problem kind it has, once each."""
    return [finding.result, *dict.fromkeys(p.kind for p in finding.problems)]


def count(findings: Iterable[Finding]) -> Counter[Result | Kind]:
    return Counter(kind for f in findings for kind in kinds_of(f))


def table(findings: Sequence[Finding], rows: Callable[[Finding], Iterable[str]], title: str) -> str:
    """A fixed-width table: one row per label `rows` gives (an example may be in several), then the total."""
    grouped: dict[str, list[Finding]] = {}
    for finding in findings:
        for label in rows(finding) or ["(none)"]:
            grouped.setdefault(label, []).append(finding)
    columns = [c for c in COLUMNS if c is not Result.HARNESS_ERROR or count(findings)[c]]
    width = max([len(title), 5, *map(len, grouped)])
    header = f"{title:<{width}} {'examples':>8} " + " ".join(f"{c.value:>{max(len(c.value), 4)}}" for c in columns)
    lines = [header, "-" * len(header)]
    for label, members in [*sorted(grouped.items()), ("TOTAL", list(findings))]:
        counts = count(members)
        cells = " ".join(f"{counts[c]:>{max(len(c.value), 4)}}" for c in columns)
        lines.append(f"{label:<{width}} {len(members):>8} {cells}")
    return "\n".join(lines)


def _messages(finding: Finding, kind: Result | Kind) -> list[str]:
    if isinstance(kind, Result):
        return [finding.detail]
    return [p.message for p in finding.problems if p.kind is kind]


def _signature(message: str) -> str:
    """A message with names, paths and numbers blanked, to group failures of one cause."""
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)
    message = re.sub(r"node name: [^)]*", "node name: …", message)
    message = re.sub(r"/\S+", "/…", message)
    return re.sub(r"\d+", "N", message)[:160]


def distinct_failures(findings: Sequence[Finding]) -> list[tuple[Result | Kind, str, int, Finding]]:
    """(kind, message signature, how many, the first such finding) for every failure cause."""
    groups: dict[tuple[Result | Kind, str], list[Finding]] = {}
    for finding in findings:
        for kind in kinds_of(finding):
            if kind in FAILURES:
                for message in dict.fromkeys(map(_signature, _messages(finding, kind))):
                    groups.setdefault((kind, message), []).append(finding)
    return [(kind, message, len(group), group[0]) for (kind, message), group in groups.items()]


def replay_command(finding: Finding, options: FuzzOptions) -> str:
    return (f"python -m benchmarks.fuzz_reliability --seed {finding.example.seed} --only {finding.example.index} "
            f"--backend {options.backend} --budget {options.budget_s:g}")


def reproducer(finding: Finding, kind: Result | Kind, options: FuzzOptions) -> str:
    example = finding.example
    lines = [f"{kind.value}: {example.describe()}"]
    lines += [f"    mutation: {note}" for note in example.notes]
    lines.append(f"    input: {'valid' if finding.valid else 'invalid (' + finding.invalid_reason + ')'}")
    lines += [f"    -> {message}" for message in _messages(finding, kind)]
    lines.append(f"    replay: {replay_command(finding, options)}")
    return "\n".join(lines)


def summary(findings: Sequence[Finding], options: FuzzOptions) -> str:
    parts = [
        f"{len(findings)} examples, seed {options.seed}, backend {options.backend}, budget {options.budget_s:g} s; "
        f"{sum(f.rewritten for f in findings)} returned a rewritten graph",
        table(findings, lambda f: f.example.mutations, "mutation"),
        table(findings, lambda f: [f.example.call.value], "call"),
        table(findings, lambda f: [f.example.base], "base model"),
        "distinct failures (kind, count, first example, message):",
    ]
    distinct = distinct_failures(findings)
    parts += [f"  {k.value:<15} {n:>4}  #{first.example.index:<5} {m}" for k, m, n, first in distinct] or ["  none"]
    parts.append("first reproducer of each failure kind:")
    firsts = {kind: first for kind, _m, _n, first in reversed(distinct)}
    parts += [reproducer(firsts[k], k, options) for k in FAILURES if k in firsts] or ["  none"]
    return "\n\n".join(parts)


def keep(findings: Iterable[Finding], folder: Path, options: FuzzOptions) -> None:
    """Lay every failing example out again under `folder`, with example.json saying what happened."""
    for finding in findings:
        if not finding.failed:
            continue
        kinds = "-".join(k.value for k in kinds_of(finding) if k in FAILURES)
        dest = folder / f"{finding.example.index:05d}-{kinds}"
        shutil.rmtree(dest, ignore_errors=True)
        example, model = plan(finding.example.seed, finding.example.index)
        layout = lay_out(example, model, dest)
        record = {
            **asdict(finding), "model": str(layout.model_path.relative_to(dest)),
            "replay": replay_command(finding, options),
        }
        (dest / "example.json").write_text(json.dumps(record, indent=2, default=lambda v: getattr(v, "value", str(v))) + "\n")


def gating_failures(findings: Iterable[Finding]) -> int:
    counts = count(findings)
    return sum(counts[k] for k in GATING)


def _progress(started: float, total: int) -> Callable[[Finding], None]:
    done = [0]

    def report(finding: Finding) -> None:
        done[0] += 1
        if finding.failed:
            kinds = ",".join(k.value for k in kinds_of(finding) if k in FAILURES)
            message = finding.detail or next((p.message for p in finding.problems), "")
            print(f"[{kinds}] {finding.example.describe()}: {message}", file=sys.stderr, flush=True)
        if done[0] % 25 == 0 or done[0] == total:
            print(f"... {done[0]}/{total} examples, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)

    return report


def parse_args(argv: Sequence[str] | None = None) -> tuple[FuzzOptions, Path | None]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fuzz_reliability", description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=float, default=0.5, help="time_budget_s of each optimization")
    parser.add_argument("--jobs", type=int, default=1, help="examples run at once")
    parser.add_argument("--backend", choices=["ort-cpu", "analytical"], default="ort-cpu")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before an example is killed")
    parser.add_argument("--memory-gb", type=float, default=8.0, help="address-space limit of each example")
    parser.add_argument("--only", type=int, default=None, metavar="INDEX", help="run this example alone")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR", help="save failing examples here")
    parser.add_argument("--bases", choices=["builders", "corpus", "all"], default=None,
                        help="base models: the project's builders and fixtures (default), the real-converter corpus cache, or both")
    args = parser.parse_args(argv)
    if args.bases is not None:  # the example processes inherit it, and plan alike
        os.environ[BASES_ENV] = args.bases
    options = FuzzOptions(
        examples=args.examples, seed=args.seed, backend=args.backend, budget_s=args.budget, jobs=args.jobs,
        timeout_s=args.timeout, memory_gb=args.memory_gb, only=args.only,
    )
    return options, args.keep


def main(argv: Sequence[str] | None = None) -> int:
    options, keep_dir = parse_args(argv)
    started = time.monotonic()
    total = 1 if options.only is not None else options.examples
    findings = fuzz(options, on_finding=_progress(started, total))
    print(summary(findings, options))
    if keep_dir is not None:
        keep(findings, keep_dir, options)
        print(f"\nfailing examples kept under {keep_dir}")
    return 1 if gating_failures(findings) else 0


if __name__ == "__main__":
    sys.exit(main())
