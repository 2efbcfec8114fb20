"""`taso-gen merge`: one shipped library from several generation runs plus the hand rules.

Each input file's enumerated rules are re-proved under the deterministic resource limit
(a rule that no longer proves is dropped and counted) and tagged with the run they came
from (``run``: the file's settings), so provenance survives the merge. The axiom-instance
and converter-form rules are rebuilt from the current axioms, duplicates are removed, and
the file-level provenance lists every run with its stage counts.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

from taso.substitutions.generate._pipeline import (
    GENERATOR_VERSION,
    dedupe,
    hand_rules,
    spec_set_hash,
)
from taso.substitutions.generate._verify import verify_rule
from taso.substitutions.generate._witness import guarded
from taso.substitutions.rule import ProofStatus, Rule, RuleLibrary, load_rules


def _run_label(library: RuleLibrary) -> str:
    prov = dict(library.provenance)
    return json.dumps({"settings": prov.get("settings"), "seed": prov.get("seed")},
                      sort_keys=True)


def _tagged(rule: Rule, label: str) -> Rule:
    prov = dict(rule.provenance)
    prov.setdefault("run", label)
    return replace(rule, provenance=tuple(sorted(prov.items())))


def merge(paths: list[Path], rlimit: int) -> tuple[RuleLibrary, Counter]:
    counts: Counter = Counter()
    rules: list[Rule] = []
    runs = []
    for path in paths:
        library = load_rules(path)
        label = _run_label(library)
        runs.append({"file": path.name, "run": json.loads(label),
                     "stage_counts": dict(library.provenance).get("stage_counts")})
        for rule in library.rules:
            if dict(rule.provenance).get("method") != "enumeration":
                continue
            counts["enumerated rules read"] += 1
            check = verify_rule(rule, rlimit=rlimit)
            if not check.ok:
                counts[f"enumerated rules dropped ({check.status.value})"] += 1
                continue
            rules.append(_tagged(replace(rule, proof=replace(rule.proof, scope=check.scope)), label))
    rules += hand_rules(rlimit, counts)
    rules = sorted((guarded(r) for r in dedupe(rules)), key=lambda r: r.id)
    counts["shipped"] = len(rules)
    assert all(r.proof.status is ProofStatus.PROVED for r in rules)
    provenance = (("generator_version", GENERATOR_VERSION), ("spec_set_hash", spec_set_hash()),
                  ("runs", runs), ("rlimit", rlimit),
                  ("stage_counts", dict(sorted(counts.items()))))
    return RuleLibrary(tuple(rules), provenance), counts
