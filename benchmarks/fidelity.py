"""How well does a cost model rank graphs? Spearman correlation, predicted vs measured.

    python -m benchmarks.fidelity MODEL.onnx [--candidates 24] [--shapes ...] [--regions | --analytical]

    python -m benchmarks.fidelity MODEL.onnx --rules [--candidates 24]

Candidates are made from the model in one of two ways. By default, chains of 1-4 random
structure-preserving variant rewrites (`benchmarks._variants`: conv splitting, relu as
max, double relu, identity insertion). With `--rules`, from the shipped proved rules as
the search uses them: each candidate applies a random share of the matches of one or two
random rules (partial sweeps), so candidates differ by whole-model amounts rather than
by one rewrite's fraction of a percent, which end-to-end timing cannot resolve. Each
candidate's cost is predicted the way the search does it, by the search's model (the
kernel cost model, `taso.backends.kernel_cost`; `--regions`: the region-measuring one),
`cost_after` along the chain of rewrites. A graph whose kernels the kernel model had not
all seen is profiled once for them; the report gives the correlation over the graphs
priced from cached kernels alone too. Every candidate is then measured end to end on ORT CPU,
each interleaved with the input graph (spinning off; see `measure_all`), and the
Spearman rank correlation between predicted and measured latency is reported (target >= 0.9).
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchmarks._variants import all_variants
from taso._model_io import load_model
from taso._onnx_import import import_model
from taso.backends import ShapeProfile
from taso.backends._region import extract_region
from taso.backends.graph_cost import AnalyticalCostModel, MeasuredCostModel, UseDefault
from taso.backends.inputs import make_inputs
from taso.backends.kernel_cost import KernelCostModel
from taso.backends.timing import measure_interleaved, measure_latency
from taso.ir import Graph
from taso.pipeline._rewriting import default_rules, make_expand
from taso.search.cost import CostModel
from taso.search.rewrite import Expand, Move, Rewrite, affected_nodes, dangling_values

MIN_CANDIDATES = 20


@dataclass(frozen=True)
class Candidate:
    """A variant graph, the rules that made it, and its predicted cost."""

    graph: Graph
    rules: tuple[str, ...]
    predicted: float
    profiled: bool = False
    """The kernel cost model met kernels it had not seen when it priced this graph, and
    profiled the graph for them (its prediction then rests partly on its own profile)."""


@dataclass(frozen=True)
class FidelityReport:
    candidates: tuple[Candidate, ...]
    measured_ms: tuple[float, ...]
    spearman: float

    def table(self) -> str:
        rows = [f"{'predicted ms':>13} {'measured ms':>12}  rules"]
        for cand, ms in sorted(zip(self.candidates, self.measured_ms, strict=True), key=lambda p: p[1]):
            rows.append(f"{cand.predicted:13.4f} {ms:12.4f}  {' '.join(cand.rules) or '(input)'}")
        rows.append(f"spearman rank correlation: {self.spearman:.3f} over {len(self.candidates)} graphs")
        unseen = [(c.predicted, ms) for c, ms in zip(self.candidates, self.measured_ms, strict=True) if not c.profiled]
        if len(unseen) < len(self.candidates) and len(unseen) > 2:
            rows.append(
                f"spearman over the {len(unseen)} graphs priced from cached kernels alone (never run before "
                f"their prediction): {spearman(*zip(*unseen, strict=True)):.3f}"
            )
        resolvable = self.resolvable()
        rows.append(
            f"spearman over the {len(resolvable)} graphs measured more than {RESOLVABLE:.0%} from the input "
            f"(and the input): {spearman(*zip(*resolvable, strict=True)) if len(resolvable) > 2 else float('nan'):.3f}"
        )
        return "\n".join(rows)

    def resolvable(self) -> list[tuple[float, float]]:
        """(predicted, measured) of the input and of the candidates whose measured latency
        differs from the input's by more than `RESOLVABLE`: the ones timing can rank."""
        base = self.measured_ms[0]
        return [
            (cand.predicted, ms)
            for k, (cand, ms) in enumerate(zip(self.candidates, self.measured_ms, strict=True))
            if k == 0 or abs(ms / base - 1) > RESOLVABLE
        ]


RESOLVABLE = 0.03
"""Candidates within this fraction of the input's latency differ by less than repeated
end-to-end measurements of one graph spread here (2-3%): their order is noise."""


def make_candidates(
    graph: Graph, model: CostModel, *, count: int = 24, seed: int = 0, max_chain: int = 4, expand: Expand | None = None,
) -> list[Candidate]:
    """The input graph plus distinct random candidates, each priced incrementally:
    variant chains, or with `expand` (the rule matcher) partial rule sweeps."""
    rng = random.Random(seed)
    root_cost = model.cost(graph)
    found = [Candidate(graph, (), root_cost)]
    seen = {graph.structural_hash}
    for _ in range(count * 20):
        if len(found) >= count:
            break
        if expand is None:
            current, cost, rules = _variant_chain(graph, root_cost, model, rng, max_chain)
        else:
            current, cost, rules = _partial_sweeps(graph, root_cost, model, rng, expand)
        if current.structural_hash not in seen:
            seen.add(current.structural_hash)
            profiled = getattr(model, "profiled_when_priced", {}).get(current.structural_hash, 0) > 0
            found.append(Candidate(current, tuple(rules), cost, profiled))
    return found


def _variant_chain(
    graph: Graph, cost: float, model: CostModel, rng: random.Random, max_chain: int
) -> tuple[Graph, float, list[str]]:
    current, rules = graph, []
    for _ in range(rng.randint(1, max_chain)):
        options = list(all_variants(current))
        if not options:
            break
        rewrite = rng.choice(options)
        cost = model.cost_after(current, cost, rewrite)
        current, rules = rewrite.graph, [*rules, rewrite.rule_id]
    return current, cost, rules


def _partial_sweeps(
    graph: Graph, cost: float, model: CostModel, rng: random.Random, expand: Expand
) -> tuple[Graph, float, list[str]]:
    """A random share of the matches of one or two random rules, priced one by one."""
    current, rules = graph, []
    for _ in range(rng.randint(1, 2)):
        by_rule: dict[str, list[Rewrite]] = {}
        for rewrite in expand(current, None):
            by_rule.setdefault(rewrite.rule_id, []).append(rewrite)
        if not by_rule:
            break
        rule = rng.choice(sorted(by_rule))
        found = by_rule[rule]
        rng.shuffle(found)
        base, touched, applied = current, set[int](), 0
        for rewrite in found[: rng.randint(1, len(found))]:
            moved = Move.of(base, rewrite).rebase(current) if rewrite.removed.isdisjoint(touched) else None
            if moved is None or dangling_values(current, moved):
                continue
            touched |= rewrite.removed | affected_nodes(current, moved.graph, moved)
            cost = model.cost_after(current, cost, moved)
            current, applied = moved.graph, applied + 1
        rules.append(f"{rule} x{applied}")
    return current, cost, rules


def measure_all(graphs: Sequence[Graph], *, shapes_of: object, repeats: int = 60, threads: int = 2) -> list[float]:
    """End-to-end latency of each graph, as a paired ratio to the first graph.

    Each graph is timed interleaved with `graphs[0]` (spinning off, order alternating),
    and reported as `median(graphs[0]) * median(per-iteration ratio)`: slow drifts of a
    shared machine's speed cancel out of the ratios.
    """

    models = [extract_region(g, g.nodes, shapes_of).model for g in graphs]  # type: ignore[arg-type]
    feeds = make_inputs(models[0])
    base = measure_latency(models[0], feeds, repeats=repeats, threads=threads).median_ms
    measured = [base]
    for model in models[1:]:
        timing = measure_interleaved(models[0], model, feeds, repeats=repeats, threads=threads)
        measured.append(base * timing.paired_ratio)
    return measured


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def _ranks(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    order = array.argsort(kind="stable")
    ranks = np.empty(len(array))
    ranks[order] = np.arange(len(array), dtype=float)
    for value in np.unique(array):
        tied = array == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def fidelity(
    graph: Graph, model: object, *, count: int = 24, seed: int = 0, repeats: int = 60, expand: Expand | None = None,
) -> FidelityReport:
    """Rank correlation of `model`'s predictions (a MeasuredCostModel or AnalyticalCostModel)."""
    candidates = make_candidates(graph, model, count=count, seed=seed, expand=expand)  # type: ignore[arg-type]
    shapes = model.shapes_for(graph).shape  # type: ignore[attr-defined]
    measured = measure_all([c.graph for c in candidates], shapes_of=shapes, repeats=repeats)
    return FidelityReport(tuple(candidates), tuple(measured), spearman([c.predicted for c in candidates], measured))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fidelity", description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--candidates", type=int, default=24)
    parser.add_argument("--hops", type=int, default=2, help="region radius (regions; kernels beyond 48 MB)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=60, help="interleaved runs per candidate")
    parser.add_argument("--shapes", default=None, help="e.g. input=1x3x224x224,batch=1")
    parser.add_argument("--analytical", action="store_true", help="judge the analytical model instead")
    parser.add_argument("--regions", action="store_true", help="judge the region-measuring model instead")
    parser.add_argument("--no-cache", action="store_true", help="measure every region afresh")
    parser.add_argument("--rules", action="store_true", help="candidates from the shipped proved rules (partial sweeps)")
    args = parser.parse_args(argv)
    graph, model = _setup(args)
    expand = None
    if args.rules:
        expand = make_expand(default_rules())
    report = fidelity(
        graph, model, count=max(args.candidates, MIN_CANDIDATES), seed=args.seed, repeats=args.repeats, expand=expand
    )
    print(report.table())
    records = getattr(model, "records", [])
    if records and hasattr(records[0], "new_kernels"):
        profiled = [r for r in records if r.new_kernels]
        print(
            f"graphs priced: {len(records)}, {len(records) - len(profiled)} entirely from cached kernels, "
            f"{len(profiled)} profiled for {sum(r.new_kernels for r in profiled)} new kernels",
            file=sys.stderr,
        )
    elif records:
        sources = {s: sum(1 for r in records if r.source is s) for s in {r.source for r in records}}
        print("regions priced: " + ", ".join(f"{s.value} {n}" for s, n in sorted(sources.items(), key=lambda p: p[0].value)), file=sys.stderr)
    return 0


def _setup(args: argparse.Namespace) -> tuple[Graph, object]:

    loaded = load_model(args.model)
    graph = import_model(loaded.model, base_dir=loaded.base_dir)
    profile = ShapeProfile.parse(args.shapes) if args.shapes else None
    if args.analytical:
        return graph, AnalyticalCostModel(profile=profile)
    if args.regions:
        cache = None if args.no_cache else MeasuredCostModel(profile=profile).cache
        return graph, MeasuredCostModel(profile=profile, hops=args.hops, cache=cache)

    return graph, KernelCostModel(profile=profile, cache=None if args.no_cache else UseDefault.CACHE, hops=args.hops)


if __name__ == "__main__":
    raise SystemExit(main())
