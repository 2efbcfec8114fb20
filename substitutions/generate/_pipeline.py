"""`taso-gen generate`: enumerate, fingerprint, pair, prune, prove, witness, write.

Per universe: pass 1 enumerates every graph in worker processes (tasks = first nodes,
results merged in task order) and counts fingerprint keys only, so memory stays small;
pass 2 re-enumerates and keeps the graphs whose key is shared. A second evaluation (other
prime, seed and hash key) confirms each pair. Pairs are then proved in rounds of
increasing size (`_pairs.Rounds`): pruning removes the pairs that smaller proved rules
already imply, each survivor is proved with Z3 under a deterministic resource limit
(rlimit), generalized to a parametric rule where the proof allows, and checked
numerically. One process pool serves every proof of a run. The output is independent of
the worker count.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from multiprocessing.pool import Pool

from tqdm import tqdm

from taso.opspecs import all_specs
from taso.substitutions.generate import _enumerate as en
from taso.substitutions.generate._fingerprint import PRIMES, FieldEvaluator
from taso.substitutions.generate._pair_rules import exactness_of, generalize, pair_rule
from taso.substitutions.generate._pairs import STAGES, Evaluated, Rounds, equal_classes
from taso.substitutions.generate._prove import GENERATE_RLIMIT, SOLVER, instance_scope, prove, widen
from taso.substitutions.generate._universes import select
from taso.substitutions.generate._witness import check_witness, witness_configs
from taso.substitutions.rule import Proof, ProofStatus, Rule, RuleLibrary

GENERATOR_VERSION = "1"
REPORTED = ("enumerated", "fingerprint buckets", "fingerprint pairs", "candidate pairs", *STAGES,
            "proved", "refuted", "timeout", "unknown", "numerically rejected")
"""Stages always counted, even when nothing reaches them."""


@dataclass(frozen=True)
class Settings:
    max_ops: int = 3
    ops: tuple[str, ...] = ()
    workers: int = 1
    rlimit: int = GENERATE_RLIMIT  # Z3 resource limit per proof: deterministic, unlike time
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
                      ) -> list[list[Evaluated]]:
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
            group.append(Evaluated(g, k, confirm, digests))
        buckets.append(group)
    return buckets


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
        result = widen(rule, result, rlimit=rlimit)
    witness = check_witness(rule) if result.status is ProofStatus.PROVED else None
    status = result.status
    if witness is not None and not witness.ok:
        status = ProofStatus.REFUTED
    proof = Proof(status, "axioms", SOLVER, 0.0, result.axioms_used,
                  witness.configs if witness else 0, result.scope)
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


def check_rules(rules: list[Rule], rlimit: int, pool: Pool | None, desc: str
                ) -> Iterable[Rule]:
    """Each rule checked (`_check_rule`), in order, in ``pool`` when there is one."""
    items = [(r, rlimit) for r in rules]
    bar = dict(desc=desc, total=len(items), file=sys.stderr, leave=False, mininterval=1.0)
    if pool is None:
        yield from tqdm(map(_check_rule, items), **bar)
    else:
        yield from tqdm(pool.imap(_check_rule, items, chunksize=4), **bar)


@contextlib.contextmanager
def _proof_pool(settings: Settings) -> Iterator[Pool | None]:
    """One pool for every proof of a run, so each worker builds its axiom instances once."""
    if settings.workers <= 1:
        yield None
        return
    with multiprocessing.get_context("fork").Pool(settings.workers) as pool:
        yield pool


def _prove_round(rounds: Rounds, size: int, width: int, settings: Settings,
                 pool: Pool | None, counts: Counter) -> list[Rule]:
    """Prove the pairs of one round (`Rounds.schedule`); the proved rules."""
    universe = rounds.universe
    pairs = rounds.pairs(size, width, counts)
    candidates = [_oriented(universe, p.rep, p.member, p.text) for p in pairs]
    proved, proved_pairs = [], []
    for pair, rule in zip(pairs, check_rules(candidates, settings.rlimit, pool,
                                             f"{universe.name}: prove {size}-op/{width}"), strict=True):
        counts[rule.proof.status.value] += 1
        if "witness_failure" in dict(rule.provenance):
            counts["numerically rejected"] += 1
        if rule.proof.status is ProofStatus.PROVED:
            proved.append(rule)
            proved_pairs.append(pair)
    rounds.learn(proved_pairs)
    return proved


def generate(settings: Settings, *, universes: tuple[en.Universe, ...] | None = None
             ) -> tuple[RuleLibrary, Counter]:
    """Run the whole pipeline over ``universes`` (default: TASO's, restricted to
    ``settings.ops``); returns the library of proved rules and the stage counts."""
    counts: Counter = Counter({stage: 0 for stage in REPORTED})
    rules: list[Rule] = []
    with _proof_pool(settings) as pool:
        for universe in universes or select(settings.ops or None):
            buckets = enumerate_buckets(universe, settings, counts)
            rounds = Rounds(universe, equal_classes(buckets, counts))
            del buckets
            for size, width in rounds.schedule(settings.max_ops):
                rules += _prove_round(rounds, size, width, settings, pool, counts)
    rules.sort(key=lambda r: r.id)
    provenance = (("generator_version", GENERATOR_VERSION), ("spec_set_hash", spec_set_hash()),
                  ("seed", settings.seed), ("settings", _settings_dict(settings)),
                  ("stage_counts", dict(sorted(counts.items()))))
    return RuleLibrary(tuple(rules), provenance), counts


def generate_library(settings: Settings, *, with_axioms: bool = True,
                     universes: tuple[en.Universe, ...] | None = None
                     ) -> tuple[RuleLibrary, Counter]:
    """Generated rules plus (optionally) the axiom-derived rules that pass their witness."""
    library, counts = generate(settings, universes=universes)
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
    from taso.substitutions.generate._axiom_rules import axiom_rules
    from taso.substitutions.generate._converter_rules import converter_rules

    out = []
    for rule in axiom_rules():
        witness = check_witness(rule)
        counts["axiom rules"] += 1
        if not witness.ok:
            counts["axiom rules numerically rejected"] += 1
            continue
        proof = replace(rule.proof, solver=SOLVER, witness_configs=witness.configs,
                        scope=instance_scope(rule))
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
