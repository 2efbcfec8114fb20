"""`taso-gen generate`: enumerate, fingerprint, pair, prune, prove, witness, write.

Per universe: pass 1 enumerates every graph in worker processes (tasks = first nodes,
results merged in task order) and counts fingerprint keys only, so memory stays small;
pass 2 re-enumerates and keeps the graphs whose key is shared. A second evaluation (other
prime, seed and hash key) confirms each pair, pruning removes redundant pairs, each
survivor is proved with Z3 under a deterministic resource limit (rlimit), generalized to a parametric rule where the
proof allows, and checked numerically. The output is independent of the worker count.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from tqdm import tqdm

from taso.opspecs import all_specs
from taso.substitutions import _enumerate as en
from taso.substitutions._fingerprint import PRIMES, FieldEvaluator
from taso.substitutions._gen_rules import exactness_of, generalize, pair_rule
from taso.substitutions._gen_universes import select
from taso.substitutions._prove import DEFAULT_RLIMIT, SOLVER, prove
from taso.substitutions._prune import canonical_pair, has_common_subgraph, has_common_supergraph
from taso.substitutions._witness import check_witness, witness_configs
from taso.substitutions.rule import Proof, ProofStatus, Rule, RuleLibrary

GENERATOR_VERSION = "1"


@dataclass(frozen=True)
class Settings:
    max_ops: int = 3
    ops: tuple[str, ...] = ()
    workers: int = 1
    rlimit: int = DEFAULT_RLIMIT  # Z3 resource limit per proof: deterministic, unlike time
    seed: int = 0


def spec_set_hash() -> str:
    text = "|".join(f"{s.name}:{s.math}:{[p.name for p in s.params]}" for s in all_specs())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ----- worker side ----------------------------------------------------------------------

_WORKER: dict = {}


def _init(universe: en.Universe, settings: Settings, hot: frozenset[bytes] | None) -> None:
    ev = FieldEvaluator(PRIMES[0], settings.seed)
    state = en.initial_state(universe, ev, settings.seed)
    choices = en.op_choices(universe)
    _WORKER.update(state=state, choices=choices, firsts=list(en.candidate_nodes(state, choices)),
                   settings=settings, hot=hot)


def _task_keys(index: int) -> list[bytes]:
    w = _WORKER
    return [key for _, key in en.enumerate_task(w["state"], w["firsts"][index],
                                                 w["settings"].max_ops, w["choices"])]


def _task_hot(index: int) -> list[tuple[bytes, en.Graph]]:
    w = _WORKER
    return [(key, g) for g, key in en.enumerate_task(w["state"], w["firsts"][index],
                                                      w["settings"].max_ops, w["choices"])
            if key in w["hot"]]


def _pool_map(fn: Callable, items: list, settings: Settings, initargs: tuple,
              desc: str) -> Iterator:
    bar = dict(desc=desc, total=len(items), file=sys.stderr, leave=False, mininterval=1.0)
    if settings.workers <= 1:
        _init(*initargs)
        yield from tqdm(map(fn, items), **bar)
        return
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(settings.workers, initializer=_init, initargs=initargs) as pool:
        yield from tqdm(pool.imap(fn, items, chunksize=1), **bar)


# ----- pipeline -------------------------------------------------------------------------


@dataclass
class _Evaluated:
    graph: en.Graph
    key: bytes
    confirm: bytes
    digests: dict[int, bytes]


def _evaluate(universe: en.Universe, graph: en.Graph, ev: FieldEvaluator, seed: int
              ) -> tuple[bytes, dict[int, bytes]]:
    state = en.initial_state(universe, ev, seed)
    for node in graph.nodes:
        checked = en._check(state, en.spec_by_name(node.op), node.key, dict(node.params),
                            node.inputs)
        en.push(state, node, checked)
    digests = {i: t.digest for i, t in enumerate(state.tensors)}
    outs = sorted(graph.outputs, key=lambda i: digests[i])
    return b"".join(digests[i] for i in outs), digests


def _leaf_graphs(universe: en.Universe) -> list[en.Graph]:
    return [en.Graph((), (i,)) for i, leaf in enumerate(universe.leaves)
            if leaf.role is en.Role.ACTIVATION and not leaf.op]


def enumerate_buckets(universe: en.Universe, settings: Settings, counts: Counter
                      ) -> list[list[_Evaluated]]:
    _init(universe, settings, None)
    tasks = list(range(len(_WORKER["firsts"])))
    keys: Counter = Counter()
    ev1 = FieldEvaluator(PRIMES[0], settings.seed)
    leaf_keys = [_evaluate(universe, g, ev1, settings.seed)[0] for g in _leaf_graphs(universe)]
    keys.update(leaf_keys)
    for batch in _pool_map(_task_keys, tasks, settings, (universe, settings, None),
                           f"{universe.name}: enumerate"):
        keys.update(batch)
    counts["enumerated"] += sum(keys.values()) - len(leaf_keys)
    counts["fingerprint buckets"] += len(keys)
    hot = frozenset(k for k, n in keys.items() if n > 1)
    members: dict[bytes, list[en.Graph]] = {}
    for g, k in zip(_leaf_graphs(universe), leaf_keys, strict=True):
        if k in hot:
            members.setdefault(k, []).append(g)
    for batch in _pool_map(_task_hot, tasks, settings, (universe, settings, hot),
                           f"{universe.name}: collect"):
        for k, g in batch:
            members.setdefault(k, []).append(g)
    ev2 = FieldEvaluator(PRIMES[1], settings.seed + 1)
    buckets = []
    for k in sorted(members):
        group = []
        for g in members[k]:
            _, digests = _evaluate(universe, g, ev1, settings.seed)
            confirm, _ = _evaluate(universe, g, ev2, settings.seed + 1)
            group.append(_Evaluated(g, k, confirm, digests))
        buckets.append(group)
    return buckets


def candidate_pairs(universe: en.Universe, buckets: list[list[_Evaluated]], counts: Counter
                    ) -> list[tuple[en.Graph, en.Graph, str]]:
    """Pairs of equal graphs, pruned. Within a class of graphs equal on both evaluations,
    only the pairs (smallest member, other member) are kept: every other pair a = b follows
    from a = r and b = r by transitivity, so it adds nothing a search could not compose."""
    pairs, seen = [], set()
    leaves = len(universe.leaves)
    for group in buckets:
        counts["fingerprint pairs"] += len(group) * (len(group) - 1) // 2
        classes: dict[bytes, list[_Evaluated]] = {}
        for member in group:
            classes.setdefault(member.confirm, []).append(member)
        for members in classes.values():
            counts["candidate pairs"] += len(members) * (len(members) - 1) // 2
            ordered = sorted(members, key=lambda m: len(m.graph.nodes))
            for a, b in ((ordered[0], other) for other in ordered[1:]):
                counts["after transitivity"] += 1
                if has_common_subgraph(universe, a.graph, b.graph):
                    continue
                counts["after common subgraph"] += 1
                if has_common_supergraph(a.graph, b.graph, a.digests, b.digests, leaves):
                    continue
                counts["after common supergraph"] += 1
                text = canonical_pair(universe, a.graph, b.graph)
                if text in seen:
                    continue
                seen.add(text)
                counts["after renaming"] += 1
                pairs.append((a.graph, b.graph, text))
    return pairs


def _oriented(universe: en.Universe, a: en.Graph, b: en.Graph, text: str) -> Rule:
    if not a.nodes:
        a, b = b, a
    return pair_rule(universe, a, b, text)


def _check_rule(args: tuple[Rule, int]) -> Rule:
    """Prove, try to generalize, witness: the rule with its proof record (worker side)."""
    rule, rlimit = args
    config = witness_configs(rule)[0]
    shapes = {k: tuple(v) for k, v in config["shapes"].items()}
    result = prove(rule, rlimit=rlimit, shapes=shapes)
    if result.status is ProofStatus.PROVED:
        general = generalize(rule)
        if general is not None:
            better, bindings = general
            again = prove(better, rlimit=rlimit)
            if again.status is ProofStatus.PROVED:
                rule, result = _with_bindings(better, bindings), again
    witness = check_witness(rule) if result.status is ProofStatus.PROVED else None
    status = result.status
    if witness is not None and not witness.ok:
        status = ProofStatus.REFUTED
    proof = Proof(status, "axioms", SOLVER, 0.0, result.axioms_used,
                  witness.configs if witness else 0)
    extra = (("witness_failure", witness.detail),) if witness and not witness.ok else ()
    return replace(rule, proof=proof, exactness=exactness_of(result.axioms_used),
                   provenance=tuple(sorted((*rule.provenance, *extra))))


def _with_bindings(rule: Rule, bindings: dict) -> Rule:
    prov = dict(rule.provenance)
    configs = json.loads(prov["witness"])
    for c in configs:
        c["bindings"] = {k: list(v) if isinstance(v, tuple) else v for k, v in bindings.items()}
    prov["witness"] = json.dumps(configs, sort_keys=True)
    prov["parametric"] = ",".join(sorted(bindings))
    return replace(rule, provenance=tuple(sorted(prov.items())))


def check_rules(rules: list[Rule], settings: Settings, desc: str) -> Iterable[Rule]:
    items = [(r, settings.rlimit) for r in rules]
    if settings.workers <= 1:
        yield from tqdm(map(_check_rule, items), desc=desc, total=len(items), file=sys.stderr,
                        leave=False)
        return
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(settings.workers) as pool:
        yield from tqdm(pool.imap(_check_rule, items, chunksize=4), desc=desc,
                        total=len(items), file=sys.stderr, leave=False)


def generate(settings: Settings) -> tuple[RuleLibrary, Counter]:
    """Run the whole pipeline; returns the library of proved rules and the stage counts."""
    counts: Counter = Counter()
    rules: list[Rule] = []
    for universe in select(settings.ops or None):
        buckets = enumerate_buckets(universe, settings, counts)
        pairs = candidate_pairs(universe, buckets, counts)
        candidates = [_oriented(universe, a, b, text) for a, b, text in pairs]
        for rule in check_rules(candidates, settings, f"{universe.name}: prove"):
            counts[rule.proof.status.value] += 1
            if "witness_failure" in dict(rule.provenance):
                counts["numerically rejected"] += 1
            if rule.proof.status is ProofStatus.PROVED:
                rules.append(rule)
    rules.sort(key=lambda r: r.id)
    provenance = (("generator_version", GENERATOR_VERSION), ("spec_set_hash", spec_set_hash()),
                  ("seed", settings.seed), ("settings", _settings_dict(settings)),
                  ("stage_counts", dict(sorted(counts.items()))))
    return RuleLibrary(tuple(rules), provenance), counts


def generate_library(settings: Settings, *, with_axioms: bool = True
                     ) -> tuple[RuleLibrary, Counter]:
    """Generated rules plus (optionally) the axiom-derived rules that pass their witness."""
    library, counts = generate(settings)
    rules = list(library.rules)
    if with_axioms:
        rules += hand_rules(settings.rlimit, counts)
    rules = dedupe(rules)
    rules.sort(key=lambda r: r.id)
    provenance = dict(library.provenance)
    provenance["stage_counts"] = dict(sorted(counts.items()))
    return RuleLibrary(tuple(rules), tuple(sorted(provenance.items()))), counts


def hand_rules(rlimit: int, counts: Counter) -> list[Rule]:
    """Axiom-instance rules that pass their witness, plus the Z3-proved converter forms."""
    from taso.substitutions._axiom_rules import axiom_rules
    from taso.substitutions._gen_derived import converter_rules

    out = []
    for rule in axiom_rules():
        witness = check_witness(rule)
        counts["axiom rules"] += 1
        if not witness.ok:
            counts["axiom rules numerically rejected"] += 1
            continue
        proof = replace(rule.proof, solver=SOLVER, witness_configs=witness.configs)
        out.append(replace(rule, proof=proof))
    return out + converter_rules(rlimit, counts)


def dedupe(rules: list[Rule]) -> list[Rule]:
    """One rule per (source, target, outputs, constraints): the smallest id wins."""
    from taso.substitutions.rule import rule_to_json

    seen: dict[str, Rule] = {}
    for rule in sorted(rules, key=lambda r: r.id):
        body = rule_to_json(rule)
        key = json.dumps([body[k] for k in ("inputs", "source", "target", "outputs",
                                            "constraints")], sort_keys=True)
        seen.setdefault(key, rule)
    return list(seen.values())


def _settings_dict(settings: Settings) -> dict:
    """Settings that affect the output (not the worker count)."""
    return {"max_ops": settings.max_ops, "ops": list(settings.ops),
            "rlimit": settings.rlimit}
