"""The remaining rough edges of the two CLIs (issue 20, Build item 4): `--version` on
both commands, `taso-gen verify` defaulting to the shipped library, a bare `taso-gen`
printing its help, and an unknown `--shape` name refused before the model is imported."""

from __future__ import annotations

from importlib import resources
from importlib.metadata import version
from pathlib import Path

import onnx
import pytest

import taso
from taso.pipeline import api
from taso.pipeline.cli import main as taso_main
from taso.substitutions.generate.cli import build_parser
from taso.substitutions.generate.cli import main as gen_main
from tests.helpers import models


@pytest.mark.parametrize("main", [taso_main, gen_main], ids=["taso", "taso-gen"])
def test_version(main: object, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["--version"])  # type: ignore[operator]
    except SystemExit as stop:  # argparse's version action exits
        code = stop.code
    assert code == 0
    out = capsys.readouterr().out.strip()
    assert out.endswith(version("taso-onnx")) and "taso" in out and "\n" not in out


def test_verify_defaults_to_the_shipped_library() -> None:
    args = build_parser().parse_args(["verify"])
    shipped = Path(str(resources.files("taso.substitutions").joinpath("library", "rules.json")))
    assert Path(args.file) == shipped and shipped.is_file()
    assert build_parser().parse_args(["verify", "mine.json"]).file == "mine.json"


def test_verify_help_names_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert gen_main(["verify", "--help"]) == 0
    assert "default: the shipped library" in capsys.readouterr().out


def test_bare_taso_gen_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert gen_main([]) == 2
    err = capsys.readouterr().err
    assert "usage: taso-gen" in err and "verify" in err and "required" not in err


def test_unknown_shape_name_is_refused_before_the_model_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "in.onnx"
    onnx.save_model(models.conv_net(), path)

    def no_import(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was imported before its --shape names were checked")

    monkeypatch.setattr(api, "import_model", no_import)
    with pytest.raises(taso.UsageError, match="'nosuch'"):
        taso.optimize_onnx(path, shapes="nosuch=1x3", time_budget_s=0, backend="analytical", check=False)
