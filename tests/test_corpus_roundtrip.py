"""Round trip (`time_budget_s=0`) over the onnx package's backend test models.

Every node test case that ONNX Runtime can run, plus the packaged model corpus, goes
through import -> export; the result must keep every node and attribute exactly and
give bit-identical outputs under ORT. Run `python -m tests.test_corpus_roundtrip` for
the figures (passed / total per category).
"""

from __future__ import annotations

import enum
import glob
import os
import warnings
from collections import Counter
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from taso._onnx_export import export_model
from taso._onnx_import import import_model
from taso.backends import max_ir_version

pytestmark = pytest.mark.ort


class Outcome(enum.Enum):
    PASSED = "passed"
    ORT_CANNOT_RUN = "structure kept; outputs not compared: ORT cannot run the original"
    NONDETERMINISTIC = "passed (shapes only: the original is not deterministic)"
    STRUCTURE_CHANGED = "FAILED: nodes or attributes changed"
    OUTPUT_CHANGED = "FAILED: outputs differ"
    EXPORT_FAILED = "FAILED: import/export raised"


FAILURES = (Outcome.STRUCTURE_CHANGED, Outcome.OUTPUT_CHANGED, Outcome.EXPORT_FAILED)


@dataclass(frozen=True)
class Case:
    name: str
    model: onnx.ModelProto
    inputs: dict[str, object]


def _runnable(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.ir_version = min(copy.ir_version, max_ir_version())
    return copy


def _run(model: onnx.ModelProto, inputs: dict[str, object]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in inputs.items() if k in names})


def _canonical(value: object) -> object:
    """Outputs as comparable bytes; sequences and maps recursively."""
    if isinstance(value, list | tuple):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    array = np.asarray(value)
    if array.dtype == object:
        return ("object", array.shape, tuple(map(repr, array.ravel())))
    return (array.shape, str(array.dtype), array.tobytes())


def _shapes(values: list[object]) -> list[object]:
    return [np.shape(v) if isinstance(v, np.ndarray) else type(v).__name__ for v in values]


def _same(a: list[object], b: list[object]) -> bool:
    return _canonical(a) == _canonical(b)


def check_case(case: Case) -> Outcome:
    try:
        exported = export_model(import_model(case.model))
    except Exception:
        return Outcome.EXPORT_FAILED
    if list(exported.graph.node) != list(case.model.graph.node):
        return Outcome.STRUCTURE_CHANGED
    try:
        reference = _run(_runnable(case.model), case.inputs)
    except Exception:
        return Outcome.ORT_CANNOT_RUN
    got = _run(exported, case.inputs)
    if _same(reference, got):
        return Outcome.PASSED
    again = _run(_runnable(case.model), case.inputs)
    if not _same(reference, again):
        return Outcome.NONDETERMINISTIC if _shapes(reference) == _shapes(got) else Outcome.OUTPUT_CHANGED
    return Outcome.OUTPUT_CHANGED


def node_cases() -> list[Case]:
    from onnx.backend.test.case import node

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = node.collect_testcases(None)
    result = []
    for case in cases:
        if case.model is None or not case.data_sets:
            continue
        inputs_list = case.data_sets[0][0]
        names = [i.name for i in case.model.graph.input]
        inputs = {n: _feed(v) for n, v in zip(names, inputs_list, strict=False) if v is not None}
        result.append(Case(case.name, case.model, inputs))
    return result


def _feed(value: object) -> object:
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def corpus_cases() -> list[Case]:
    import onnx.backend.test

    root = os.path.join(os.path.dirname(onnx.backend.test.__file__), "data")
    result = []
    for path in sorted(glob.glob(os.path.join(root, "*", "*", "model.onnx"))):
        folder = os.path.dirname(path)
        inputs = _load_inputs(folder)
        if inputs is None:
            continue
        result.append(Case(os.path.relpath(folder, root), onnx.load(path), inputs))
    return result


def _load_inputs(folder: str) -> dict[str, np.ndarray] | None:
    files = sorted(glob.glob(os.path.join(folder, "test_data_set_0", "input_*.pb")))
    inputs = {}
    for index, path in enumerate(files):
        tensor = onnx.TensorProto()
        with open(path, "rb") as f:
            tensor.ParseFromString(f.read())
        inputs[tensor.name or f"__{index}"] = onnx.numpy_helper.to_array(tensor)
    return inputs


def _fill_unnamed(case: Case) -> Case:
    if not any(k.startswith("__") for k in case.inputs):
        return case
    names = [i.name for i in case.model.graph.input if i.name not in {t.name for t in case.model.graph.initializer}]
    return Case(case.name, case.model, dict(zip(names, case.inputs.values(), strict=False)))


def run_all(cases: list[Case]) -> Counter[Outcome]:
    return Counter(check_case(_fill_unnamed(c)) for c in cases)


def test_node_test_models_roundtrip_exactly() -> None:
    cases = node_cases()
    failures = [(c.name, o) for c in cases if (o := check_case(c)) in FAILURES]
    assert len(cases) > 1000
    assert not failures, failures[:20]


def test_packaged_model_corpus_roundtrips_exactly() -> None:
    cases = corpus_cases()
    failures = [(c.name, o) for c in cases if (o := check_case(_fill_unnamed(c))) in FAILURES]
    assert len(cases) > 50
    assert not failures, failures[:20]


def test_harness_catches_a_lossy_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that cannot fail is a defect: an exporter that drops an attribute must be caught."""
    from tests.helpers import models

    model = models.conv_net()
    inputs = {"x": np.ones((1, 3, 16, 16), dtype=np.float32)}
    assert check_case(Case("conv", model, inputs)) is Outcome.PASSED

    real_export = export_model

    def lossy_export(graph: object) -> onnx.ModelProto:
        out = real_export(graph)  # type: ignore[arg-type]
        del out.graph.node[0].attribute[:]
        return out

    monkeypatch.setitem(globals(), "export_model", lossy_export)
    assert check_case(Case("conv", model, inputs)) is Outcome.STRUCTURE_CHANGED


if __name__ == "__main__":
    for label, cases in (("node tests", node_cases()), ("model corpus", corpus_cases())):
        counts = run_all(cases)
        runnable = sum(v for k, v in counts.items() if k is not Outcome.ORT_CANNOT_RUN)
        passed = counts[Outcome.PASSED] + counts[Outcome.NONDETERMINISTIC]
        print(f"{label}: {passed}/{runnable} runnable passed ({len(cases)} total)")
        for outcome, count in counts.most_common():
            print(f"  {outcome.value}: {count}")
