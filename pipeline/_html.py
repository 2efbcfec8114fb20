"""The report as one self-contained HTML page (`taso optimize --report-html R.html`).

    page = the summary's tables + one section per kept sweep:
           its rule's math, proof status and exactness class, the measured gain,
           and one matched site before and after the rewrite, drawn as SVG

Nothing is fetched: the CSS is inline and the pictures are inline SVG. A site is laid
out by networkx (`multipartite_layout` over the site's topological generations: one row
per generation, inputs on top); this module only scales those coordinates to pixels and
writes the boxes and arrows.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx

from taso.pipeline._lower_transposes import LOWER_TRANSPOSES
from taso.pipeline._pad_channels import is_pad_rule
from taso.report import Report, SiteNode, SweepRecord
from taso.substitutions.rule import Rule

BOX_W, BOX_H = 120, 30  # px: an op's box; a value's label is as wide
COLUMN_W, ROW_H, MARGIN = 140, 62, 12  # px between columns and rows, around the picture
LABEL_CHARS = 18  # a value name longer than this is cut (its full name is the tooltip)

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 64em; color: #1b1f24; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #d0d7de; }
table { border-collapse: collapse; margin: .6em 0; }
th, td { padding: .2em .8em; border-bottom: 1px solid #eaeef2; text-align: left; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
td:first-child { white-space: nowrap; }
th { background: #f6f8fa; }
.math { font-family: ui-monospace, monospace; background: #f6f8fa; padding: .3em .6em; display: inline-block; }
.pair { display: flex; gap: 2em; flex-wrap: wrap; align-items: flex-start; }
.pair figure { margin: 0; } figcaption { color: #57606a; font-size: .9em; }
ul.notes { color: #57606a; } .meta { color: #57606a; font-size: .85em; }
"""


def report_html(report: Report, rules: Sequence[Rule] = ()) -> str:
    """The page for `report`; `rules` (those the search used) give each sweep's math and proof."""
    by_id = {rule.id: rule for rule in rules}
    layout = report.layout()
    kept = [s for s in report.sweeps if s.kept and s.site is not None]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', "<title>taso report</title>",
        f"<style>{STYLE}</style></head><body>", "<h1>taso report</h1>",
        f"<p><strong>{_e(report.decision.value)}</strong></p>",
        _table(layout.models, numeric={1, 2}),
        *([f"<h2>Sweeps ({len(layout.sweeps) - 1}, in the order judged)</h2>", _table(layout.sweeps, numeric={1, 2, 3})]
          if layout.sweeps else []),
        '<ul class="notes">' + "".join(f"<li>{_e(line)}</li>" for line in layout.notes) + "</ul>",
        *(_sweep_section(s, by_id.get(s.rule_id)) for s in kept),
        f'<p class="meta">{_e(_versions(report))}</p>', "</body></html>",
    ]
    return "\n".join(parts) + "\n"


PADDING_MATH = "op(concat(x, p, 1)) = concat(op(x), op(p), 1); conv(concat(x, p, 1), concat(w, 0, 1)) = conv(x, w)"
PADDING_FACTS = ("a whole-graph rewrite, not a rule: conv channel classes widened to multiples of ORT's channel block "
                 "on this machine (the number after the rule id), each widened "
                 "node an instance of a lemma validated by Z3 and numerically (opspecs/axioms/channel_pad.py); "
                 "exactness: reassociates (the wider kernels may sum in another order)")

LOWERING_MATH = "transpose(x, p) = reshape(transpose(reshape(x, m), q), shape(transpose(x, p)))"
LOWERING_FACTS = ("a whole-graph rewrite, not a rule: each Transpose of four or more axes above size 1 written with "
                  "its size-1 axes dropped and the axes that stay adjacent merged (m, q); each an instance of a lemma "
                  "validated by Z3 and numerically (opspecs/axioms/lowering.py); exactness: exact (elements are only moved)")


def _joint_note(sweep: SweepRecord) -> list[str]:
    if not sweep.joint:
        return []
    return [f"<p>Judged together with {_e(', '.join(f'{p.rule_id} x{p.rewrites}' for p in sweep.joint))} "
            "(a joint sweep: neither was faster alone).</p>"]


def _sweep_section(sweep: SweepRecord, rule: Rule | None) -> str:
    assert sweep.site is not None
    gain = f"measured {sweep.measured_speedup:.3f}x faster" if sweep.measured_speedup else "not measured"
    if sweep.predicted_speedup is not None:
        gain += f" (predicted {sweep.predicted_speedup:.3f}x)"
    facts = ("rule not among the rules given" if rule is None
             else f"proof: {rule.proof.status.value}; exactness: {rule.exactness.value}")
    math = "" if rule is None else f'<p><span class="math">{_e(rule.math)}</span></p>'
    if is_pad_rule(sweep.rule_id):
        facts, math = PADDING_FACTS, f'<p><span class="math">{_e(PADDING_MATH)}</span></p>'
    elif sweep.rule_id == LOWER_TRANSPOSES:
        facts, math = LOWERING_FACTS, f'<p><span class="math">{_e(LOWERING_MATH)}</span></p>'
    return "\n".join([
        f"<h2>Kept: {_e(sweep.rule_id)}</h2>", math, *_joint_note(sweep),
        f"<p>{_e(facts)}. Applied at {sweep.rewrites} site{'s' if sweep.rewrites != 1 else ''}: {_e(gain)}"
        + (", from the cost cache" if sweep.cached else "") + ". One of them:</p>",
        '<div class="pair">',
        f"<figure><figcaption>before</figcaption>{site_svg(sweep.site.before, 'before')}</figure>",
        f"<figure><figcaption>after</figcaption>{site_svg(sweep.site.after, 'after')}</figure>",
        "</div>",
    ])


def _table(rows: tuple[tuple[str, ...], ...], *, numeric: set[int]) -> str:
    def cells(row: tuple[str, ...], tag: str) -> str:
        return "".join(f'<{tag}{" class=n" if i in numeric else ""}>{_e(c)}</{tag}>' for i, c in enumerate(row))

    head, *body = rows
    return "<table><tr>" + cells(head, "th") + "</tr>" + "".join(f"<tr>{cells(r, 'td')}</tr>" for r in body) + "</table>"


def _versions(report: Report) -> str:
    versions = ", ".join(f"{name} {v}" for name, v in report.versions.items())
    digest = "" if report.input_sha256 is None else f"; input sha256 {report.input_sha256}"
    return f"made with {versions}{digest}" if versions else digest.lstrip("; ")


@dataclass(frozen=True)
class _Item:
    """A box (an op) or a label (a value entering or leaving the site)."""

    label: str
    title: str
    kind: str  # "op", "folded" (a weight transform export folds) or "value"


def site_graph(nodes: Sequence[SiteNode]) -> nx.DiGraph:
    """The site as a graph: its ops, the values entering it, and those it leaves. Keys
    sort in first-use order, the order a row's members are laid out in."""
    graph = nx.DiGraph()
    op_key = [f"n{i:03d}" for i in range(len(nodes))]
    produced = {value: op_key[i] for i, node in enumerate(nodes) for value in node.outputs}
    consumed = {value for node in nodes for value in node.inputs if value}
    for i, node in enumerate(nodes):
        graph.add_node(op_key[i], item=_Item(node.op, node.op, "folded" if node.folded else "op"))
    for i, node in enumerate(nodes):
        for slot, value in enumerate(dict.fromkeys(v for v in node.inputs if v)):
            source = produced.get(value) or _value_node(graph, value, "i")
            graph.add_edge(source, op_key[i], slot=slot)
        for value in node.outputs:
            if value not in consumed:
                graph.add_edge(op_key[i], _value_node(graph, value, "o"), slot=0)
    return graph


def _value_node(graph: nx.DiGraph, value: str, side: str) -> str:
    """The key of a value's label (made on first use): `i003` for the fourth input."""
    named = {data["item"].title: key for key, data in graph.nodes(data=True) if key.startswith(side)}
    if value in named:
        return named[value]
    key = f"{side}{len(named):03d}"
    short = value.rsplit("/", 1)[-1] or value
    label = short if len(short) <= LABEL_CHARS else short[: LABEL_CHARS - 1] + "…"
    graph.add_node(key, item=_Item(label, value, "value"))
    return key


def site_svg(nodes: Sequence[SiteNode], title: str) -> str:
    """`nodes` drawn top to bottom, one row per topological generation."""
    graph = site_graph(nodes)
    rows = {row: sorted(members) for row, members in enumerate(nx.topological_generations(graph))}
    for row, members in rows.items():
        for member in members:
            graph.nodes[member]["row"] = row
    positions = nx.multipartite_layout(graph, subset_key=rows, align="horizontal")
    points = _pixels(graph, positions)
    width = max(x for x, _ in points.values()) + BOX_W / 2 + MARGIN
    height = max(y for _, y in points.values()) + BOX_H / 2 + MARGIN
    body = [_edge(points[a], points[b], slot, graph.in_degree(b)) for a, b, slot in graph.edges(data="slot")] + [
        _box(graph.nodes[n]["item"], *points[n]) for n in graph.nodes
    ]
    return (
        f'<svg width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{_e(title)}">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#57606a"/></marker></defs>'
        + "".join(body) + "</svg>"
    )


def _pixels(graph: nx.DiGraph, positions: dict[str, object]) -> dict[str, tuple[float, float]]:
    """networkx's layout scaled to pixels: its rows `ROW_H` apart, its widest row's
    neighbours `COLUMN_W` apart (the layout's own proportions within a row kept)."""
    rows = max(graph.nodes[n]["row"] for n in graph.nodes) + 1
    widest = max(sum(1 for n in graph.nodes if graph.nodes[n]["row"] == r) for r in range(rows))
    xs = [float(p[0]) for p in positions.values()]  # type: ignore[index]
    span = (max(xs) - min(xs)) or 1.0
    scale = (widest - 1) * COLUMN_W / span if widest > 1 else 0.0
    left = MARGIN + BOX_W / 2
    return {
        n: (left + (float(positions[n][0]) - min(xs)) * scale, MARGIN + BOX_H / 2 + graph.nodes[n]["row"] * ROW_H)  # type: ignore[index]
        for n in graph.nodes
    }


def _edge(start: tuple[float, float], end: tuple[float, float], slot: int, inputs: int) -> str:
    """An arrow from a box's bottom to the top of the box it feeds, at its input's slot."""
    (x1, y1), (x2, y2) = start, end
    x2 += (slot - (inputs - 1) / 2) * BOX_W / (inputs + 1)
    return (f'<line x1="{x1:.1f}" y1="{y1 + BOX_H / 2:.1f}" x2="{x2:.1f}" y2="{y2 - BOX_H / 2:.1f}" '
            'stroke="#57606a" stroke-width="1.3" marker-end="url(#arrow)"/>')


def _box(item: _Item, x: float, y: float) -> str:
    tip = f"<title>{_e(item.title)}</title>"
    weight = "600" if item.kind == "op" else "400"
    size = 11 if item.kind == "value" else 12
    text = (f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle" font-family="system-ui, sans-serif" '
            f'font-size="{size}" font-weight="{weight}" fill="#1b1f24">{_e(item.label)}</text>')
    if item.kind == "value":
        shape = (f'<rect x="{x - BOX_W / 2:.1f}" y="{y - BOX_H / 2 + 4:.1f}" width="{BOX_W}" height="{BOX_H - 8}" '
                 'rx="11" fill="#ffffff" stroke="#afb8c1"/>')
    else:
        dash = ' stroke-dasharray="4 3"' if item.kind == "folded" else ""
        fill = "#fff8c5" if item.kind == "folded" else "#ddf4ff"
        shape = (f'<rect x="{x - BOX_W / 2:.1f}" y="{y - BOX_H / 2:.1f}" width="{BOX_W}" height="{BOX_H}" rx="4" '
                 f'fill="{fill}" stroke="#0969da"{dash}/>')
    return f"<g>{tip}{shape}{text}</g>"


def _e(text: str) -> str:
    return html.escape(text, quote=True)

