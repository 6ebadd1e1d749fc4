"""Live CUDA captures: skipped without a CUDA device (the `cuda` marker)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pytest_opprof import assertions, measure  # noqa: E402

pytestmark = pytest.mark.cuda


def gpu_mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda().eval()
    return model, torch.randn(64, 256, device="cuda")


def infer(model, x):
    with torch.no_grad():
        return model(x)


def test_kernels_are_attributed_to_their_ops():
    """On CUDA, addmm runs on the device: its kernels are attributed to it and its time is device time."""
    model, x = gpu_mlp()
    profile = measure(infer, model, x, warmup=3, steps=5)
    addmm = profile.op("aten::addmm")
    assert addmm.on_device and addmm.self_device_ns > 0
    assert addmm.calls_per_step.samples == (2,) * 5
    assert any(k.op == "aten::addmm" for k in profile.kernels)
    assert not profile.errors, profile.errors
    assert sum(o.self_device_ns for o in profile.ops) + profile.unattributed_device_ns == profile.device_ns


def test_step_sync_is_not_the_users_sync():
    """The capture's own step-boundary sync is not reported; .item() is."""
    model, x = gpu_mlp()
    assert assertions.no_sync()(measure(infer, model, x, warmup=2, steps=3)) is None
    synced = measure(lambda: infer(model, x).sum().item(), warmup=2, steps=3)
    message = assertions.no_sync()(synced)
    assert message and "aten::item" in message


def test_memcpy_has_bytes():
    """A host-to-device copy is a memory op with its bytes."""
    host = torch.ones(1024, 1024)
    profile = measure(lambda: host.to("cuda"), warmup=2, steps=3)
    copies = profile.match_memory_ops("Memcpy HtoD*")
    assert copies and copies[0].bytes == 3 * 4 * 1024 * 1024
