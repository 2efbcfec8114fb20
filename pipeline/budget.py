"""One call's time budget: a deadline on one clock, and every share cut from it.

    the call (time_budget_s, or by default `default_seconds` of the timed model)
      ├─ load, reference run                      spent before the search starts
      ├─ search: what the rest is expected to leave, at least MIN_SEARCH_SHARE of the call
      │    ├─ main graph, by its share of all nodes (the If/Loop/Scan bodies get the rest)
      │    │    ├─ rule sweeps: at most SWEEP_SHARE
      │    │    └─ backtracking: what is left, less the final judgement's reserve
      │    └─ bodies: each by its size; a body's own nodes before its nested bodies
      └─ export, check, measured decision: expected from the reference run's timing;
         the decision may run DECISION_SLACK of the call past the deadline

`Budget.of` (a limit the caller gave) or `Budget.default()` (none given) is made once per
call (`optimize_onnx`) and passed down; every share is computed here, so no stage splits
the clock itself. A default budget is `DEFAULT_SECONDS` until the reference run has timed
the model; `resolved` then scales it to the model (`default_seconds`), counted from the
same start. A given budget is a hard limit and is never rescaled. Every share remembers
when the call started, so that what a stage found can be timed from it (time-to-best).
The clock is injectable: tests use a fake one and never assert wall-clock times.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

Clock = Callable[[], float]

MIN_SEARCH_SHARE = 0.3
"""The search's least share of the call, when checking and measuring would need it all."""

SWEEP_SHARE = 0.9
"""At most this share of the main graph's search goes to rule sweeps; the backtracking
search gets the rest (and all of it once no sweep is faster). Every measured gain in the
benchmark suite came from a sweep, and a sweep's judgement takes 2-3 s on a 40 ms model:
at 0.6 of a 10 s call, ResNeXt-50's regrouping sweep did not get its turn (at 0.8, on a
machine where it gains only 4%, it still missed it at times)."""

DECISION_SLACK = 0.1
"""The measured decision may take its later looks up to this share of the call past its
deadline. Its first two looks are reserved in the budget, the later ones are not: at the
end of a call the search had spent, a decision one order-balanced block short of significance
(ResNeXt-50's regrouping at 1.125x, YOLOv8n's un-merging at 1.06x: 6 of 7 blocks won)
could not be extended, and a real gain was thrown away."""


SECOND_DECISION_SLACK = 0.1
"""A default budget's decision may run this much more of the call past its deadline, room
for a second decision when the first contradicts the sweeps this call kept
(`_decide.decide_contradicted`): one decision is `DECISION_RUNS` of the
`DEFAULT_JUDGEMENTS * JUDGEMENT_RUNS + DECISION_RUNS` runs a latency-scaled default pays
for, 8%. A given budget stays a hard limit (its slack is `DECISION_SLACK` alone).
That share is less than a slow model's decision with all its looks: on YOLO11n (54 ms,
a 39 s default) 3.9 s against up to 8 s, and a first decision that said "not faster"
against two kept sweeps (1.08x and 1.06x, each confirmed both ways) got no second one; so
the slack is at least the model's longest decision (`Budget.decision_deadline`)."""


DEFAULT_SECONDS = 30.0
"""The default budget before the model is timed, and the least it is scaled to: what a
small, fast model gets. A judgement costs more than its runs: two sessions compiled, the
sweep applied and screened, 1.5-2 s on a 4 ms model. At 10 s, timm EfficientNet-B0 (9 ms,
255 nodes) did not get to its joint sweep (1.05x); at 15 s, a tf2onnx MobileNetV3-Small
export (4 ms, 357 nodes) judged three single sweeps and ran out before the pair its
squeeze-and-excitation blocks need (the GlobalAveragePool form with the upsampled gate:
1.08x in its sweep, 1.32x -> 1.49x for the model, found at 27 s of a 30 s budget).
"""

MAX_DEFAULT_SECONDS = 180.0
"""The most a default budget grows to: a default must still end in minutes. Above it, a
model's sweeps may still be judged partly; `--time-budget` gives more."""

JUDGEMENT_RUNS = 60
"""About how many runs of a model one sweep judgement takes, both models together: two
warm-up pairs and two looks of at least 12 pairs (`taso.pipeline._decide`; a clear loser
ends after one look, a small gain takes up to four)."""

DEFAULT_JUDGEMENTS = 12
"""Sweep judgements a default budget affords. On PP-OCRv4's recognizer and detector the
kernel-cost screen left 1-2 of 10-13 sweeps to be judged in a round; every sweep found
faster is judged again the other way round, and a round that keeps nothing is followed
by joint sweeps: 12 leaves room for a second round and for models where the screen lets
more through.
"""

DECISION_RUNS = 60
"""Runs of the final measured decision, both models: two looks of at least 12 pairs plus
probe and warm-up pairs (`decide_seconds` for the exact count at a given latency)."""

SECONDS_PER_NODE = 0.01
"""What each node adds to a default budget, besides running the model (an estimate, 15 s
for 1,500 nodes): matching every rule over the graph for each sweep round, applying the
sweeps, screening them with the kernel cost model and compiling sessions all grow with
the node count, and the backtracking search has more places to look."""

MIN_JUDGEMENTS = 4
"""Sweeps of a model slower than the judge's fixed limit are judged anyway when the
sweeps' share affords this many judgements: enough for the sweeps the screen predicts
fastest."""


def default_seconds(run_ms: float, nodes: int) -> float:
    """The default budget of a call on a model that runs in `run_ms` and has `nodes` nodes.

    It pays for `DEFAULT_JUDGEMENTS` sweep judgements and the final decision at the
    model's latency, plus `SECONDS_PER_NODE` per node for matching, applying and screening,
    within [`DEFAULT_SECONDS`, `MAX_DEFAULT_SECONDS`]. A 5 ms, 200-node model keeps 30 s; a
    40 ms, 300-node one gets 34 s; the 114 ms, 1,493-node layout model of the benchmark
    issue gets about 104 s, of which the sweeps' share affords its judgements (at 10 s it
    explored nothing: "too slow per run to judge candidates whole").
    """
    runs = DEFAULT_JUDGEMENTS * JUDGEMENT_RUNS + DECISION_RUNS
    wanted = runs * max(run_ms, 0.0) / 1000.0 + SECONDS_PER_NODE * max(nodes, 0)
    return min(MAX_DEFAULT_SECONDS, max(DEFAULT_SECONDS, wanted))


class Limit(enum.Enum):
    """Where a call's budget came from."""

    GIVEN = "given"  # the caller's `time_budget_s`: a hard limit, never rescaled
    DEFAULT = "default"  # none given: scaled to the model once its reference run is timed


@dataclass(frozen=True)
class Budget:
    """`seconds` from `start` on `clock`; shares are Budgets that start when cut and
    remember when the call began (`origin`)."""

    seconds: float
    start: float
    clock: Clock = time.perf_counter
    limit: Limit = Limit.GIVEN
    origin: float | None = None
    """When the call began (None: this budget is the call's, `start`)."""

    @classmethod
    def of(cls, seconds: float, clock: Clock = time.perf_counter) -> Budget:
        """A budget of `seconds` starting now: a hard limit."""
        return cls(max(0.0, seconds), clock(), clock)

    @classmethod
    def default(cls, clock: Clock = time.perf_counter) -> Budget:
        """The budget of a call that gave none, starting now: `DEFAULT_SECONDS` until `resolved`."""
        return cls(DEFAULT_SECONDS, clock(), clock, Limit.DEFAULT)

    def resolved(self, *, run_ms: float, nodes: int) -> Budget:
        """A default budget scaled to a model timed at `run_ms` with `nodes` nodes, from the
        same start (the time spent so far counts); a given budget unchanged."""
        if self.limit is Limit.GIVEN:
            return self
        return replace(self, seconds=default_seconds(run_ms, nodes))

    @property
    def call_start(self) -> float:
        return self.start if self.origin is None else self.origin

    def since_call_start(self, at: float) -> float:
        """Seconds from the start of the call to `at` (a reading of the clock)."""
        return at - self.call_start

    def _share(self, seconds: float) -> Budget:
        """A share from now: a hard limit of its own (only the call's default is rescaled)."""
        return Budget(seconds, self.clock(), self.clock, Limit.GIVEN, self.call_start)

    @property
    def deadline(self) -> float:
        return self.start + self.seconds

    def left(self) -> float:
        return max(0.0, self.deadline - self.clock())

    def elapsed(self) -> float:
        return self.clock() - self.start

    def cut(self, seconds: float) -> Budget:
        """A share of `seconds` from now, never past this budget's deadline."""
        return self._share(max(0.0, min(seconds, self.left())))

    def fraction(self, share: float) -> Budget:
        """`share` of what is left, from now."""
        return self.cut(share * self.left())

    def by_nodes(self, nodes: int, of_nodes: int) -> Budget:
        """The share of what is left that `nodes` of `of_nodes` get."""
        return self.fraction(nodes / max(of_nodes, 1))

    # ----- the named shares --------------------------------------------------------------
    def search(self, expected_after_s: float) -> Budget:
        """The search's share: what is left once the stages after it (`expected_after_s`)
        are set aside, and at least `MIN_SEARCH_SHARE` of the call."""
        if self.seconds == 0:
            return self.cut(0.0)
        seconds = max(self.left() - expected_after_s, MIN_SEARCH_SHARE * self.seconds)
        return self._share(seconds)  # the floor may run past the deadline

    def search_is_floored(self, expected_after_s: float) -> bool:
        """Whether loading, checking and measuring would leave the search under its floor."""
        return self.seconds > 0 and self.left() - expected_after_s < MIN_SEARCH_SHARE * self.seconds

    def sweeps(self) -> Budget:
        return self.fraction(SWEEP_SHARE)

    def slowest_judged_ms(self, always_judged_ms: float) -> float:
        """The slowest model (ms a run) whose sweeps this search share has judged whole:
        `always_judged_ms` (the judge's own limit, at any budget), or slower where the
        sweeps' share affords `MIN_JUDGEMENTS` judgements of `JUDGEMENT_RUNS` runs."""
        affordable = 1000.0 * self.sweeps().seconds / (MIN_JUDGEMENTS * JUDGEMENT_RUNS)
        return max(always_judged_ms, affordable)

    def decision_deadline(self, second_decision_s: float = 0.0) -> float:
        """When the measured decision must stop taking more looks (and, with a default
        budget, a second decision must have ended: `SECOND_DECISION_SLACK` of the call, or
        `second_decision_s`, the longest a decision of this model takes, if more)."""
        slack = DECISION_SLACK * self.seconds
        if self.limit is Limit.DEFAULT:
            slack += max(SECOND_DECISION_SLACK * self.seconds, second_decision_s)
        return self.deadline + slack
