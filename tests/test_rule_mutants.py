"""Wrong rules are refuted with a counterexample (issue 19, item 2).

The corpus (`benchmarks.rule_mutants`) mutates shipped rules one point at a time
(swapped axes and permutations, wrong constants, dropped epsilon, wrong pads and strides,
wrong broadcast, swapped operands, a similar op, exchanged outputs); each mutant is wrong
at its original's witness configuration but carries no witness itself. `verify_rule` must
refute every one with a ready-to-run counterexample, and prove none. Refutation times
are measured by `python -m benchmarks.rule_mutants`, not asserted here.
"""

from __future__ import annotations

import pytest

from benchmarks.rule_mutants import MUTATIONS, RLIMIT, fast_subset, mutant_corpus
from taso.substitutions.generate._verify import RuleCheck, Verdict, verify_rule
from taso.substitutions.rule import ProofStatus, Rule

FAST_RLIMIT = 100_000  # the prover only has to fail; the refuter decides


def _check(mutant: Rule, rlimit: int) -> RuleCheck:
    check = verify_rule(mutant, rlimit=rlimit)
    assert check.verdict is Verdict.REFUTED, (mutant.id, check.detail)
    assert check.counterexample and check.refuted_by in ("numeric", "z3"), check
    assert check.status is not ProofStatus.PROVED, check  # the prover's own answer
    return check


def test_the_corpus_is_large_and_varied() -> None:
    corpus = mutant_corpus()
    assert len(corpus) >= 100
    assert len({m.id for m in corpus}) == len(corpus)
    kinds = {dict(m.provenance)["mutation"].split(":")[0] for m in corpus}
    assert kinds == set(MUTATIONS)
    assert all("witness" not in dict(m.provenance) for m in corpus)


@pytest.mark.parametrize("mutant", fast_subset(mutant_corpus()), ids=lambda m: m.id)
def test_mutant_is_refuted(mutant: Rule) -> None:
    _check(mutant, FAST_RLIMIT)


@pytest.mark.slow
def test_every_mutant_is_refuted_and_none_proved() -> None:
    checks = [verify_rule(m, rlimit=RLIMIT) for m in mutant_corpus()]
    wrong = [(c.rule, c.verdict.value, c.detail) for c in checks
             if c.verdict is not Verdict.REFUTED or not c.counterexample]
    assert wrong == []
    assert not any(c.status is ProofStatus.PROVED for c in checks)
