"""Hypothesis profiles for the fuzz tests, and a guard that proves `-m "not ort"` needs no ORT.

    pytest -m fuzz --hypothesis-profile long     # >= 5,000 fuzzed models
    pytest -m fuzz --hypothesis-profile ci       # a quick bounded run

The CI suite itself does not need a profile: its fuzz test fixes its own example count.
Profiles only set what they name; every other test keeps Hypothesis's defaults.

    TASO_TEST_FORBID_ORT=1 pytest -m "not ort and not slow and not fuzz and not gpu"

With `TASO_TEST_FORBID_ORT=1`, creating an `onnxruntime.InferenceSession` raises, in this
process and in the Python processes the tests start (tests/helpers/forbid_ort/), and a
test during whose setup, call or teardown one was attempted fails even if the code under
test caught the error (taso falls back when a backend fails): it needs `@pytest.mark.ort`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.helpers.forbid_ort import sitecustomize as forbid_ort

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile(
    "long", max_examples=5_000, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True
)


def _forbidding() -> bool:
    return os.environ.get(forbid_ort.FORBID_ENV) == "1"


def pytest_configure(config: pytest.Config) -> None:
    if not _forbidding():
        return
    handle, log = tempfile.mkstemp(prefix="taso-ort-sessions-", suffix=".log")
    os.close(handle)
    os.environ[forbid_ort.LOG_ENV] = log
    site = str(Path(forbid_ort.__file__).parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (site, os.environ.get("PYTHONPATH")) if p)
    forbid_ort.refuse_sessions()


def _no_session_attempted(item: pytest.Item, phase: str) -> Generator[None, object, object]:
    if not _forbidding():
        return (yield)
    log = Path(os.environ[forbid_ort.LOG_ENV])
    before = log.stat().st_size
    result = yield
    attempts = log.read_text()[before:].splitlines()
    if attempts:
        raise forbid_ort.OrtSessionForbidden(
            f"{item.nodeid} tried to create {len(attempts)} ORT session(s) during {phase}: {attempts[:3]}"
        )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _no_session_attempted(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _no_session_attempted(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _no_session_attempted(item, "teardown"))
