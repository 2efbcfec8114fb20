"""`taso-gen verify`: re-prove every rule of a rule file, re-run its numeric witness and
look for a counterexample of its own.

Every rule gets a `Verdict`, whatever happens to the others:

1. `ILL_TYPED` when its source or target does not type-check on a witness config
   (the specs' shape inference refuses an operator's inputs or parameters);
2. `REFUTED` when the witness finds inputs where source and target differ, or the
   refuter (`_refute`: configurations it draws from the rule's constraints, numeric
   search, then element-wise Z3) finds some, even where the prover claimed a proof (the
   counterexample is a ready-to-run reproducer); or when the prover refutes it;
3. `PROVED` when the prover proves it and the witness agrees, with the proof's `Scope`
   (any shape, or the witness configs' shapes: `_prove.prove_rule`);
4. `UNKNOWN` otherwise (the prover ran out of its resource limit, the witness is
   missing or could not be evaluated).

Proof and refutation times are measured with `time.perf_counter` around each.
"""

from __future__ import annotations

import enum
import json
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from taso.opspecs import ShapeError
from taso.substitutions.generate._axiom_bank import find_axiom
from taso.substitutions.generate._axiom_rules import rules_from_axiom
from taso.substitutions.generate._prove import DEFAULT_RLIMIT, General, instance_scope, prove_rule
from taso.substitutions.generate._refute import Refutation, refute
from taso.substitutions.generate._witness import (
    WitnessOutcome,
    check_witness,
    type_error,
)
from taso.substitutions.rule import ProofStatus, Rule, Scope, rule_to_json


class Verdict(enum.Enum):
    PROVED = "proved"
    REFUTED = "refuted"  # with a counterexample where the witness found one
    UNKNOWN = "unknown"
    ILL_TYPED = "ill-typed"


@dataclass(frozen=True)
class _Proof:
    status: ProofStatus
    seconds: float
    detail: str = ""
    scope: Scope = Scope.LISTED_SHAPES


@dataclass(frozen=True)
class RuleCheck:
    """One rule's verdict; ``status`` is the prover's own answer, ``seconds`` its time."""

    rule: str
    status: ProofStatus
    witness_ok: bool
    seconds: float
    detail: str = ""
    verdict: Verdict = Verdict.UNKNOWN
    counterexample: str = ""  # a Python snippet that re-runs the failing witness
    refuted_by: str = ""  # "witness", "numeric" or "z3": what found the counterexample
    refute_seconds: float = 0.0  # the refuter's time
    scope: Scope = Scope.LISTED_SHAPES  # what the proof covers (meaningful when proved)

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.PROVED


def verify_rule(rule: Rule, *, rlimit: int = DEFAULT_RLIMIT) -> RuleCheck:
    """The rule's verdict; never raises for a bad rule (see the module docstring)."""
    problem = type_error(rule)
    if problem:
        return RuleCheck(rule.id, ProofStatus.UNCHECKED, False, 0.0, problem, Verdict.ILL_TYPED)
    start = time.perf_counter()
    refutation = _refute(rule)
    refute_seconds = time.perf_counter() - start
    try:
        proof = _prove(rule, rlimit)
        witness = check_witness(rule)
    except Exception as err:  # noqa: BLE001 - one rule's failure must not stop the file
        # a counterexample at the refuter's own config outweighs a shape the prover's or
        # the witness's configs could not type (a parameter none of them binds)
        if refutation is not None:
            detail = f"verification failed: {type(err).__name__}: {err}"
            return RuleCheck(rule.id, ProofStatus.UNCHECKED, False, 0.0, detail, Verdict.REFUTED,
                             refutation.reproducer, refutation.method.value, refute_seconds)
        if isinstance(err, ShapeError):  # a shape the witness configs did not reach
            return RuleCheck(rule.id, ProofStatus.UNCHECKED, False, 0.0, str(err), Verdict.ILL_TYPED)
        detail = f"verification failed: {type(err).__name__}: {err}"
        return RuleCheck(rule.id, ProofStatus.UNCHECKED, False, 0.0, detail, Verdict.UNKNOWN,
                         refute_seconds=refute_seconds)
    verdict = _verdict(proof.status, witness.outcome, refutation)
    said = f"prover: {proof.status.value}" + (f" ({proof.detail})" if proof.detail else "")
    found = f"counterexample ({refutation.method.value}): {refutation.detail}" if refutation else ""
    detail = "; ".join(d for d in (said if proof.detail else "", witness.detail, found) if d)
    if verdict is Verdict.REFUTED and proof.status is ProofStatus.PROVED:
        detail += " (the prover claimed a proof)"
    counterexample, refuted_by = "", ""
    if witness.outcome is WitnessOutcome.DIFFER:
        counterexample, refuted_by = witness.reproducer, "witness"
    elif refutation is not None:
        counterexample, refuted_by = refutation.reproducer, refutation.method.value
    return RuleCheck(rule.id, proof.status, witness.ok, proof.seconds, detail, verdict,
                     counterexample, refuted_by, refute_seconds, proof.scope)


def _refute(rule: Rule) -> Refutation | None:
    try:
        return refute(rule)
    except Exception:  # noqa: BLE001 - a refuter failure leaves the verdict to the prover
        return None


def _verdict(proof: ProofStatus, witness: WitnessOutcome,
             refutation: Refutation | None) -> Verdict:
    if witness is WitnessOutcome.DIFFER or refutation is not None or proof is ProofStatus.REFUTED:
        return Verdict.REFUTED
    if proof is ProofStatus.PROVED and witness is WitnessOutcome.AGREE:
        return Verdict.PROVED
    return Verdict.UNKNOWN


def _prove(rule: Rule, rlimit: int) -> _Proof:
    if rule.proof.method == "axiom":
        return _prove_instance(rule)
    # the general attempt only where the file claims a proof for any shape (to check that
    # claim); elsewhere it ran to its limit on every verify (14 min for the library)
    general = General.TRY if rule.proof.scope is Scope.ANY_SHAPE else General.SKIP
    result = prove_rule(rule, rlimit=rlimit, general=general)
    return _Proof(result.status, result.seconds, result.detail, result.scope)


def _prove_instance(rule: Rule) -> _Proof:
    """An axiom-instance rule is proved when the named axiom (validated numerically and
    symbolically by its own checks) regenerates exactly this rule."""
    start = time.perf_counter()
    name = dict(rule.provenance).get("axiom", "")
    try:
        regenerated = {r.id: r for r in rules_from_axiom(find_axiom(name))}
    except StopIteration:
        return _Proof(ProofStatus.REFUTED, time.perf_counter() - start, f"no axiom {name!r}")
    again = regenerated.get(rule.id)
    same = again is not None and _body(rule_to_json(again)) == _body(rule_to_json(rule))
    seconds = time.perf_counter() - start
    if same:
        return _Proof(ProofStatus.PROVED, seconds, scope=instance_scope(rule))
    return _Proof(ProofStatus.REFUTED, seconds, f"not an instance of axiom {name!r}")


def _body(data: dict) -> str:
    keys = ("inputs", "source", "target", "outputs", "constraints")
    return json.dumps([data[k] for k in keys], sort_keys=True)


def summary(checks: list[RuleCheck]) -> dict:
    """Rule count, proved (``ok``), witness failures, the count of each verdict, the proved
    rules by scope, the total proof time, its p50/p99/max per rule and the total
    refutation time in seconds."""
    counts = Counter(c.verdict.value for c in checks)
    scopes = Counter(c.scope.value for c in checks if c.ok)
    times = [c.seconds for c in checks] or [0.0]
    return {"rules": len(checks), "ok": sum(c.ok for c in checks),
            "witness_failed": sum(not c.witness_ok for c in checks),
            **{v.value: counts[v.value] for v in Verdict},
            **{f"proved for {s.value}": scopes[s.value] for s in Scope},
            "seconds": round(sum(times), 3),
            **{f"seconds_{name}": round(float(np.percentile(times, q)), 4)
               for name, q in (("p50", 50), ("p99", 99), ("max", 100))},
            "refute_seconds": round(sum(c.refute_seconds for c in checks), 3)}



def check_json(check: RuleCheck) -> dict:
    return {"id": check.rule, "verdict": check.verdict.value, "proof": check.status.value,
            "witness": check.witness_ok, "seconds": round(check.seconds, 6),
            "detail": check.detail, "counterexample": check.counterexample,
            "refuted_by": check.refuted_by, "refute_seconds": round(check.refute_seconds, 6),
            "scope": check.scope.value if check.ok else ""}


def checks_json(checks: list[RuleCheck], **extra: object) -> str:
    return json.dumps({**extra, "totals": summary(checks),
                       "rules": [check_json(c) for c in checks]}, indent=1)

