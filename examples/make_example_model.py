"""Build the README's example model (a small converter-style CNN) and save it.

Usage: python examples/make_example_model.py example.onnx

The model maker ships in the package, so that a wheel user has it too:
`python -m taso.examples.make_model example.onnx` does the same.
"""

from __future__ import annotations

import sys

from taso.examples.make_model import build, main

__all__ = ["build", "main"]

if __name__ == "__main__":
    sys.exit(main())
