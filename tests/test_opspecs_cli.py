"""``taso-gen ops`` and ``taso-gen check-axioms`` through ``main([...])``."""

from __future__ import annotations

import json

import pytest

from taso.opspecs import all_specs
from taso.opspecs.axioms import all_axioms
from taso.substitutions.generate.cli import main


def test_ops_lists_every_spec(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    for spec in all_specs():
        assert spec.name in out
    assert f"{len(all_specs())} specs" in out


def test_ops_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    conv = next(r for r in rows if r["name"] == "Conv")
    assert conv["onnx_ops"] == "Conv" and conv["axioms"] >= 10


def test_check_axioms_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-axioms", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["axioms"] == len(all_axioms()) and report["failed"] == 0
    assert all(r["ok"] for r in report["results"])


def test_check_axioms_text_subset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-axioms", "--only", "add_comm", "conv_enlarge_kernel"]) == 0
    assert "2 axioms, 0 failed" in capsys.readouterr().out


def test_bare_taso_gen_prints_its_help_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: taso-gen" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["frobnicate"], ["ops", "--bogus"], ["check-axioms", "--seed", "x"]])
def test_bad_usage_is_one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("taso-gen: error:")


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "check-axioms" in capsys.readouterr().out
