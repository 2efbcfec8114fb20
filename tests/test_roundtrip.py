"""Import/export round trips keep everything: nodes, attributes, subgraphs, metadata, data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper as nh

from taso._model_io import load_model, save_model_atomic
from taso._onnx_export import export_model
from taso._onnx_import import import_model
from tests.helpers import models


def roundtrip(model: onnx.ModelProto, base_dir: str = "") -> onnx.ModelProto:
    return export_model(import_model(model, base_dir=base_dir))


@pytest.mark.parametrize(
    "build", [models.conv_net, models.if_loop_model, models.custom_domain_model, models.function_model]
)
def test_roundtrip_is_byte_identical(build) -> None:
    model = build()
    out = roundtrip(model)
    onnx.checker.check_model(out, full_check=True)
    assert out.SerializeToString() == model.SerializeToString()


def test_symbolic_dims_and_subgraphs_survive() -> None:
    out = roundtrip(models.conv_net(batch="N"))
    assert out.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    loop = roundtrip(models.if_loop_model())
    the_if = next(n for n in loop.graph.node if n.op_type == "If")
    assert {a.name for a in the_if.attribute} == {"then_branch", "else_branch"}


def test_outer_scope_reads_are_dependencies() -> None:
    graph = import_model(models.if_loop_model())
    the_if = next(n for n in graph.nodes.values() if n.op_type == "If")
    assert "outer_w" in the_if.captures and "x" in the_if.captures
    order = [graph.nodes[i].op_type for i in graph.topological_order]
    assert order.index("Relu") < order.index("If")


@pytest.mark.ort
def test_ir_version_is_lowered_to_what_onnxruntime_loads() -> None:
    from taso.backends import max_ir_version

    model = models.conv_net()
    model.ir_version = onnx.IR_VERSION
    out = roundtrip(model)
    assert out.ir_version == min(onnx.IR_VERSION, max_ir_version())
    assert out.ir_version <= max_ir_version()


def test_external_data_roundtrip_keeps_external_data(tmp_path: Path) -> None:
    model = models.conv_net(channels=64)
    source = tmp_path / "src" / "model.onnx"
    source.parent.mkdir()
    onnx.save_model(model, source, save_as_external_data=True, location="weights.bin", size_threshold=256)
    before = source.read_bytes()
    loaded = load_model(source)
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in loaded.model.graph.initializer)
    out_model = export_model(import_model(loaded.model, base_dir=loaded.base_dir))
    target = tmp_path / "out" / "model.onnx"
    target.parent.mkdir()
    save_model_atomic(out_model, target, base_dir=loaded.base_dir)
    assert source.read_bytes() == before
    assert (target.parent / "model.onnx.data").exists()
    written = onnx.load(str(target), load_external_data=False)
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in written.graph.initializer)
    reloaded = onnx.load(str(target))
    fresh = models.conv_net(channels=64)  # onnx.save_model externalized `model` in place
    for tensor, original in zip(reloaded.graph.initializer, fresh.graph.initializer, strict=True):
        np.testing.assert_array_equal(nh.to_array(tensor), nh.to_array(original))
    assert not list(target.parent.glob(".*.tmp"))


def test_structural_hash_ignores_internal_names_and_sees_structure() -> None:
    a = models.conv_net()
    b = models.conv_net()
    for node in b.graph.node:
        node.output[:] = [o if o == "y" else o + "_renamed" for o in node.output]
        node.input[:] = [i if i in ("x", "w1", "b1", "w2", "bias") else i + "_renamed" for i in node.input]
    ga, gb = import_model(a), import_model(b)
    assert ga.structural_hash == gb.structural_hash
    assert ga.structurally_equal(gb)
    c = models.conv_net()
    c.graph.node[1].op_type = "Sigmoid"
    gc = import_model(c)
    assert gc.structural_hash != ga.structural_hash
    assert not gc.structurally_equal(ga)


def test_rewrite_shares_nodes_and_weights() -> None:
    graph = import_model(models.conv_net())
    relu_id = next(i for i, n in graph.nodes.items() if n.op_type == "Relu")
    relu = graph.nodes[relu_id]
    from taso.ir import Node

    variant = graph.rewrite(remove=[relu_id], add=[Node("Sigmoid", "", relu.inputs, relu.outputs)])
    assert variant.structural_hash != graph.structural_hash
    assert all(variant.nodes[i] is graph.nodes[i] for i in graph.nodes if i != relu_id)
    assert variant.initializers["w1"] is graph.initializers["w1"]
    variant.validate()
    out = export_model(variant)
    onnx.checker.check_model(out, full_check=True)
    assert [n.op_type for n in out.graph.node] == ["Conv", "Sigmoid", "Conv", "Add", "GlobalAveragePool"]
    assert len(out.graph.initializer) == 4


def test_hash_and_equality_do_not_depend_on_rewrite_order() -> None:
    """The same two rewrites applied in either order give one graph (new node ids differ)."""
    from taso.ir import Node

    graph = import_model(models.conv_net())
    relu_id = next(i for i, n in graph.nodes.items() if n.op_type == "Relu")
    add_id = next(i for i, n in graph.nodes.items() if n.op_type == "Add")
    relu, add = graph.nodes[relu_id], graph.nodes[add_id]
    sigmoid = Node("Sigmoid", "", relu.inputs, relu.outputs)
    sub = Node("Sub", "", add.inputs, add.outputs)
    one = graph.rewrite(remove=[relu_id], add=[sigmoid]).rewrite(remove=[add_id], add=[sub])
    two = graph.rewrite(remove=[add_id], add=[sub]).rewrite(remove=[relu_id], add=[sigmoid])
    assert sorted(one.nodes) != sorted(two.nodes) or one.nodes != two.nodes
    assert one.structural_hash == two.structural_hash
    assert one.structurally_equal(two)
    assert one.structural_hash != graph.structural_hash and not one.structurally_equal(graph)


def test_cycle_is_detected_when_hashing() -> None:
    from taso.errors import InvalidModelError
    from taso.ir import Node

    graph = import_model(models.conv_net())
    relu_id = next(i for i, n in graph.nodes.items() if n.op_type == "Relu")
    relu = graph.nodes[relu_id]
    looped = graph.rewrite(remove=[relu_id], add=[Node("Add", "", (relu.inputs[0], "a"), relu.outputs)])
    with pytest.raises(InvalidModelError, match="cycle"):
        _ = looped.structural_hash
