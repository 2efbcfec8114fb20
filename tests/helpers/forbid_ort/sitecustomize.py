"""Refuse ONNX Runtime sessions while `TASO_TEST_FORBID_ORT=1`, in pytest and in its children.

tests/conftest.py imports this module in the pytest process and puts this folder on the
PYTHONPATH of the processes the tests start, where Python imports it at startup as
`sitecustomize`. Creating an `onnxruntime.InferenceSession` then appends a line to the
file named by `TASO_TEST_ORT_LOG` and raises; conftest fails the test whose run made the
file grow, even when the code under test caught the error.
"""

from __future__ import annotations

import os
import sys

FORBID_ENV = "TASO_TEST_FORBID_ORT"
LOG_ENV = "TASO_TEST_ORT_LOG"


class OrtSessionForbidden(RuntimeError):
    """An ORT session was created while `TASO_TEST_FORBID_ORT=1`."""


def _refuse_session(*args: object, **kwargs: object) -> None:
    with open(os.environ[LOG_ENV], "a") as log:
        log.write(f"pid {os.getpid()}: {' '.join(sys.argv)[:200]}\n")
    raise OrtSessionForbidden(f"{FORBID_ENV}=1: an ORT session was created; mark the test @pytest.mark.ort")


def refuse_sessions() -> None:
    import onnxruntime  # only in this diagnostic mode: other processes never pay for the import

    onnxruntime.InferenceSession = _refuse_session  # type: ignore[assignment,misc]


if os.environ.get(FORBID_ENV) == "1" and os.environ.get(LOG_ENV):
    refuse_sessions()
