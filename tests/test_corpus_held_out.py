"""The held-out set: real exports kept out of the corpus, built apart from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.corpus import BY_NAME, __main__, _build, _cache
from benchmarks.corpus._held_out import HELD_OUT, HELD_OUT_BY_NAME


def test_no_held_out_entry_is_in_the_corpus() -> None:
    assert HELD_OUT and not set(HELD_OUT_BY_NAME) & set(BY_NAME)
    assert len(HELD_OUT_BY_NAME) == len(HELD_OUT)


def _record_builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Path]]:
    built: list[tuple[str, Path]] = []

    def fake(entry, cache):  # noqa: ANN001, ANN202
        built.append((entry.name, cache))
        return _build.BuildResult(entry.name, _build.Outcome.BUILT, "converted")

    monkeypatch.setattr(_build, "build_entry", fake)
    monkeypatch.setattr(__main__, "_check", lambda cache: 0)
    return built


def test_held_out_builds_its_own_entries_into_its_own_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(_cache.ENV_VAR, str(tmp_path))
    built = _record_builds(monkeypatch)
    assert __main__.main(["build", "--held-out"]) == 0
    assert [name for name, _ in built] == [entry.name for entry in HELD_OUT]
    assert {cache for _, cache in built} == {tmp_path / __main__.HELD_OUT_FOLDER}


def test_the_corpus_build_leaves_the_held_out_set_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(_cache.ENV_VAR, str(tmp_path))
    built = _record_builds(monkeypatch)
    assert __main__.main(["build"]) == 0
    assert {name for name, _ in built} == set(BY_NAME)
    assert {cache for _, cache in built} == {tmp_path}


def test_a_name_from_the_other_set_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setenv(_cache.ENV_VAR, str(tmp_path))
    built = _record_builds(monkeypatch)
    assert __main__.main(["build", "--held-out", "--only", "tv_resnet18"]) == 2
    assert __main__.main(["build", "--only", HELD_OUT[0].name]) == 2
    assert not built and "not held out: tv_resnet18" in capsys.readouterr().err
