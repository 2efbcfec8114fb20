"""How the sweep phase judges a candidate against the current graph: the judge's
protocol and verdicts, and the looks that confirm a win or reject a confident prediction
(`taso.search.sweep`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Protocol

from taso.ir import Graph

__all__ = ["CONFIDENT_PREDICTION", "Judge", "Judgement", "confirmed", "confirmed_judgement", "contradicted",
           "is_undecided", "looked_again"]


@dataclass(frozen=True)
class Judgement:
    """A whole-model comparison: how much faster the candidate ran, and whether that counts."""

    speedup: float
    faster: bool
    complete: bool = True
    """False when the deadline cut the judgement short (it then says: not faster)."""
    cached: bool = False
    """True when the verdict was read from a cache rather than measured now."""
    tie_break: bool = False
    """True when two looks disagreed and a third decided: the forward and reverse looks
    (`confirmed`), or a confident prediction's two forward looks (`looked_again`)."""
    evidence: tuple[float, ...] | None = field(default=None, compare=False)
    """What a pooling judge measured: the log ratios log(current / candidate) of the
    order-balanced blocks (positive: the candidate ran faster); empty when the verdict was
    read from a cache. None from a judge that does not pool its confirmations. (Not part of
    the verdict: equal verdicts may rest on different timings.)"""


class Judge(Protocol):
    """Compares two whole graphs end to end (for ORT: run interleaved, see `taso.pipeline._decide`).

    `deadline` (a `time.perf_counter()` value) bounds the time the judgement may take.
    `look` > 0 asks for a fresh judgement of a pair already judged (a tie-break), never the
    verdict of an earlier look at the same pair; judges that keep no verdicts may ignore it.

    `confirm` is passed only to a judge whose verdicts carry `evidence`: a verdict of this
    judge that the candidate is faster. The judge then times the pair the other way round
    (the candidate's session in the current graph's place) and judges both looks'
    evidence together; its verdict says whether the candidate is faster, as any other."""

    def __call__(self, current: Graph, candidate: Graph, deadline: float, *, look: int = 0,
                 confirm: Judgement | None = None) -> Judgement: ...


def confirmed_judgement(judge: Judge, current: Graph, candidate: Graph, deadline: float) -> Judgement:
    """`candidate` judged against `current` as a sweep is: once, and when found faster,
    confirmed (`confirmed`) before the verdict stands."""
    verdict = judge(current, candidate, deadline)
    if verdict.faster and verdict.complete:
        verdict = confirmed(judge, current, candidate, verdict, deadline)
    return verdict


def confirmed(judge: Judge, current: Graph, candidate: Graph, verdict: Judgement, deadline: float) -> Judgement:
    """A sweep the judge finds faster is judged once more, the other way round (fresh
    pairs, the candidate as the current graph), and kept only if that shows it faster
    too. The judge's repeated looks let a few percent of equal pairs through, more on a
    loaded machine: on NasRNN a sweep of ten redundant Relus (`Relu(x) -> Relu(Relu(x))`)
    measured "1.066x"; on BERT (dynamo export) a sweep ORT fuses back into the same
    kernels measured "1.19x" twice while other processes ran, and once kept it hid the
    sweep that really pays (1.09x), since its reverse is a rule already judged. Real gains
    pass both ways; the cost is one more judgement per sweep kept.

    When the two disagree and together still say `TIE_BREAK_SPEEDUP` or more, the reverse
    look is taken once more, afresh, and decides (two looks of three): a noise burst during
    one look should not throw away a real gain (PP-OCRv4 det's 14-site depthwise-affine
    sweep, 1.08x together, failed its reverse look in one benchmark run and was kept in the
    next). Equal pairs rarely pass two looks of three. A forward verdict that already took
    two looks (`looked_again`) gets no further reverse look: the reverse is its third.

    A judge that pools (its verdicts carry `evidence`) is asked to confirm instead: it
    times the pair the other way round and tests both looks' blocks together, which
    needs no tie-break and resolves small gains better than two separate verdicts (see
    `taso.pipeline._decide.MeasuredJudge`)."""
    if verdict.evidence is not None:
        pooled = judge(current, candidate, deadline, confirm=verdict)
        if not pooled.complete:
            return Judgement(verdict.speedup, False, complete=False)
        return replace(pooled, cached=verdict.cached and pooled.cached, tie_break=verdict.tie_break)
    again = judge(candidate, current, deadline)
    if not again.complete:
        return Judgement(verdict.speedup, False, complete=False)
    reverse = [again]
    if not verdict.tie_break and not _reverse_says_faster(again) and _combined(verdict, reverse) >= TIE_BREAK_SPEEDUP:
        tie = judge(candidate, current, deadline, look=1)
        if tie.complete:
            reverse.append(tie)
    faster = _reverse_says_faster(reverse[-1])
    return Judgement(_combined(verdict, reverse), faster, cached=verdict.cached and all(r.cached for r in reverse),
                     tie_break=verdict.tie_break or len(reverse) > 1)


def contradicted(verdict: Judgement, predicted: float) -> bool:
    """The judge measured a sweep not faster that the screen confidently predicted faster."""
    return verdict.complete and not verdict.faster and verdict.speedup > 0 and predicted >= CONFIDENT_PREDICTION


def looked_again(judge: Judge, current: Graph, candidate: Graph, verdict: Judgement, deadline: float) -> Judgement:
    """A sweep the screen predicted `CONFIDENT_PREDICTION` faster but the judge measured
    not faster is judged once more the same way round, afresh; if that look finds it
    faster and the two together (their geometric mean) still say faster, they stand as the
    forward verdict, which the reverse look (`confirmed`) must still confirm: two looks of three.
    Rejecting a confident prediction takes a second look, just as keeping a win takes a
    reverse look. In one benchmark run the sweep judge measured PP-OCRv4 det's HardSwish
    re-form (24 sites, predicted 1.064x) at 0.961x while the machine was loaded and
    rejected it; the run before, the same sweep measured 1.069x, and the model's result
    fell from 1.36x to 1.12x."""
    again = judge(current, candidate, deadline, look=1)
    speedup = math.sqrt(verdict.speedup * again.speedup)
    if not again.complete or not again.faster or speedup <= 1.0:  # together still not faster
        return verdict
    evidence = None if verdict.evidence is None or again.evidence is None else verdict.evidence + again.evidence
    return Judgement(speedup, True, cached=verdict.cached and again.cached, tie_break=True, evidence=evidence)


def is_undecided(verdict: Judgement, predicted: float) -> bool:
    """A sweep judged not faster, against a confident prediction, that still measured
    faster on the whole: judged once more after another sweep was kept, instead of never.
    On PP-OCRv4 det's paddle2onnx 1.x export, the HardSwish re-form (24 sites, predicted
    1.065x) measured 1.039x as the first sweep judged, short of its confirmation, and was
    never judged again; the model's result fell to 1.11x. Judged first in another run, it
    measured 1.085x, and the sweeps it enables took the model to 1.38x."""
    return not verdict.faster and verdict.speedup > 1.0 and predicted >= CONFIDENT_PREDICTION


CONFIDENT_PREDICTION = 1.05
"""A screened prediction this much faster is confident: a judgement against it is looked at again."""

TIE_BREAK_SPEEDUP = 1.05
"""The combined speedup of a forward look that passed and a reverse look that did not,
from which the reverse look is taken once more."""


def _reverse_says_faster(reverse: Judgement) -> bool:
    """A look the other way round (the current graph as the candidate) says the candidate is faster."""
    return 0.0 < reverse.speedup < 1.0


def _combined(forward: Judgement, reverse: list[Judgement]) -> float:
    """The forward speedup and the reverse looks' (inverted), as one geometric mean."""
    if any(r.speedup <= 0 for r in reverse):
        return forward.speedup
    back = math.prod(r.speedup for r in reverse) ** (1 / len(reverse))
    return math.sqrt(forward.speedup / back)
