"""`taso-gen verify`: re-prove every rule of a rule file and re-run its numeric witness."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from taso.substitutions.generate._prove import DEFAULT_RLIMIT, prove
from taso.substitutions.generate._witness import check_witness, witness_configs
from taso.substitutions.rule import ProofStatus, Rule


@dataclass(frozen=True)
class RuleCheck:
    rule: str
    status: ProofStatus
    witness_ok: bool
    seconds: float
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status is ProofStatus.PROVED and self.witness_ok


def verify_rule(rule: Rule, *, rlimit: int = DEFAULT_RLIMIT) -> RuleCheck:
    configs = witness_configs(rule)
    first = configs[0] if configs else {}
    shapes = {k: tuple(v) for k, v in first.get("shapes", {}).items()} or None
    bindings = {k: tuple(v) if isinstance(v, list) else v
                for k, v in first.get("bindings", {}).items()}
    if rule.proof.method == "axiom":
        return _verify_instance(rule)
    general = "parametric" in dict(rule.provenance)
    result = prove(rule, rlimit=rlimit, shapes=None if general else shapes,
                   bindings={} if general else bindings)
    witness = check_witness(rule)
    detail = result.detail or ("" if witness.ok else f"{witness.detail}\n{witness.reproducer}")
    return RuleCheck(rule.id, result.status, witness.ok, result.seconds, detail)


def _verify_instance(rule: Rule) -> RuleCheck:
    """An axiom-instance rule is proved when the named axiom (validated numerically and
    symbolically by its own checks) regenerates exactly this rule; its witness is re-run."""
    from taso.substitutions.generate._axiom_bank import find_axiom
    from taso.substitutions.generate._axiom_rules import rules_from_axiom
    from taso.substitutions.rule import rule_to_json

    name = dict(rule.provenance).get("axiom", "")
    try:
        regenerated = {r.id: r for r in rules_from_axiom(find_axiom(name))}
    except StopIteration:
        return RuleCheck(rule.id, ProofStatus.REFUTED, False, 0.0, f"no axiom {name!r}")
    again = regenerated.get(rule.id)
    same = again is not None and _body(rule_to_json(again)) == _body(rule_to_json(rule))
    witness = check_witness(rule)
    status = ProofStatus.PROVED if same else ProofStatus.REFUTED
    detail = "" if same else f"not an instance of axiom {name!r}"
    return RuleCheck(rule.id, status, witness.ok, 0.0, detail or witness.detail)


def _body(data: dict) -> str:
    keys = ("inputs", "source", "target", "outputs", "constraints")
    return json.dumps([data[k] for k in keys], sort_keys=True)


def summary(checks: list[RuleCheck]) -> dict:
    counts = Counter(c.status.value for c in checks)
    return {"rules": len(checks), "ok": sum(c.ok for c in checks),
            "witness_failed": sum(not c.witness_ok for c in checks), **dict(sorted(counts.items()))}


def checks_json(checks: list[RuleCheck]) -> str:
    return json.dumps({"totals": summary(checks),
                       "rules": [{"id": c.rule, "status": c.status.value, "witness": c.witness_ok,
                                  "seconds": round(c.seconds, 3), "detail": c.detail}
                                 for c in checks]}, indent=1)
