"""What the tests share: builders, fixture rules and oracles (test_*.py files never import each other).

- `graphs`: taso Graphs from ONNX nodes (`make_graph`, seeded `weight`, `grouped_net`).
- `models`: small hand-built ONNX ModelProtos (`conv_net`, control flow, custom domain,
  functions, `wide_model`, `scaled_chain_model`), each checked by the full onnx checker.
- `rules`: the `rule` / `node` builders, the matcher and applier fixture rules
  (`RELU_RELU`, ...), the fuzzer's `FIXTURE_RULES` and `fuzz_rules()`, the shipped
  `LIBRARY` path, and a deliberately wrong rule (`relu_is_identity`).
- `ort`: the ONNX Runtime oracle (`assert_same_outputs` for Graphs, `run_on_ort` and
  `assert_same_on_ort` for ModelProtos, the ORT transformers it turns off).
- `equivalence`: the fuzzer's end-to-end check (`assert_optimized_equivalent`,
  `adversarial_variant`, `reachable_rules`).
- `strategies`: Hypothesis strategies for random valid models (`Recipe`, `build`, `feeds`).
- `search_toys`: toy graphs, rewrites and a fake cost model for the search tests (no ORT).
- `forbid_ort/`: with `TASO_TEST_FORBID_ORT=1`, makes ORT sessions fail in pytest and its
  children (tests/conftest.py), to show that `-m "not ort"` runs no model on ORT.

tests/test_architecture.py fails if a test_*.py file imports another one.
"""
