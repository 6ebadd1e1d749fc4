"""Unit tests of the baseline files and the verdicts: hand-built profiles, no torch."""

from __future__ import annotations

import json

import pytest
from builders import op, step

from pytest_opprof.analysis import analyze
from pytest_opprof.baseline import (
    SCHEMA,
    BaselineError,
    baseline_from_profile,
    baseline_path,
    dumps,
    read_baseline,
    round_sig,
    write_baseline,
)
from pytest_opprof.compare import ENVIRONMENT, STRUCTURE, TIME, Rule, compare, rank_test_p

NODE = "tests/test_mlp.py::test_fwd"
ENV = {"torch": "2.13.0", "cuda": None, "cpu_model": "x"}


def profile(addmm_us=(700,) * 8, extra_ops=(), linear=True):
    events = []
    for i, d in enumerate(addmm_us):
        base = i * 10_000
        events.append(step(i + 1, base, 10_000))
        if linear:
            events.append(op("aten::linear", base + 10, d + 100))
        events.append(op("aten::addmm", base + 20, d))
        for j, name in enumerate(extra_ops):
            events.append(op(name, base + 5000 + j * 10, 5))
    return analyze(events)


def doc(p, key="cpu-x86_64", env=ENV):
    return baseline_from_profile(p, NODE, key, env)


# -- layout and format ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        ("tests/test_mlp.py::test_fwd", "cpu-x86_64/tests/test_mlp.py/test_fwd.json"),
        ("tests/test_mlp.py::TestMLP::test_fwd", "cpu-x86_64/tests/test_mlp.py/TestMLP.test_fwd.json"),
        ("test_a.py::test_x[1-float32]", "cpu-x86_64/test_a.py/test_x[1-float32].json"),
    ],
)
def test_layout_is_device_key_then_test_path(tmp_path, nodeid, expected):
    """One file per test under <root>/<device key>/<test file path>/<test name>.json."""
    assert baseline_path(tmp_path, "cpu-x86_64", nodeid) == tmp_path / expected


@pytest.mark.parametrize(
    "param",
    ["a/b", "with space", "ünïcödé", "x" * 400, "../../escape", "a\\b", 'q"uote:*?'],
)
def test_names_are_filesystem_safe_and_unique(tmp_path, param):
    """Odd parametrize ids become safe, bounded, distinct file names inside the root."""
    path = baseline_path(tmp_path, "cpu-x86_64", f"t.py::test_x[{param}]")
    other = baseline_path(tmp_path, "cpu-x86_64", f"t.py::test_x[{param}!]")
    assert path != other
    assert tmp_path in path.parents
    assert len(path.name) <= 130
    assert all(c.isascii() and c not in ' /\\:*?"' for c in path.name)
    write_baseline(path, {"schema": SCHEMA})
    assert path.exists()


def test_round_sig_keeps_four_significant_digits():
    """Values are rounded to 4 significant digits; small ints stay as they are."""
    assert round_sig(0.123456) == 0.1235
    assert round_sig(1234.5678) == 1235.0
    assert round_sig(7) == 7
    assert round_sig(0.0) == 0


def test_document_is_sorted_rounded_and_free_of_timestamps(tmp_path):
    """The file is JSON with sorted keys, indent 2, a trailing newline, no timestamps."""
    path = tmp_path / "b.json"
    write_baseline(path, doc(profile()))
    text = path.read_text()
    data = json.loads(text)
    assert text.endswith("}\n")
    assert text == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert data["schema"] == SCHEMA and data["nodeid"] == NODE and data["device_key"] == "cpu-x86_64"
    assert data["ops"]["aten::addmm"]["calls_per_step"] == [1] * 8
    assert data["ops"]["aten::addmm"]["cpu_ms"] == [0.7] * 8
    assert "time" not in text and "date" not in text
    assert not list(tmp_path.glob("*.tmp"))  # written through a temporary file, renamed


def test_same_measurement_gives_byte_identical_file():
    """Recording the same numbers twice gives the same bytes."""
    assert dumps(doc(profile())) == dumps(doc(profile()))


# -- reading: every bad file is an error naming it, and the file is left alone -----------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "not valid JSON (line 1)"),
        ("[1, 2]", "not an opprof baseline (no 'schema')"),
        ('{"schema": 99}', "baseline schema 99, this pytest-opprof reads schema 1"),
        ('{"schema": 1, "nodeid": "other.py::test_y"}', "belongs to 'other.py::test_y'"),
        ('{"schema": 1, "nodeid": "tests/test_mlp.py::test_fwd", "ops": 3}', "'ops' is missing or not a dict"),
        (
            '{"schema": 1, "nodeid": "tests/test_mlp.py::test_fwd", "ops": {}, "memory_ops": {}, "kernels": {}, '
            '"events_per_step": [], "reference_ms": "fast"}',
            "'reference_ms' is 'fast', not a positive number or null",
        ),
        (
            '{"schema": 1, "nodeid": "tests/test_mlp.py::test_fwd", "ops": {}, "memory_ops": {}, "kernels": {}, '
            '"events_per_step": [], "dispatch_reference_ms": 0}',
            "'dispatch_reference_ms' is 0, not a positive number or null",
        ),
    ],
)
def test_unusable_baselines_raise_naming_the_file(tmp_path, content, reason):
    """Corrupt, foreign-schema and other-test files raise BaselineError naming file and fix."""
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(BaselineError) as info:
        read_baseline(path, NODE)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert reason in message
    assert "\n" not in message
    assert path.read_text() == content


def test_missing_baseline_is_none(tmp_path):
    """No file: None (the test passes and the summary says how to record one)."""
    assert read_baseline(tmp_path / "none.json", NODE) is None


def test_written_baseline_reads_back(tmp_path):
    """write_baseline then read_baseline gives the same document."""
    path = tmp_path / "x" / "b.json"
    data = doc(profile())
    write_baseline(path, data)
    assert read_baseline(path, NODE) == json.loads(dumps(data))


# -- verdicts -----------------------------------------------------------------------------------


def kinds(comparison):
    return [(v.kind, v.status) for v in comparison.verdicts]


def test_identical_measurement_is_unchanged():
    """Same ops, same times: no verdict, unchanged."""
    c = compare(doc(profile()), doc(profile()), Rule())
    assert c.verdicts == () and c.unchanged


def test_extra_op_is_a_structure_change_naming_it():
    """An op that appears is a structure verdict that fails by default."""
    c = compare(doc(profile(extra_ops=("aten::clone",))), doc(profile()), Rule(), "b.json")
    (verdict,) = c.verdicts
    assert verdict.kind == STRUCTURE
    assert verdict.message == "structure changed: + aten::clone (1/step) [b.json]"
    assert c.failing(Rule()) == [verdict]


def test_vanished_and_changed_counts():
    """Vanished ops and changed calls per step are listed."""
    two = profile(extra_ops=("aten::copy_", "aten::copy_"))
    three = profile(extra_ops=("aten::copy_", "aten::copy_", "aten::copy_"))
    assert "aten::copy_ 2 -> 3/step" in compare(doc(three), doc(two), Rule()).verdicts[0].message
    no_linear = compare(doc(profile(linear=False)), doc(profile()), Rule()).verdicts[0].message
    assert "- aten::linear (was 1/step)" in no_linear


def test_two_times_slower_op_regresses_with_message():
    """A 2x slower op beyond tolerance, floor and significance is a failing time verdict."""
    old = doc(profile(addmm_us=[700 + i for i in range(8)]))
    new = doc(profile(addmm_us=[1400 + i for i in range(8)]))
    c = compare(new, old, Rule(), ".opprof/x.json")
    addmm = next(v for v in c.verdicts if v.op == "aten::addmm")
    assert addmm.kind == TIME and addmm.status == "regressed"
    assert addmm.message.startswith("aten::addmm: 1.40 ms/step vs baseline 0.70 ms (+100%, limit +20%, p=")
    assert addmm.message.endswith("[.opprof/x.json]")
    assert addmm in c.failing(Rule())


def test_noise_within_tolerance_is_not_a_verdict():
    """A 10% slower minimum, or slow outlier steps, is no verdict: the minimum decides."""
    old = doc(profile(addmm_us=[700] * 8))
    slower = doc(profile(addmm_us=[770] * 8))
    outliers = doc(profile(addmm_us=[700, 5000, 700, 4000, 700, 3000, 700, 700]))
    assert compare(slower, old, Rule()).verdicts == ()
    assert compare(outliers, old, Rule()).verdicts == ()


def test_absolute_floor_ignores_tiny_ops():
    """A tiny op doubling (0.01 -> 0.02 ms) stays under the 0.05 ms floor."""
    old = doc(profile(addmm_us=[10] * 8, linear=False))
    new = doc(profile(addmm_us=[20] * 8, linear=False))
    assert compare(new, old, Rule()).verdicts == ()
    assert kinds(compare(new, old, Rule(min_delta_ms=0.005))) == [(TIME, "regressed")]


def test_not_significant_is_not_a_verdict():
    """One slow minimum among overlapping samples is not a significant change."""
    old = doc(profile(addmm_us=[700, 1500, 1500, 1500, 1500, 1500, 1500, 1500], linear=False))
    new = doc(profile(addmm_us=[900, 1400, 1500, 1450, 1500, 1480, 1500, 1490], linear=False))
    assert compare(new, old, Rule()).verdicts == ()


def test_improvement_is_reported_not_failed():
    """Faster beyond tolerance is an improved verdict that fails nothing."""
    c = compare(doc(profile(addmm_us=[300] * 8)), doc(profile(addmm_us=[700] * 8)), Rule())
    improved = [v for v in c.verdicts if v.status == "improved"]
    assert improved and "faster; update the baseline" in improved[0].message
    assert c.failing(Rule()) == [] and not c.unchanged


def test_ignore_ops_and_fail_on():
    """Ignored ops are never compared; fail_on selects which verdicts fail."""
    new, old = doc(profile(extra_ops=("aten::clone",))), doc(profile())
    assert compare(new, old, Rule(ignore_ops=("aten::cl*",))).verdicts == ()
    c = compare(new, old, Rule())
    assert c.failing(Rule(fail_on=frozenset({TIME}))) == []


def test_environment_differences_are_reported():
    """Another device or torch version is an environment verdict, not failing by default."""
    c = compare(doc(profile(), key="nvidia-a10", env={**ENV, "torch": "2.14.0"}), doc(profile()), Rule())
    (verdict,) = c.verdicts
    assert verdict.kind == ENVIRONMENT
    assert "device cpu-x86_64 -> nvidia-a10" in verdict.message and "torch 2.13.0 -> 2.14.0" in verdict.message
    assert c.failing(Rule()) == [] and c.unchanged
    assert c.failing(Rule(fail_on=frozenset({ENVIRONMENT}))) == [verdict]


@pytest.mark.parametrize(
    ("new", "base", "low", "high"),
    [
        ([2, 3, 4, 5, 6, 7, 8, 9], [1.0] * 8, 0, 0.001),  # every new sample larger
        ([1, 2, 3, 4], [1, 2, 3, 4], 0.3, 0.7),  # the same samples
        ([1, 1, 1], [5, 5, 5], 0.95, 1.0),  # new smaller
    ],
)
def test_rank_test(new, base, low, high):
    """The one-sided rank test's p-value is small only when new is larger."""
    assert low <= rank_test_p(new, base) <= high


def test_cpu_times_are_put_at_the_baselines_machine_speed():
    """A run whose reference workload ran 1.5x slower has its CPU times scaled back before comparing."""
    old = doc(profile(addmm_us=[700] * 8))
    old["reference_ms"] = 0.2
    whole_process_slower = doc(profile(addmm_us=[1050] * 8))
    whole_process_slower["reference_ms"] = 0.3
    assert compare(whole_process_slower, old, Rule()).verdicts == ()
    really_slower = doc(profile(addmm_us=[2100] * 8))
    really_slower["reference_ms"] = 0.3
    (verdict, *_) = [v for v in compare(really_slower, old, Rule()).verdicts if v.op == "aten::addmm"]
    assert verdict.status == "regressed"
    assert "aten::addmm: 1.40 ms/step vs baseline 0.70 ms (+100%" in verdict.message
    assert "CPU times x0.67 for machine speed" in verdict.message


def test_unreliable_run_turns_a_time_regression_into_a_warning():
    """Throttled GPU clocks: the slowdown is reported with the reason, and does not fail."""
    base, slow = doc(profile()), doc(profile(addmm_us=(1400,) * 8))
    rule = Rule()
    verdicts = compare(slow, base, rule, unreliable="GPU clock event sw_power_cap").verdicts
    verdict = next(v for v in verdicts if v.op == "aten::addmm")
    assert (verdict.kind, verdict.status, verdict.op) == (TIME, "warning", "aten::addmm")
    assert verdict.message.endswith("not failed: unreliable run (GPU clock event sw_power_cap))")
    assert compare(slow, base, rule, unreliable="x").failing(rule) == []
    assert compare(slow, base, rule).failing(rule)  # the same numbers fail on a reliable run


def test_cuda_driver_difference_is_an_environment_verdict():
    env_a = dict(ENV, cuda_driver="12.4")
    env_b = dict(ENV, cuda_driver="12.6")
    (verdict,) = compare(doc(profile(), env=env_b), doc(profile(), env=env_a), Rule()).verdicts
    assert verdict.kind == ENVIRONMENT
    assert "cuda_driver 12.4 -> 12.6" in verdict.message


def test_machine_speed_far_from_the_baselines_makes_cpu_time_verdicts_warnings():
    """A reference workload 5x slower than at recording: CPU times are not compared as such."""
    base = doc(profile())
    slow = doc(profile(addmm_us=(1400,) * 8))
    base["reference_ms"], slow["reference_ms"] = 0.1, 0.5
    rule = Rule()
    verdicts = compare(slow, base, rule).verdicts
    assert compare(slow, base, rule).failing(rule) == []
    assert all(v.status == "improved" or v.status == "warning" for v in verdicts if v.kind == TIME)
    slow["reference_ms"] = 0.25  # 2.5x: still compared, scaled
    assert not [v for v in compare(slow, base, rule).verdicts if v.kind == TIME and v.status == "warning"]
    faster_machine = doc(profile(addmm_us=(2800,) * 8))
    faster_machine["reference_ms"] = 0.01  # 10x faster reference, 4x slower op: not trusted either
    (addmm,) = [v for v in compare(faster_machine, base, rule).verdicts if v.op == "aten::addmm"]
    assert addmm.status == "warning" and "machine ran x0.10 the baseline's speed" in addmm.message


def test_cpu_contention_widens_the_cpu_time_limit_only():
    """Threads waiting for a CPU half the capture explain up to 2x: +100% passes as a warning,
    +200% still fails; device time is not widened."""
    base = doc(profile())
    twice, thrice = doc(profile(addmm_us=(1400,) * 8)), doc(profile(addmm_us=(2100,) * 8))
    rule = Rule()
    addmm = next(v for v in compare(twice, base, rule, cpu_wait=0.5).verdicts if v.op == "aten::addmm")
    assert addmm.status == "warning"
    assert "not failed: within +140% for CPU contention: threads waited for a CPU 50% of it" in addmm.message
    addmm = next(v for v in compare(thrice, base, rule, cpu_wait=0.5).verdicts if v.op == "aten::addmm")
    assert addmm.status == "regressed" and "limit widened to +140% for CPU contention" in addmm.message
    assert next(v for v in compare(twice, base, rule, cpu_wait=0.05).verdicts if v.op == "aten::addmm").status == (
        "regressed"  # 5% wait: below the contention limit, the plain rule
    )
    for d in (twice, base):
        d["ops"]["aten::addmm"]["on_device"] = True
        d["ops"]["aten::addmm"]["device_ms"] = d["ops"]["aten::addmm"]["cpu_ms"]
    addmm = next(v for v in compare(twice, base, rule, cpu_wait=0.5).verdicts if v.op == "aten::addmm")
    assert addmm.status == "regressed"  # device time does not suffer from CPU contention


def test_contention_limit():
    from pytest_opprof.compare import contention_limit

    assert contention_limit(0.2, None) == (0.2, "")
    assert contention_limit(0.2, 0.1) == (0.2, "")
    assert contention_limit(0.2, 0.5)[0] == pytest.approx(1.4)
    assert contention_limit(0.2, 0.99)[0] == pytest.approx(11.0)  # capped at 90% wait


def test_merge_measurements_pools_samples():
    from pytest_opprof.compare import merge_measurements

    first = doc(profile(addmm_us=(1400,) * 8))
    second = doc(profile(addmm_us=(700,) * 4))
    first["reference_ms"], second["reference_ms"] = 0.2, 0.4
    first["dispatch_reference_ms"], second["dispatch_reference_ms"] = 0.6, 0.35
    merged = merge_measurements(first, second)
    addmm = merged["ops"]["aten::addmm"]
    assert addmm["cpu_ms"] == [1.4] * 8 + [0.7] * 4  # as measured: seconds apart in one process
    assert addmm["calls_per_step"] == [1] * 12
    assert merged["capture"]["steps"] == 12 and len(merged["events_per_step"]) == 12
    assert merged["reference_ms"] == 0.2  # the faster of each reference: the least excused
    assert merged["dispatch_reference_ms"] == 0.35
    assert merge_measurements(doc(profile()), doc(profile()))["dispatch_reference_ms"] is None
    assert first["ops"]["aten::addmm"]["cpu_ms"] == [1.4] * 8  # inputs untouched
    # judged together: the fast second measurement clears the first one's slow steps
    base = doc(profile())
    base["reference_ms"] = 0.2
    assert not compare(first, base, Rule()).unchanged
    assert not [v for v in compare(merged, base, Rule()).verdicts if v.kind == TIME]


def test_a_faster_reference_never_scales_times_up():
    """A baseline recorded while the machine was disturbed (slow reference) does not make this
    run's times look slower: the reference only excuses, it never accuses."""
    old = doc(profile(addmm_us=[700] * 8))
    old["reference_ms"] = 0.3
    same_code = doc(profile(addmm_us=[720] * 8))
    same_code["reference_ms"] = 0.2  # this run's machine looks 1.5x faster
    assert [v for v in compare(same_code, old, Rule()).verdicts if v.kind == TIME] == []
    really_slower = doc(profile(addmm_us=[1400] * 8))
    really_slower["reference_ms"] = 0.2
    verdict = next(v for v in compare(really_slower, old, Rule()).verdicts if v.op == "aten::addmm")
    assert verdict.status == "regressed" and "machine speed" not in verdict.message


def test_state_limit():
    from pytest_opprof.compare import state_limit

    assert state_limit(0.2, None) == (0.2, "")
    assert state_limit(0.2, 1.15) == (0.2, "")  # within the reference's own spread
    assert state_limit(0.2, 0.5) == (0.2, "")  # a faster state never narrows or widens
    limit, why = state_limit(0.2, 1.69)
    assert limit == pytest.approx(1.2 * 1.3 - 1)
    assert why == "a slower CPU state: the dispatch reference ran x1.69 its baseline time"


def test_a_slower_cpu_state_widens_the_cpu_time_limit_by_the_square_root():
    """The dispatch reference ran x1.69 (a core shared with another tenant): +40% on a small op
    passes as a warning (limit +56%), a 2x slowdown still fails and says the limit was widened;
    device time is not widened; a baseline without the reference compares as before."""
    base = doc(profile(addmm_us=[700] * 8))
    base["dispatch_reference_ms"] = 0.4
    shared = doc(profile(addmm_us=[980] * 8))
    shared["dispatch_reference_ms"] = 0.676
    rule = Rule()
    addmm = next(v for v in compare(shared, base, rule).verdicts if v.op == "aten::addmm")
    assert addmm.status == "warning"
    assert "not failed: within +56% for a slower CPU state: the dispatch reference ran x1.69" in addmm.message
    assert compare(shared, base, rule).failing(rule) == []
    twice = doc(profile(addmm_us=[1400] * 8))
    twice["dispatch_reference_ms"] = 0.676
    addmm = next(v for v in compare(twice, base, rule).verdicts if v.op == "aten::addmm")
    assert addmm.status == "regressed" and "limit widened to +56% for a slower CPU state" in addmm.message
    steady = dict(shared, dispatch_reference_ms=0.41)
    assert next(v for v in compare(steady, base, rule).verdicts if v.op == "aten::addmm").status == "regressed"
    unknown = dict(shared, dispatch_reference_ms=None)
    assert next(v for v in compare(unknown, base, rule).verdicts if v.op == "aten::addmm").status == "regressed"
    for d in (shared, base):
        d["ops"]["aten::addmm"]["on_device"] = True
        d["ops"]["aten::addmm"]["device_ms"] = d["ops"]["aten::addmm"]["cpu_ms"]
    addmm = next(v for v in compare(shared, base, rule).verdicts if v.op == "aten::addmm")
    assert addmm.status == "regressed"  # device time does not depend on the host core


def test_the_wider_allowance_of_contention_and_cpu_state_applies():
    base = doc(profile(addmm_us=[700] * 8))
    base["dispatch_reference_ms"] = 0.4
    slow = doc(profile(addmm_us=[1400] * 8))
    slow["dispatch_reference_ms"] = 0.676  # +56%
    addmm = next(v for v in compare(slow, base, Rule(), cpu_wait=0.5).verdicts if v.op == "aten::addmm")
    assert "within +140% for CPU contention" in addmm.message  # contention's +140% is wider
    addmm = next(v for v in compare(slow, base, Rule(), cpu_wait=0.15).verdicts if v.op == "aten::addmm")
    assert "limit widened to +56% for a slower CPU state" in addmm.message  # +41% for 15% wait


def test_a_dispatch_reference_far_off_makes_cpu_time_verdicts_warnings():
    base = doc(profile(addmm_us=[700] * 8))
    base["dispatch_reference_ms"] = 0.4
    slow = doc(profile(addmm_us=[2800] * 8))
    slow["dispatch_reference_ms"] = 1.6
    addmm = next(v for v in compare(slow, base, Rule()).verdicts if v.op == "aten::addmm")
    assert addmm.status == "warning" and "the dispatch reference ran x4.00 its baseline time" in addmm.message


def test_a_time_warning_is_no_reason_for_a_new_baseline():
    """A slowdown excused by contention, or a run not comparable, keeps the baseline when
    updating changed ones: recording it would inflate the baseline. A regression does not."""
    base = doc(profile(addmm_us=[700] * 8))
    slower = doc(profile(addmm_us=[1400] * 8))
    contended = compare(slower, base, Rule(), cpu_wait=0.5)
    assert [v.status for v in contended.verdicts if v.op == "aten::addmm"] == ["warning"]
    assert contended.unchanged and contended.changes == []
    throttled = compare(slower, base, Rule(), unreliable="GPU clock event sw_power_cap")
    assert throttled.unchanged
    regressed = compare(slower, base, Rule())
    assert not regressed.unchanged and [v.op for v in regressed.changes] == ["aten::addmm", "aten::linear"]
