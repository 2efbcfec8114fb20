"""One call's time budget: a deadline on one clock, and every share cut from it.

    the call (time_budget_s)
      ├─ load, reference run                      spent before the search starts
      ├─ search: what the rest is expected to leave, at least MIN_SEARCH_SHARE of the call
      │    ├─ main graph, by its share of all nodes (the If/Loop/Scan bodies get the rest)
      │    │    ├─ rule sweeps: at most SWEEP_SHARE
      │    │    └─ backtracking: what is left, less the final judgement's reserve
      │    └─ bodies: each by its size; a body's own nodes before its nested bodies
      └─ export, check, measured decision: expected from the reference run's timing;
         the decision may run DECISION_SLACK of the call past the deadline

`Budget.of` is made once per call (`optimize_onnx`) and passed down; every share is
computed here, so no stage splits the clock itself. The clock is injectable: tests use a
fake one and never assert wall-clock times.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

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
"""The measured decision may extend its rounds up to this share of the call past its
deadline. Its two rounds are reserved in the budget, their extensions are not: at the end
of a call the search had spent, a round one order-balanced block short of significance
(ResNeXt-50's regrouping at 1.125x, YOLOv8n's un-merging at 1.06x: 6 of 7 blocks won)
could not be extended, and a real gain was thrown away."""


@dataclass(frozen=True)
class Budget:
    """`seconds` from `start` on `clock`; shares are Budgets that start when cut."""

    seconds: float
    start: float
    clock: Clock = time.perf_counter

    @classmethod
    def of(cls, seconds: float, clock: Clock = time.perf_counter) -> Budget:
        """A budget of `seconds` starting now."""
        return cls(max(0.0, seconds), clock(), clock)

    @property
    def deadline(self) -> float:
        return self.start + self.seconds

    def left(self) -> float:
        return max(0.0, self.deadline - self.clock())

    def elapsed(self) -> float:
        return self.clock() - self.start

    def cut(self, seconds: float) -> Budget:
        """A share of `seconds` from now, never past this budget's deadline."""
        return Budget(max(0.0, min(seconds, self.left())), self.clock(), self.clock)

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
        return Budget(seconds, self.clock(), self.clock)  # the floor may run past the deadline

    def search_is_floored(self, expected_after_s: float) -> bool:
        """Whether loading, checking and measuring would leave the search under its floor."""
        return self.seconds > 0 and self.left() - expected_after_s < MIN_SEARCH_SHARE * self.seconds

    def sweeps(self) -> Budget:
        return self.fraction(SWEEP_SHARE)

    def decision_deadline(self) -> float:
        """When the measured decision must stop extending its rounds."""
        return self.deadline + DECISION_SLACK * self.seconds
