"""The HTML report (issue 20, item 2): one self-contained page with the summary's tables
and, for every kept sweep, its rule and one matched site drawn before and after."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import onnx
import pytest

import taso
from taso._onnx_import import import_model
from taso.backends import AnalyticalCostModel
from taso.examples.make_model import build as build_example
from taso.ir import INTERNAL_DOMAIN, Graph
from taso.pipeline._choose import sweep_record as _sweep_record
from taso.pipeline._html import (
    LOWERING_FACTS,
    LOWERING_MATH,
    PADDING_FACTS,
    PADDING_MATH,
    report_html,
    site_graph,
    site_svg,
)
from taso.pipeline._lower_transposes import LOWER_TRANSPOSES
from taso.pipeline._pad_channels import pad_rule_id
from taso.pipeline._rewriting import Sweeping, default_rules, run_search
from taso.pipeline.budget import Budget
from taso.pipeline.cli import main
from taso.report import CheckStatus, Decision, Latency, Report, SiteNode
from taso.search.sweep import Judgement
from tests.helpers.models import scaled_chain_model


def _nodes_run(graph: Graph) -> int:
    """What the stand-in device runs: every node but the weight transforms export folds."""
    return sum(1 for node in graph.nodes.values() if node.domain != INTERNAL_DOMAIN)


def _fewer_nodes_are_faster(current: Graph, candidate: Graph, deadline: float) -> Judgement:
    speedup = _nodes_run(current) / _nodes_run(candidate)
    return Judgement(speedup, speedup > 1.01)


@pytest.fixture(scope="module")
def swept() -> tuple[Report, list]:
    """A report whose sweeps were judged by a stand-in device on Conv -> Mul -> Mul -> Relu -> Relu."""
    rules = default_rules()
    graph = import_model(scaled_chain_model())
    outcome = run_search(graph, rules=rules, cost_model=AnalyticalCostModel(), alpha=1.0, budget=Budget.of(5),
                         sweeping=Sweeping(_fewer_nodes_are_faster, AnalyticalCostModel()))
    report = Report(
        input_nodes=5, output_nodes=len(outcome.graph.nodes), applied_rewrites=outcome.applied,
        latency=Latency(measured_original_ms=1.0, measured_optimized_ms=0.5), max_abs_diff={"y": 1e-6},
        check=CheckStatus.PASSED, decision=Decision.OPTIMIZED, stop_reason=outcome.stop_reason,
        graphs_explored=outcome.explored, phase_seconds={"search": 0.1},
        sweeps=tuple(_sweep_record(s) for s in outcome.sweeps), input_ops={"Conv": 1, "Mul": 2, "Relu": 2},
        output_ops={"Conv": 1, "Relu": 1}, input_bytes=2000, output_bytes=1700,
    )
    return report, list(rules)


def test_every_kept_sweep_gets_its_rule_and_a_picture(swept: tuple[Report, list]) -> None:
    report, rules = swept
    kept = [s for s in report.sweeps if s.kept]
    assert len(kept) >= 2, [s.describe() for s in report.sweeps]  # the conv fold and a Relu (or Mul) sweep
    page = report_html(report, rules)
    assert page.count("<svg") == 2 * len(kept)  # before and after
    by_id = {rule.id: rule for rule in rules}
    for sweep in kept:
        assert f"Kept: {sweep.rule_id}" in page
        rule = by_id[sweep.rule_id]
        assert re.search(re.escape(_escaped(rule.math)), page), rule.math
        assert f"proof: {rule.proof.status.value}; exactness: {rule.exactness.value}" in page
        assert f"measured {sweep.measured_speedup:.3f}x faster" in page
    assert "<td>nodes</td>" in page and "ax-relu_idempotent" in page


def test_a_kept_channel_padding_says_what_it_rests_on(swept: tuple[Report, list]) -> None:
    report, rules = swept
    first = next(s for s in report.sweeps if s.kept)
    padded = dataclasses.replace(report, sweeps=(dataclasses.replace(first, rule_id=pad_rule_id(8)),))
    page = report_html(padded, rules)
    assert _escaped(PADDING_FACTS) in page and _escaped(PADDING_MATH) in page
    assert "rule not among the rules given" not in page


def test_kept_lowered_transposes_say_what_they_rest_on(swept: tuple[Report, list]) -> None:
    report, rules = swept
    first = next(s for s in report.sweeps if s.kept)
    lowered = dataclasses.replace(report, sweeps=(dataclasses.replace(first, rule_id=LOWER_TRANSPOSES),))
    page = report_html(lowered, rules)
    assert _escaped(LOWERING_FACTS) in page and _escaped(LOWERING_MATH) in page
    assert "rule not among the rules given" not in page


def test_a_sweep_record_carries_one_matched_site(swept: tuple[Report, list]) -> None:
    report, _ = swept
    site = next(s.site for s in report.sweeps if s.rule_id == "ax-relu_idempotent")
    assert site is not None
    assert [n.op for n in site.before] == ["Relu", "Relu"] and [n.op for n in site.after] == ["Relu"]
    assert site.before[0].inputs == site.after[0].inputs and site.before[-1].outputs == site.after[-1].outputs
    fold = next(s.site for s in report.sweeps if s.rule_id == "cv-fold_mul_conv")
    assert fold is not None and any(n.folded for n in fold.after)  # the weight transform export folds


def test_the_page_fetches_nothing(swept: tuple[Report, list]) -> None:
    page = report_html(*swept)
    assert not re.search(r"https?://", page)
    assert not re.search(r"<(script|link|img|iframe)\b", page)
    assert "src=" not in page and "@import" not in page and "url(http" not in page


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;").replace("'", "&#x27;")


def test_a_site_is_laid_out_in_rows_by_its_dependencies() -> None:
    nodes = (SiteNode("Conv", ("x", "w"), ("c",)), SiteNode("Mul", ("c", "s"), ("m",)))
    graph = site_graph(nodes)
    assert set(graph.edges) == {("i000", "n000"), ("i001", "n000"), ("n000", "n001"), ("i002", "n001"), ("n001", "o000")}
    assert [graph.nodes[key]["item"].label for key in ("i000", "i001", "i002", "o000")] == ["x", "w", "s", "m"]
    svg = site_svg(nodes, "before")
    ys = {label: float(y) for y, label in re.findall(r'<text x="[\d.]+" y="([\d.]+)"[^>]*>([^<]+)</text>', svg)}
    assert ys["x"] == ys["w"] < ys["Conv"] < ys["Mul"] < ys["m"]  # inputs on top, then one row per generation
    assert ys["s"] < ys["Mul"]


def test_a_folded_weight_transform_is_drawn_dashed() -> None:
    svg = site_svg((SiteNode("Mul", ("w", "s"), ("w2",), folded=True), SiteNode("Conv", ("x", "w2"), ("y",))), "after")
    assert svg.count("stroke-dasharray") == 1


def test_the_cli_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, page = tmp_path / "in.onnx", tmp_path / "r.html"
    onnx.save(scaled_chain_model(), source)
    argv = ["optimize", str(source), "-o", str(tmp_path / "out.onnx"), "--time-budget", "1", "--no-check",
            "--backend", "analytical", "--report-html", str(page), "-q"]
    assert main(argv) == 0
    assert f"wrote {page}" in capsys.readouterr().out.splitlines()
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<td>nodes</td>" in text and not re.search(r"https?://", text)


def test_the_page_may_not_overwrite_the_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(scaled_chain_model(), source)
    argv = ["optimize", str(source), "-o", str(out), "--time-budget", "0", "--backend", "analytical", "--report-html", str(out)]
    assert main(argv) == 2
    assert not out.exists()


@pytest.mark.ort
def test_a_measured_run_draws_each_kept_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path / "cache"))
    source, page = tmp_path / "example.onnx", tmp_path / "r.html"
    onnx.save(build_example(channels=16, size=32), source)
    report = taso.optimize_onnx(source, tmp_path / "out.onnx", time_budget_s=4, report_html=page).report
    kept = [s for s in report.sweeps if s.kept]
    assert all(s.site is not None and s.site.before and s.site.after for s in kept)
    text = page.read_text()
    assert text.count("<svg") == 2 * len(kept) and not re.search(r"https?://", text)


BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def test_headless_chromium_renders_the_page(swept: tuple[Report, list], tmp_path: Path) -> None:
    browser = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if browser is None:
        pytest.skip("no Chromium installed")
    page, shot = tmp_path / "report.html", tmp_path / "report.png"
    page.write_text(report_html(*swept))
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,1800", page.as_uri()], check=True, capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
