"""Converter-form rules (`_converter_forms.CONVERTER_FORMS`) as proved, witnessed `Rule`s.

Each form becomes one rule, source -> target: parametric where its builders only pass
parameters through (Conv strides/pads/dilations/group, BatchNorm epsilon), otherwise one
rule per config. Unlike axiom-instance rules, each is **proved by Z3 from the axiom bank**
(method ``z3``) within the resource limit, and checked numerically on its configs; a rule
that is not proved or fails its witness is reported in the counts and not returned.
Per-channel and scalar folds use shape-guarded axioms, so they are proved at each witness
config's shapes and parameters (`prove_rule`): their scope is the listed shapes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from taso.opspecs.axioms import Axiom
from taso.substitutions.generate._axiom_rules import _consistent, _params, _rule, _terms, _witness
from taso.substitutions.generate._converter_forms import CONVERTER_FORMS, FORM_CONSTRAINTS
from taso.substitutions.generate._pair_rules import exactness_of
from taso.substitutions.generate._prove import SOLVER, prove_rule
from taso.substitutions.generate._witness import check_witness, guarded
from taso.substitutions.rule import Proof, ProofStatus, Rule


def _candidates(form: Axiom) -> list[Rule]:
    constraints = FORM_CONSTRAINTS.get(form.name, ())
    sides = _terms(form, _params(form))
    if sides is not None and _consistent(form, *sides):
        try:
            rule = _rule(form, *sides, "", _witness(form, bind=True), constraints)
        except TypeError:
            rule = None
        if rule is not None:
            names = sorted(_params(form))
            return [_mark(rule, parametric=",".join(names))] if names else [_mark(rule)]
    out = []
    for index, config in enumerate(form.configs):
        lhs, rhs = form.terms(config)
        rule = _rule(form, lhs, rhs, f"-c{index}", [_witness(form, bind=False)[index]],
                     constraints)
        if rule is not None:
            out.append(_mark(rule))
    return out


def _mark(rule: Rule, parametric: str = "") -> Rule:
    prov = {k: v for k, v in rule.provenance if k != "axiom"}
    prov.update(method="converter-form", form=rule.id.removeprefix("ax-"))
    if parametric:
        prov["parametric"] = parametric
    return replace(rule, id="cv-" + rule.id.removeprefix("ax-"),
                   provenance=tuple(sorted(prov.items())))


def converter_rules(rlimit: int, counts: Counter) -> list[Rule]:
    """Every converter form that Z3 proves and whose witness passes."""
    out = []
    for form in CONVERTER_FORMS:
        for rule in _candidates(form):
            counts["converter forms"] += 1
            result = prove_rule(rule, rlimit=rlimit)
            counts[f"converter forms {result.status.value}"] += 1
            if result.status is not ProofStatus.PROVED:
                continue
            witness = check_witness(rule)
            if not witness.ok:
                counts["converter forms numerically rejected"] += 1
                continue
            proof = Proof(ProofStatus.PROVED, "z3", SOLVER, 0.0, result.axioms_used,
                          witness.configs, result.scope)
            out.append(guarded(replace(rule, proof=proof, exactness=exactness_of(result.axioms_used))))
    return out
