"""Device-side checks: kernels, copies, syncs and the timeline of a GPU step.

pytest --opprof conftest_examples/05_gpu_only       # skipped, with the reason, without CUDA
"""

import torch
from conftest import infer


def test_kernels_and_no_sync(opprof, gpu_mlp):
    model, x = gpu_mlp
    opprof.run(infer, model, x, warmup=3, steps=10)
    opprof.assert_op_count("aten::addmm", 2)
    # every kernel, by glob: the two products' and the ReLU's at least. A name glob such as
    # "*gemm*" would tie the test to one GPU's library: Hopper's cuBLAS may launch nvjet_* kernels
    opprof.assert_kernel_count("*", min=3)
    opprof.assert_no_sync()
    opprof.assert_no_op("Memcpy DtoH*")
    opprof.assert_device_busy_above(10)  # the device worked at least 10% of every step


def test_a_sync_is_caught(opprof, gpu_mlp):
    """.item() inside the step: a host-device sync, which assert_no_sync() would name."""
    from pytest_opprof import assertions

    model, x = gpu_mlp
    opprof.run(lambda: infer(model, x).sum().item(), warmup=3, steps=5)
    if opprof.profile is not None:  # None without --opprof
        message = assertions.no_sync()(opprof.profile)
        assert message is not None and "aten::item" in message


def test_host_to_device_copy_has_bytes(opprof):
    host = torch.ones(1024, 1024)
    opprof.run(lambda: host.to("cuda"), warmup=2, steps=5)
    if opprof.profile is not None:
        (copy,) = opprof.profile.match_memory_ops("Memcpy HtoD*")
        assert copy.bytes == 5 * 1024 * 1024 * 4
