"""Guards for a transformer block: no host syncs, no hidden copies or casts, the fused
attention path and not the math fallback.

    pytest --opprof conftest_examples/02_transformer_block
"""

from conftest import infer


def test_no_sync_no_copies_no_casts(opprof, block):
    model, x = block
    opprof.run(infer, model, x, warmup=3, steps=10)
    opprof.assert_no_sync()  # a .item() or .cpu() in forward stalls a GPU pipeline
    opprof.assert_no_op("aten::_to_copy")  # no dtype/device casts (a float64 constant, a .to())
    opprof.assert_no_op("aten::clone")  # no hidden copies (.contiguous() of a transposed view)
    opprof.assert_op_count("aten::linear", 4)  # qkv, out, up, down


def test_fused_attention(opprof, block):
    """scaled_dot_product_attention takes the fused CPU kernel: no softmax, no attention matrix."""
    model, x = block
    opprof.run(infer, model, x, warmup=3, steps=10)
    opprof.assert_op_count("aten::_scaled_dot_product_flash_attention_for_cpu", 1)
    opprof.assert_no_op("aten::_softmax")
    opprof.assert_no_op("aten::bmm")
