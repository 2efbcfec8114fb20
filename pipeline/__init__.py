"""The optimize pipeline (`taso.pipeline`): the API entry, its stages, and the `taso` CLI.

    load -> import -> (canonicalize) -> search -> (legalize) -> export -> check -> decide -> write

`api.optimize_onnx` runs the stages top to bottom; `_rewriting` drives the search (rule
sweeps, then backtracking), `_bodies` the If/Loop/Scan bodies, `_decide` the measured
judge and decision; `cli` is the command line. `taso/__init__.py` re-exports the API.
"""

from taso.pipeline.api import OptimizeResult, optimize_onnx

__all__ = ["OptimizeResult", "optimize_onnx"]
