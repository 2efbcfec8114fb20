"""The rough edges of the two CLIs (issue 20): bad rule files, shapes, bare `taso`, pipes.

Every bad input exits 2 with one line on stderr and no traceback, decided before the
model is loaded where the option alone shows it is bad.
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import taso
from taso.backends import ShapeProfile
from taso.pipeline import api
from taso.pipeline._rewriting import default_rules, resolve_rules
from taso.pipeline.cli import EXIT_BROKEN_PIPE
from taso.pipeline.cli import main as taso_main
from taso.substitutions.generate.cli import main as gen_main
from taso.substitutions.rule import ProofStatus, RuleLibrary, dump_rules
from tests.helpers import models


def _write(text: str | bytes) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return path

    return make


BAD_RULE_FILES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing": (lambda p: p, "no such"),
    "a folder": (lambda p: (p.mkdir(), p)[1], "not a file"),
    "empty object": (_write("{}"), "format"),
    "a list": (_write("[1, 2]"), "object"),
    "a text file": (_write("hello, rules\n"), "not JSON"),
    "binary": (_write(b"\xff\xfe\x00\x81 not text"), "not"),
    "rules not a list": (_write('{"format": 1, "rules": 3}'), "rules"),
    "a rule not an object": (_write('{"format": 1, "rules": [1]}'), "rule"),
}


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


def _model(tmp_path: Path) -> Path:
    path = tmp_path / "in.onnx"
    path.write_bytes(models.conv_net().SerializeToString())
    return path


@pytest.mark.parametrize("case", sorted(BAD_RULE_FILES))
def test_bad_rules_file_is_a_usage_error(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make, needle = BAD_RULE_FILES[case]
    rules = make(tmp_path / "rules.json")
    # the model does not exist either: the rule file is judged first, before any loading
    code = taso_main(["optimize", str(tmp_path / "nosuch.onnx"), "-o", str(tmp_path / "o.onnx"),
                      "--rules", str(rules), "--backend", "analytical", "-q"])
    line = _one_line(capsys.readouterr().err)
    assert code == 2, line
    assert line.startswith("taso: error:") and str(rules) in line, line
    assert needle.lower() in line.lower(), line


@pytest.mark.parametrize("case", sorted(BAD_RULE_FILES))
def test_bad_rules_file_in_the_api(case: str, tmp_path: Path) -> None:
    make, _ = BAD_RULE_FILES[case]
    rules = make(tmp_path / "rules.json")
    with pytest.raises(taso.UsageError, match="rules.json"):
        taso.optimize_onnx(tmp_path / "nosuch.onnx", time_budget_s=0, rules=rules, backend="analytical")


@pytest.mark.parametrize("case", sorted(BAD_RULE_FILES))
def test_verify_bad_rules_file(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make, needle = BAD_RULE_FILES[case]
    rules = make(tmp_path / "rules.json")
    code = gen_main(["verify", str(rules)])
    line = _one_line(capsys.readouterr().err)
    assert code == 2, line
    assert line.startswith("taso-gen: error:") and str(rules) in line, line
    assert "Errno" not in line and needle.lower() in line.lower(), line


def test_good_rules_file_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(dump_rules(RuleLibrary(default_rules()[:3])))
    assert len(resolve_rules(path)) == len([r for r in default_rules()[:3] if r.proof.status is ProofStatus.PROVED])



# --shape: other tools' syntax, malformed items, names the model lacks


@pytest.mark.parametrize("spec", ["x:1,3,224,224", "x:1x3x224x224", "x=1x3x224x224", " x : 1, 3, 224, 224 "])
def test_shape_colon_syntax_is_an_alias(spec: str) -> None:
    assert ShapeProfile.parse(spec) == ShapeProfile.of(shapes={"x": (1, 3, 224, 224)})


def test_shape_colon_items_mix_with_others() -> None:
    expected = ShapeProfile.of(shapes={"x": (1, 3, 8, 8), "mask": (1, 7)}, dims={"batch": 2})
    assert ShapeProfile.parse("x:1,3,8,8,batch=2,mask:1,7") == expected
    assert ShapeProfile.parse(["x:1,3,8,8", "batch=2", "mask=1x7"]) == expected
    assert ShapeProfile.parse("input:0=1x3") == ShapeProfile.of(shapes={"input:0": (1, 3)})


@pytest.mark.parametrize("spec", ["x", "x:", "=3", "x=1x?", "x:a,b", "3,x=1x2"])
def test_malformed_shape_item_shows_the_accepted_forms(spec: str) -> None:
    with pytest.raises(taso.UsageError) as info:
        ShapeProfile.parse(spec)
    message = str(info.value)
    assert "NAME=1x3x224x224" in message and "NAME:1,3,224,224" in message and "\n" not in message


def test_cli_accepts_the_colon_syntax(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = taso_main(["optimize", str(_model(tmp_path)), "-o", str(tmp_path / "o.onnx"), "--shape", "x:1,3,16,16",
                      "--backend", "analytical", "--no-check", "--time-budget", "0", "-q"])
    assert code == 0, capsys.readouterr().err


def test_unknown_shape_input_is_refused_before_the_search(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["optimize", str(_model(tmp_path)), "-o", str(tmp_path / "o.onnx"), "--shape", "nosuch=1x3x8x8",
            "--backend", "analytical", "--no-check", "--time-budget", "1"]
    code = taso_main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "searching" not in err and "search:" not in err, err
    assert not (tmp_path / "o.onnx").exists()
    code = taso_main([*argv, "-q"])
    line = _one_line(capsys.readouterr().err)
    assert code == 2 and "'nosuch'" in line and "not a model input" in line, line


# bare `taso`, --backend's help, --debug


def test_bare_taso_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    code = taso_main([])
    err = capsys.readouterr().err
    assert code == 2
    assert "required: command" not in err and "optimize" in err and "usage: taso" in err, err


def test_backend_has_a_help_text(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        taso_main(["optimize", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for needle in ("ort-cpu:", "ort-cuda:", "analytical:", "onnxruntime-gpu", "no device"):
        assert needle in text, text


def _broken(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError("a bug in taso")


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(api, "optimize_onnx", _broken)
    argv = ["optimize", str(_model(tmp_path)), "-o", str(tmp_path / "o.onnx"), "-q"]
    assert taso_main(argv) == 1
    assert "internal error (RuntimeError): a bug in taso" in _one_line_internal(capsys.readouterr().err)
    with pytest.raises(RuntimeError, match="a bug in taso"):
        taso_main(["--debug", *argv] if where == "before" else [*argv, "--debug"])


def _one_line_internal(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# `| head -1`: the reader leaves; both CLIs exit quietly


class _ClosedPipe(io.StringIO):
    """A stdout whose reader has gone (`| head -1` after its line)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_taso_gen_ops_into_a_closed_pipe(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    code = gen_main(["ops"])
    assert code == EXIT_BROKEN_PIPE and capsys.readouterr().err == ""


def test_taso_into_a_closed_pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    code = taso_main(["optimize", str(_model(tmp_path)), "-o", str(tmp_path / "o.onnx"), "--backend", "analytical",
                      "--no-check", "--time-budget", "0", "-q"])
    assert code == EXIT_BROKEN_PIPE and capsys.readouterr().err == ""


def test_taso_gen_ops_piped_to_a_reader_that_left() -> None:
    """The real thing: nothing on stderr, not even Python's 'Exception ignored' at exit."""
    child = subprocess.Popen([sys.executable, "-m", "taso.substitutions.generate.cli", "ops"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None
    child.stdout.close()  # before the child has imported anything: its first write breaks the pipe
    _, err = child.communicate(timeout=60)
    assert child.returncode == EXIT_BROKEN_PIPE and err.decode() == ""
