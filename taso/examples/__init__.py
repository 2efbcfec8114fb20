"""Examples shipped with the package, runnable from an installed wheel:
`python -m taso.examples.make_model OUT.onnx` writes the README's example model."""
