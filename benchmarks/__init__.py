"""Benchmarks for taso-onnx: model builders (`benchmarks.models`), not part of the installed package."""
