"""`taso-gen verify`: re-prove every rule of a rule file and re-run its numeric witness."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from taso.substitutions._prove import prove
from taso.substitutions._witness import check_witness, witness_configs
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


def verify_rule(rule: Rule, *, timeout_ms: int) -> RuleCheck:
    configs = witness_configs(rule)
    first = configs[0] if configs else {}
    shapes = {k: tuple(v) for k, v in first.get("shapes", {}).items()} or None
    bindings = {k: tuple(v) if isinstance(v, list) else v
                for k, v in first.get("bindings", {}).items()}
    general = "parametric" in dict(rule.provenance)
    result = prove(rule, timeout_ms=timeout_ms, shapes=None if general else shapes,
                   bindings={} if general else bindings)
    witness = check_witness(rule)
    detail = result.detail or ("" if witness.ok else f"{witness.detail}\n{witness.reproducer}")
    return RuleCheck(rule.id, result.status, witness.ok, result.seconds, detail)


def summary(checks: list[RuleCheck]) -> dict:
    counts = Counter(c.status.value for c in checks)
    return {"rules": len(checks), "ok": sum(c.ok for c in checks),
            "witness_failed": sum(not c.witness_ok for c in checks), **dict(sorted(counts.items()))}


def checks_json(checks: list[RuleCheck]) -> str:
    return json.dumps({"totals": summary(checks),
                       "rules": [{"id": c.rule, "status": c.status.value, "witness": c.witness_ok,
                                  "seconds": round(c.seconds, 3), "detail": c.detail}
                                 for c in checks]}, indent=1)
