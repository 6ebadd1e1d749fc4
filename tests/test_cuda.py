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
    assert not [c for c in profile.checks if c.name in ("clock", "correlation")]  # opprof's own capture is sound
    assert sum(o.self_device_ns for o in profile.ops) + profile.unattributed_device_ns == profile.device_ns


def test_step_sync_is_not_the_users_sync():
    """The capture's own step-boundary sync is not reported; .item() is."""
    model, x = gpu_mlp()
    assert assertions.no_sync()(measure(infer, model, x, warmup=2, steps=3)) is None
    synced = measure(lambda: infer(model, x).sum().item(), warmup=2, steps=3)
    message = assertions.no_sync()(synced)
    assert message and "aten::item" in message


def test_adams_step_counts_read_on_the_cpu_are_no_sync():
    """A non-capturable Adam keeps its step counts on the CPU and reads them with `.item()`: on a
    GPU those reads copy nothing from the device and wait for nothing, so a training step passes
    assert_no_sync; a loss read with `.item()` copies from the device and fails it."""
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 10).cuda()
    opt = torch.optim.Adam(model.parameters(), foreach=True)
    x = torch.randn(32, 64, device="cuda")

    def train_step(read_loss=False):
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss.item() if read_loss else None

    profile = measure(train_step, warmup=2, steps=3)
    assert profile.op("aten::item") is not None  # the step counts' reads ran
    assert assertions.no_sync()(profile) is None
    message = assertions.no_sync()(measure(train_step, warmup=2, steps=3, read_loss=True))
    assert message and "aten::item" in message and "CPU-only" not in message


def test_memcpy_has_bytes():
    """A host-to-device copy is a memory op with its bytes."""
    host = torch.ones(1024, 1024)
    profile = measure(lambda: host.to("cuda"), warmup=2, steps=3)
    copies = profile.match_memory_ops("Memcpy HtoD*")
    assert copies and copies[0].bytes == 3 * 4 * 1024 * 1024


def test_compiled_model_triton_kernels_roll_up_once():
    """torch.compile on CUDA: Triton kernels launched through cuLaunchKernel under their CPU
    events, inside the stable-named region; device time counted once; no kernel dropped."""
    model, x = gpu_mlp()
    compiled = torch.compile(model)
    profile = measure(infer, compiled, x, warmup=3, steps=5)
    assert not profile.errors, profile.errors
    region = profile.op("Torch-Compiled Region")
    assert region is not None and region.calls_per_step.samples == (1,) * 5
    assert region.device_ns == profile.device_ns - profile.unattributed_device_ns
    assert assertions.kernel_count("triton_*", min=1)(profile) is None
    assert assertions.no_graph_break()(profile) is None
    assert assertions.no_recompile()(profile) is None
    assert not [c for c in profile.checks if c.name in ("kernel_records", "clock", "correlation")]


def test_cuda_graph_replay_is_one_row_with_its_kernels():
    """A captured CUDA graph replayed: one cudaGraphLaunch per step, its kernels under it and
    under the op around the launch."""
    model, x = gpu_mlp()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            infer(model, x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        infer(model, x)
    profile = measure(graph.replay, warmup=2, steps=5)
    assert not profile.errors, profile.errors
    assert not [c for c in profile.checks if c.name in ("clock", "correlation")]
    launches = [g for g in profile.graph_launches if g.launch == "cudaGraphLaunch"]
    assert launches and launches[0].calls_per_step.samples == (1,) * 5
    assert launches[0].kernels_per_step.min >= 2
    assert sum(g.device_ns for g in launches) == sum(k.device_ns for k in profile.kernels)


def test_device_time_per_op_agrees_with_torchs_key_averages():
    """For the same profiler, each op's calls and (inclusive) device time equal torch's own
    key_averages() (torch keeps microseconds as floats: within 0.1%)."""
    from pytest_opprof import from_profiler

    model, x = gpu_mlp()
    for _ in range(3):
        infer(model, x)
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        infer(model, x)
        torch.cuda.synchronize()
    profile = from_profiler(prof)
    checked = 0
    for avg in prof.key_averages():
        op = profile.op(avg.key)
        device_us = getattr(avg, "device_time_total", None) or getattr(avg, "cuda_time_total", 0)
        if op is None or not device_us:
            continue
        assert op.calls == avg.count, avg.key
        assert op.device_ns / 1000 == pytest.approx(device_us, rel=1e-3), avg.key
        checked += 1
    assert checked >= 2  # at least aten::linear and aten::addmm


def test_copies_to_the_host_and_memsets_have_bytes_and_cpu_is_a_sync():
    """A device-to-host copy has its bytes and is a sync for assert_no_sync; zeroing a buffer is a
    memset with bytes or a fill kernel."""
    x = torch.ones(256, 1024, device="cuda")
    profile = measure(lambda: x.cpu(), warmup=2, steps=3)
    (dtoh,) = profile.match_memory_ops("Memcpy DtoH*")
    assert dtoh.bytes == 3 * 256 * 1024 * 4
    message = assertions.no_sync()(profile)
    assert message and "Memcpy DtoH" in message
    buffer = torch.empty(1024, 1024, device="cuda")
    zeroed = measure(lambda: buffer.zero_(), warmup=2, steps=3)
    memsets = zeroed.match_memory_ops("Memset*")
    fills = [k for k in zeroed.kernels if "fill" in k.name.lower()]
    assert memsets or fills  # torch zeroes with a memset or a fill kernel, per version
    if memsets:
        assert memsets[0].bytes == 3 * 1024 * 1024 * 4


def test_device_busy_within_wall_and_the_timeline_adds_up():
    """On a real GPU the timeline's figures are consistent: busy within span and wall time, steps within the total."""
    model, x = gpu_mlp()
    profile = measure(infer, model, x, warmup=3, steps=5)
    t = profile.timeline
    assert t is not None and t.total.busy_ns > 0
    assert t.total.busy_ns <= t.total.span_ns and t.total.compute_ns <= t.total.busy_ns
    for span, figures in zip(profile.step_spans, t.per_step):
        assert figures.busy_ns <= span.wall_ns
    assert sum(f.busy_ns for f in t.per_step) <= t.total.busy_ns
    assert t.total.queue is not None and t.total.queue[0] >= 0
    assert profile.overhead is not None


def test_nvml_facts_and_the_device_key():
    """NVML gives the GPU's name, driver and max clock; the device key starts with nvidia-."""
    from pytest_opprof.device import Nvml, device_facts, device_key

    nvml = Nvml()
    try:
        facts, _ = device_facts(nvml)
    finally:
        nvml.close()
    assert facts["gpu_name"] and facts["driver"] and facts["sm_clock_max_mhz"]
    assert device_key(facts).startswith("nvidia-")


def test_a_record_function_range_holds_the_device_time_launched_inside_it():
    """A record_function block around the whole model: one call per step, its time the device
    time of every kernel launched inside it (here all of the step's device work); the GPU-side
    twin of the annotation is not a range and not device work."""
    model, x = gpu_mlp()

    def blocks(model, x):
        with torch.profiler.record_function("model_block"):
            return infer(model, x)

    profile = measure(blocks, model, x, warmup=3, steps=5)
    assert not profile.errors, profile.errors
    (block,) = profile.match_ranges("model_block")
    assert block.on_device and block.calls_per_step.samples == (1,) * 5
    assert block.device_ns == profile.device_ns > 0
    assert assertions.range_below("model_block", ms=1000)(profile) is None


def test_a_capture_that_first_initialises_cuda_is_an_error_naming_the_fix():
    """In a fresh process, where CUDA is not yet initialised, measure(warmup=0) of GPU code starts
    its profiler without the GPU's activity: the capture says so (cuda_untraced, naming warmup=1),
    not that CUPTI failed (device_events)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import torch
        from pytest_opprof import measure
        assert not torch.cuda.is_initialized()
        profile = measure(lambda: torch.ones(64, device="cuda").sum(), warmup=0, steps=2)
        print(sorted(c.name for c in profile.checks if c.status == "error"))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    errors = done.stdout.strip().splitlines()[-1]
    assert "cuda_untraced" in errors and "device_events" not in errors, errors


def test_a_range_named_past_ascii_keeps_its_name_with_kernels_under_it():
    """A record_function block named in CJK around GPU work: before torch 2.12 the capture is read
    through Kineto's trace, which names it `unknown`; the events give its name back by its id, and
    no kernel or runtime call with an equal CUPTI id takes its place."""
    x = torch.randn(256, 256, device="cuda")

    def step():
        with torch.profiler.record_function("前向 计算"):
            return x @ x

    profile = measure(step, warmup=1, steps=3)
    names = [r.name for r in profile.ranges]
    assert "前向 计算" in names and "unknown" not in names, names
    assert not [o.name for o in profile.ops if o.name.startswith("cuda") or o.name == "unknown"]
