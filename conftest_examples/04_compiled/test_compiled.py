"""Gates for a compiled model: one region per call, no recompiles, nothing eager, fused kernels.

pytest --opprof conftest_examples/04_compiled      # compiles once (10-30 s on a laptop CPU)
"""

from conftest import infer


def test_compile_gates(opprof, compiled):
    model, x = compiled
    opprof.run(infer, model, x, warmup=3, steps=10)  # the warm-up compiles
    opprof.assert_no_graph_break()
    opprof.assert_no_recompile()
    opprof.assert_compiled()
    opprof.assert_op_count("Torch-Compiled Region", 1)  # a stable name, whatever ran before
    opprof.assert_kernel_count("*fused*", min=1)  # cpp_fused_* on CPU, triton_*_fused_* on a GPU


def test_fused_ops_are_named(opprof, compiled):
    """gelu no longer runs as aten::gelu: Inductor fused it into a kernel, which is counted.
    (assert_op_count("aten::gelu", ...) or assert_no_op("aten::gelu") would fail, naming that
    kernel: the op's work still runs.)"""
    model, x = compiled
    opprof.run(infer, model, x, warmup=3, steps=10)
    opprof.assert_kernel_count("*fused*gelu*", 1)
    opprof.assert_no_op("aten::tanh")  # an op the model never had: absent, compiled or not
