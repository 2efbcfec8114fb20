"""One example of the reliability fuzzer: plan it, lay it out on disk, optimize it, judge it.

    plan (seed, index) -> base model + 1-3 mutations, storage, call mode   (deterministic)
    lay_out -> <root>/in/m.onnx (+ data files), <root>/outside/, <root>/cwd/, <root>/out/
    snapshot <root> -> call optimize_onnx / the CLI -> snapshot <root> -> classify

The outcome is one `Result` (returned, refused, crashed) plus any `Problem`s: a rewrite
returned without a passed check, a file touched outside `out/`, data read through a
hostile location, stray files left in `out/`. `run_example` runs in a child process
(`benchmarks.fuzz_reliability` starts it) with its cwd, HOME and TMPDIR inside <root>,
so a write anywhere the library has no business writing shows up in the snapshot.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import importlib.util
import io
import json
import os
import random
import resource
import stat
import tempfile
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import onnx
from onnx import numpy_helper as nh

import taso
import taso.pipeline.cli
from benchmarks._fuzz_mutations import MUTATIONS, Applied, Hostile
from benchmarks.corpus import cached_entries, default_cache_dir
from benchmarks.models import MODELS, Size
from taso.errors import first_line
from tests.helpers import models as fixtures

_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example_model() -> onnx.ModelProto:
    spec = importlib.util.spec_from_file_location("make_example_model", _EXAMPLES / "make_example_model.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.build(channels=8, size=16)


BASES: dict[str, Callable[[], onnx.ModelProto]] = {
    **{name: (lambda b=builder: b.build(Size.SMALL)) for name, builder in MODELS.items()},
    "conv_net": fixtures.conv_net,
    "if_loop": fixtures.if_loop_model,
    "custom_domain": fixtures.custom_domain_model,
    "function": fixtures.function_model,
    "example_cnn": _example_model,
}
"""The base models: every benchmark model at its SMALL size, the test fixtures, the example."""

BASES_ENV = "TASO_FUZZ_BASES"
"""`builders` (the above), `corpus` (real converter exports in the corpus cache), or `all`;
an environment variable so that the example processes plan the same examples."""
_CORPUS_MAX_BYTES = 16 << 20  # larger exports make each example too slow to fuzz


def _corpus_bases() -> dict[str, Callable[[], onnx.ModelProto]]:
    """The corpus cache's small models, by `corpus/<name>` (none when the cache is empty)."""
    found: dict[str, Callable[[], onnx.ModelProto]] = {}
    for manifest, path in cached_entries(default_cache_dir()):
        size = sum(f.stat().st_size for f in path.parent.iterdir() if f.is_file())
        if size <= _CORPUS_MAX_BYTES:
            found[f"corpus/{manifest.name}"] = lambda p=path: onnx.load(p)
    return found


def bases() -> dict[str, Callable[[], onnx.ModelProto]]:
    """The base models of this run (see `BASES_ENV`)."""
    kind = os.environ.get(BASES_ENV, "builders")
    if kind == "builders":
        return BASES
    corpus = _corpus_bases()
    if not corpus:
        raise SystemExit(f"{BASES_ENV}={kind}: the corpus cache is empty (python -m benchmarks.corpus build)")
    return corpus if kind == "corpus" else {**BASES, **corpus}


class Storage(enum.Enum):
    INLINE = "inline"
    EXTERNAL = "external"  # every tensor in in/m.data


class Call(enum.Enum):
    PATH = "path"
    PROTO = "proto+base_dir"
    PROTO_NO_BASE_DIR = "proto"
    CLI = "cli"


CALL_WEIGHTS = (7, 5, 3, 5)
"""How often each `Call` is drawn: a ModelProto without base_dir is refused whenever it
has external data, so it is drawn least."""


class Result(enum.Enum):
    OK = "ok"
    REFUSED_INVALID = "refused-invalid"
    REFUSED_VALID = "refused-valid"
    CRASH = "crash"
    HARNESS_ERROR = "harness-error"  # a bug of the fuzzer, not of the library


class Kind(enum.Enum):
    UNCHECKED = "unchecked"  # a changed graph returned while the check did not pass
    TOUCHED = "touched"  # a file outside out/ created, modified or deleted; the input proto changed
    HOSTILE_READ = "hostile-read"  # data read through an absolute, '..' or symlinked location
    STRAY = "stray-out"  # files left in out/ by a failed call, or beyond the output and report


@dataclass(frozen=True)
class Problem:
    kind: Kind
    message: str


@dataclass(frozen=True)
class Settings:
    backend: str
    budget_s: float
    run_root: str  # each example lays out in <run_root>/ex<index>
    cache_dir: str  # TASO_CACHE_DIR
    memory_bytes: int  # address-space limit of the child


@dataclass(frozen=True)
class Example:
    seed: int
    index: int
    base: str
    mutations: tuple[str, ...]
    notes: tuple[str, ...]
    storage: Storage
    call: Call
    with_report: bool
    hostile: Hostile | None

    def describe(self) -> str:
        return f"#{self.index} {self.base} [{', '.join(self.mutations) or 'no mutation'}] {self.storage.value}/{self.call.value}"


@dataclass(frozen=True)
class Finding:
    example: Example
    valid: bool
    invalid_reason: str
    result: Result
    detail: str
    problems: tuple[Problem, ...]
    rewritten: bool = False  # the returned graph differs from the input's

    @property
    def failed(self) -> bool:
        return bool(self.problems) or self.result in (Result.CRASH, Result.REFUSED_VALID, Result.HARNESS_ERROR)


def plan(seed: int, index: int) -> tuple[Example, onnx.ModelProto]:
    """The example `index` of run `seed`: the same on every machine and with any number of jobs."""
    rng = random.Random(f"{seed}:{index}")
    available = bases()
    base = rng.choice(sorted(available))
    model = available[base]()
    wanted = rng.choices((1, 2, 3), weights=(5, 3, 2))[0]
    applied: list[tuple[str, Applied]] = []
    for name in rng.sample(sorted(MUTATIONS), len(MUTATIONS)):  # in random order until `wanted` applied
        if len(applied) == wanted:
            break
        change = MUTATIONS[name](model, rng)
        if change is not None and not (change.hostile and any(a.hostile for _, a in applied)):
            applied.append((name, change))
    hostile = next((a.hostile for _, a in applied if a.hostile), None)
    if hostile is not None and not _mark_external(model, hostile[1]):
        hostile = None  # a later mutation removed the tensor: the externalization did not happen
        applied = [(name, change) for name, change in applied if not change.hostile]
    example = Example(
        seed, index, base, tuple(n for n, _ in applied), tuple(a.note for _, a in applied),
        rng.choices(list(Storage), weights=(3, 2))[0], rng.choices(list(Call), weights=CALL_WEIGHTS)[0],
        rng.random() < 0.5, None if hostile is None else hostile[0],
    )
    return example, model


@dataclass(frozen=True)
class Layout:
    root: Path
    model_path: Path
    out_path: Path
    report_path: Path


def lay_out(example: Example, model: onnx.ModelProto, root: Path) -> Layout:
    """Write the mutated model (and its data, hostile or not) under `root`."""
    for folder in ("in", "out", "outside", "cwd", "home", "tmp"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    model = _clone(model)
    folder = root / ("out" if example.hostile is Hostile.OUTPUT_DATA else "in")
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL and tensor.HasField("raw_data"):
            _write_hostile(tensor, example.hostile, folder, root)  # type: ignore[arg-type]
    if example.storage is Storage.EXTERNAL:
        onnx.external_data_helper.convert_model_to_external_data(model, location="m.data", size_threshold=0)
    onnx.save_model(model, folder / "m.onnx")
    return Layout(root, folder / "m.onnx", root / "out" / "o.onnx", root / "out" / "r.json")


def _mark_external(model: onnx.ModelProto, name: str) -> bool:
    """Flag the tensor external, keeping its bytes in raw_data for `lay_out` to place."""
    tensor = next((t for t in model.graph.initializer if t.name == name), None)
    if tensor is None:
        return False
    fresh = onnx.TensorProto(name=name, data_type=tensor.data_type, dims=tensor.dims,
                             raw_data=nh.to_array(tensor).tobytes(), data_location=onnx.TensorProto.EXTERNAL)
    tensor.CopyFrom(fresh)
    return True


def _write_hostile(tensor: onnx.TensorProto, hostile: Hostile, folder: Path, root: Path) -> None:
    targets = {
        Hostile.ABSOLUTE: (root / "outside" / "secret.bin", str(root / "outside" / "secret.bin")),
        Hostile.PARENT: (root / "x.bin", "../x.bin"),
        Hostile.SYMLINK: (root / "outside" / "linked.bin", "link.bin"),
        Hostile.OUTPUT_DATA: (root / "out" / "o.onnx.data", "o.onnx.data"),
    }
    target, location = targets[hostile]
    target.write_bytes(tensor.raw_data)
    if hostile is Hostile.SYMLINK:
        (folder / "link.bin").symlink_to(target)
    del tensor.external_data[:]
    for key, value in (("location", location), ("offset", "0"), ("length", str(len(tensor.raw_data)))):
        tensor.external_data.append(onnx.StringStringEntryProto(key=key, value=value))
    tensor.ClearField("raw_data")


def _clone(model: onnx.ModelProto) -> onnx.ModelProto:
    twin = onnx.ModelProto()
    twin.CopyFrom(model)
    return twin


def validity(example: Example, model: onnx.ModelProto) -> str:
    """Why the input is not a valid model as given ('' if it is): the onnx checker's verdict
    on the mutated model held inline (through external shape tensors the checker's strict
    shape inference fails: "Cannot parse data from external tensors")."""
    if example.hostile is not None:
        return f"hostile external data: {example.hostile.value}"
    if example.storage is Storage.EXTERNAL and example.call is Call.PROTO_NO_BASE_DIR:
        return "a ModelProto with external data and no base_dir"
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # noqa: BLE001 - any complaint of the checker means invalid
        return f"onnx checker: {_first_line(exc)}"
    return ""


@dataclass(frozen=True)
class _Returned:
    model: onnx.ModelProto
    check: str


def _call(example: Example, layout: Layout, settings: Settings, proto: onnx.ModelProto) -> _Returned:
    """Optimize the example the way `example.call` says; raise what the library raises."""
    report = layout.report_path if example.with_report else None
    options = {"backend": settings.backend, "time_budget_s": settings.budget_s, "report_path": report}
    if example.call is Call.CLI:
        return _call_cli(layout, settings)
    if example.call is Call.PATH:
        result = taso.optimize_onnx(layout.model_path, layout.out_path, **options)
    else:
        base_dir = layout.model_path.parent if example.call is Call.PROTO else None
        result = taso.optimize_onnx(proto, layout.out_path, base_dir=base_dir, **options)
    return _Returned(result.model, result.report.check.value)


class _CliRefused(taso.InputError):
    """The CLI exited 2."""


class _CliFailed(Exception):
    """The CLI exited with an internal error."""


def _call_cli(layout: Layout, settings: Settings) -> _Returned:
    """The CLI in-process, with paths relative to the working directory (<root>/cwd)."""
    cwd = layout.root / "cwd"
    args = [
        "optimize", os.path.relpath(layout.model_path, cwd), "-o", os.path.relpath(layout.out_path, cwd),
        "--report", os.path.relpath(layout.report_path, cwd), "--backend", settings.backend,
        "--time-budget", str(settings.budget_s), "-q",
    ]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = taso.pipeline.cli.main(args)
    message = err.getvalue().strip().splitlines()[-1:] or [""]
    if code == taso.pipeline.cli.EXIT_USAGE:
        raise _CliRefused(f"CLI exit 2: {message[0]}")
    if code != taso.pipeline.cli.EXIT_OK:
        raise _CliFailed(f"CLI exit {code}: {message[0]}")
    check = json.loads(layout.report_path.read_text())["check"]
    return _Returned(onnx.load(str(layout.out_path), load_external_data=False), check)


def run_example(seed: int, index: int, settings: Settings) -> Finding:
    """Plan, lay out, optimize and judge one example (in a child process: it chdirs)."""
    example, model = plan(seed, index)
    reason = validity(example, model)
    layout = lay_out(example, model, Path(settings.run_root) / f"ex{index}")
    proto = onnx.load(str(layout.model_path), load_external_data=False)
    given = proto.SerializeToString()
    _enter_sandbox(layout.root, settings)
    before = snapshot(layout.root)
    returned: _Returned | None = None
    try:
        returned = _call(example, layout, settings, proto)
        result, detail = Result.OK, ""
    except taso.InputError as exc:
        result = Result.REFUSED_VALID if not reason else Result.REFUSED_INVALID
        detail = _first_line(exc) if isinstance(exc, _CliRefused) else f"{type(exc).__name__}: {_first_line(exc)}"
    except Exception as exc:  # noqa: BLE001 - every other exception is what the fuzzer looks for
        result, detail = Result.CRASH, _crash_text(exc)
    problems = _diff(before, snapshot(layout.root), ok=result is Result.OK)
    if example.call in (Call.PROTO, Call.PROTO_NO_BASE_DIR) and proto.SerializeToString() != given:
        problems.append(Problem(Kind.TOUCHED, "the input ModelProto was modified in memory"))
    rewritten = returned is not None and model_signature(returned.model) != model_signature(proto)
    if returned is not None:
        problems += _judge_returned(example, model_signature(proto), returned)
    return Finding(example, not reason, reason, result, detail, tuple(problems), rewritten)


def _enter_sandbox(root: Path, settings: Settings) -> None:
    """cwd, HOME, TMPDIR inside the example's root; no warnings; a memory ceiling."""
    os.chdir(root / "cwd")
    os.environ.update(HOME=str(root / "home"), TMPDIR=str(root / "tmp"), TASO_CACHE_DIR=settings.cache_dir)
    os.environ.pop("XDG_CACHE_HOME", None)
    tempfile.tempdir = None
    warnings.simplefilter("ignore")
    resource.setrlimit(resource.RLIMIT_AS, (settings.memory_bytes, settings.memory_bytes))


def _judge_returned(example: Example, given: list[tuple[object, ...]], returned: _Returned) -> list[Problem]:
    problems = []
    if model_signature(returned.model) != given and returned.check != taso.CheckStatus.PASSED.value:
        problems.append(Problem(Kind.UNCHECKED, f"the returned graph differs from the input; check {returned.check}"))
    if example.hostile in (Hostile.ABSOLUTE, Hostile.PARENT, Hostile.SYMLINK):
        problems.append(Problem(Kind.HOSTILE_READ, f"optimized a model whose data is at {example.hostile.value}"))
    return problems


def model_signature(model: onnx.ModelProto) -> list[tuple[object, ...]]:
    """The graph's nodes as sorted (op, domain, inputs, outputs, attributes): order and names aside."""
    return sorted(
        (n.op_type, n.domain, tuple(n.input), tuple(n.output), tuple(a.SerializeToString() for a in n.attribute))
        for n in model.graph.node
    )


Snapshot = dict[str, tuple[object, ...]]
_HASH_MAX_BYTES = 64 << 20
_OUTPUTS = frozenset({"out/o.onnx", "out/o.onnx.data", "out/r.json"})


def snapshot(root: Path) -> Snapshot:
    """Every file and link under `root`: size, mtime and content hash (folders by presence)."""
    entries: Snapshot = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = os.lstat(path)
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(info.st_mode):
                entries[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                entries[rel] = ("folder",)
            else:
                entries[rel] = ("file", info.st_size, info.st_mtime_ns, _digest(path, info.st_size))
    return entries


def _digest(path: Path, size: int) -> str:
    if size > _HASH_MAX_BYTES:
        return ""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _diff(before: Snapshot, after: Snapshot, *, ok: bool) -> list[Problem]:
    """Touched: anything gone, changed or new outside out/. Stray: new files in out/ that
    a failed call left, or that are neither the output, its data nor the report."""
    problems = []
    for rel, entry in before.items():
        if rel not in after:
            problems.append(Problem(Kind.TOUCHED, f"deleted {rel}"))
        elif after[rel] != entry:
            problems.append(Problem(Kind.TOUCHED, f"modified {rel}"))
    for rel in sorted(set(after) - set(before)):
        if not rel.startswith("out/"):
            problems.append(Problem(Kind.TOUCHED, f"created {rel}"))
        elif not ok or rel not in _OUTPUTS:
            problems.append(Problem(Kind.STRAY, f"{'a failed call left' if not ok else 'unexpected'} {rel}"))
    return problems


def _crash_text(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {_first_line(exc)}{where}"


def _first_line(exc: BaseException) -> str:
    return first_line(exc)[:300]


def child_main(seed: int, index: int, settings: Settings, conn: Connection) -> None:
    """The child process: run one example and send its `Finding` back."""
    try:
        finding = run_example(seed, index, settings)
    except Exception as exc:  # noqa: BLE001 - outside the library call: the fuzzer's own bug
        finding = lost(seed, index, Result.HARNESS_ERROR, _crash_text(exc))
    conn.send(finding)
    conn.close()


def lost(seed: int, index: int, result: Result, detail: str) -> Finding:
    """A finding for an example whose child could not judge it (killed, died, harness bug)."""
    try:
        example, _ = plan(seed, index)
    except Exception:  # noqa: BLE001 - planning itself failed: describe the example by its index
        example = Example(seed, index, "?", (), (), Storage.INLINE, Call.PATH, False, None)
    return Finding(example, False, "unknown", result, detail, ())
