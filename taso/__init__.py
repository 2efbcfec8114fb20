"""taso-onnx: verified graph substitutions that make ONNX models faster."""
