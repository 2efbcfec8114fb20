"""Add an operator of your own, regenerate rules with it, and optimize a model with them.

Usage: python examples/add_an_operator.py OUT_DIR

The operator is Neg (examples/neg_op.py: its spec and two axioms). The steps a researcher
runs, here one after another:

1. `TASO_EXTRA_SPECS=neg_op` (with examples/ on PYTHONPATH) adds the spec and its axioms
   to every taso and taso-gen process, generator workers included.
2. `taso-gen check-axioms --only neg_neg neg_as_mul` checks the axioms against the spec's
   NumPy semantics and with Z3.
3. `taso-gen generate --max-ops 2 --ops Neg Add Mul Sub` enumerates graphs of up to two
   of these operators, pairs equal fingerprints, prunes, proves each pair with Z3 and
   writes OUT_DIR/neg_rules.json.
4. `taso-gen verify` re-proves the file.
5. `taso.optimize_onnx(..., rules=OUT_DIR/neg_rules.json)` uses the new rules on a model
   with a double negation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
from onnx import TensorProto
from onnx import helper as h

HERE = Path(__file__).resolve().parent
OPS = ("Neg", "Add", "Mul", "Sub")


def taso_gen(*args: str) -> None:
    """Run the taso-gen CLI with Neg visible; stop at the first failing step."""
    env = {**os.environ, "TASO_EXTRA_SPECS": "neg_op", "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    print("$ taso-gen " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "taso.substitutions.generate.cli", *args], env=env, check=True)


def double_negation_model() -> onnx.ModelProto:
    """y = relu(a - neg(neg(b))): the generated rules remove both Negs."""
    a = h.make_tensor_value_info("a", TensorProto.FLOAT, [1, 64, 56, 56])
    b = h.make_tensor_value_info("b", TensorProto.FLOAT, [1, 64, 56, 56])
    y = h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56])
    nodes = [h.make_node("Neg", ["b"], ["nb"]), h.make_node("Neg", ["nb"], ["nnb"]),
             h.make_node("Sub", ["a", "nnb"], ["d"]), h.make_node("Relu", ["d"], ["y"])]
    model = h.make_model(h.make_graph(nodes, "double_negation", [a, b], [y]), opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    rules = out / "neg_rules.json"
    taso_gen("check-axioms", "--only", "neg_neg", "neg_as_mul")
    taso_gen("generate", "--max-ops", "2", "--ops", *OPS, "--no-axioms", "-o", str(rules))
    taso_gen("verify", str(rules))
    with_neg = [r for r in json.loads(rules.read_text())["rules"] if "Neg" in json.dumps([r["source"], r["target"]])]
    print(f"{len(with_neg)} proved rules mention Neg, e.g.:")
    for rule in with_neg[:5]:
        print(f"  {rule['id']}: {' '.join(n['op'] for n in rule['source'])} -> "
              f"{' '.join(n['op'] for n in rule['target']) or '(its input)'}")

    os.environ["TASO_EXTRA_SPECS"] = "neg_op"  # this process imports taso only now: it sees Neg too
    sys.path.insert(0, str(HERE))
    import taso

    model = double_negation_model()
    result = taso.optimize_onnx(model, out / "optimized.onnx", rules=rules, backend="analytical", time_budget_s=5)
    print(result.report.summary())
    ops = [n.op_type for n in onnx.load(str(out / "optimized.onnx")).graph.node]
    print(f"optimized model: {' '.join(ops)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
