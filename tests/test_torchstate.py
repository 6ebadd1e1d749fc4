"""torch's settings a test can leave changed (torchstate), and the leak messages built on them:
pure, no torch."""

from __future__ import annotations

import json
from dataclasses import replace

from pytest_opprof.leakmessages import (
    SCOPED_LEAKER,
    settings_left_changed,
    settings_left_fix,
    threads_left_changed,
    unrecordable_settings,
    unrecordable_threads,
)
from pytest_opprof.torchstate import Left, TorchState, changed_text, changes, left_text, restore_code, seen_in

FRESH = TorchState(2)
DOUBLE = replace(FRESH, dtype="float64")


def test_changes_name_each_setting_that_differs_in_order_with_the_code_that_puts_it_back():
    after = replace(FRESH, threads=3, grad=False, matmul="medium", cudnn_benchmark=True)
    assert [c.name for c in changes(FRESH, after)] == ["threads", "grad", "matmul", "cudnn_benchmark"]
    assert changed_text(FRESH, after) == (
        "torch's thread count 2 -> 3, grad mode on -> off, float32 matmul precision highest -> medium and "
        "cuDNN benchmark mode off -> on"
    )
    assert left_text(FRESH, after) == (
        "the thread count 3, grad mode off, the float32 matmul precision medium and cuDNN benchmark mode on"
    )
    assert restore_code(FRESH, after) == (
        'torch.set_num_threads(2); torch.set_grad_enabled(True); torch.set_float32_matmul_precision("highest"); '
        "torch.backends.cudnn.benchmark = False"
    )
    every = replace(FRESH, deterministic=True, anomaly=True, dtype="float64")
    assert restore_code(FRESH, every) == (
        "torch.set_default_dtype(torch.float32); torch.use_deterministic_algorithms(False); "
        "torch.autograd.set_detect_anomaly(False)"
    )
    assert changes(FRESH, FRESH) == ()
    device = replace(FRESH, device="cuda:0")
    assert changed_text(FRESH, device) == "torch's default device not set -> cuda:0"
    assert restore_code(FRESH, device) == "torch.set_default_device(None)"
    assert restore_code(device, FRESH) == "torch.set_default_device('cuda:0')"


def test_a_measurement_ran_on_the_leaked_settings_it_did_not_set_itself():
    left = replace(FRESH, threads=1, dtype="float64", grad=False)
    # its capture began on the leaked dtype, but with grad mode on again (its own), on 1 thread
    now = replace(left, grad=True)
    assert seen_in(FRESH, left, now, threads=1) == replace(FRESH, threads=1, dtype="float64")
    # it pinned its own count (the profile's): the thread count is no part of what it ran on
    assert seen_in(FRESH, left, now, threads=2) == DOUBLE
    # unknown (no capture's settings, no profile count): the leak as it was
    assert seen_in(FRESH, left, None, None) == left
    assert seen_in(FRESH, left, FRESH, 2, frozenset({"float", "Scalar"})) == FRESH  # set everything back itself
    # the dtype by the inputs the profile's ops took: a model its fixture built in float64 runs
    # on double though the test set float32 around run() (a review's recorded double)
    assert seen_in(FRESH, left, FRESH, 2, frozenset({"double"})) == DOUBLE
    assert seen_in(FRESH, replace(FRESH, device="cuda:0"), FRESH, 2) == replace(FRESH, device="cuda:0")  # made before


def test_a_process_group_leak_has_victims_only_among_tests_that_ran_collectives_on_it():
    """Left initialised: the tests whose profile ran collectives (c10d ops) ran on it, unknown too;
    a plain test did not (a trial's later matmul tests would all have gone unrecorded). Destroyed
    (a session fixture's group a test took down): no test ran on it (a review's plain test after
    it was not recorded; one that needs the group errs)."""
    up = replace(FRESH, process_group=True)
    assert seen_in(FRESH, up, up, 2, collectives=True) == up
    assert seen_in(FRESH, up, up, 2, collectives=None) == up
    assert seen_in(FRESH, up, up, 2, collectives=False) == FRESH
    assert seen_in(up, FRESH, FRESH, 2, collectives=False) == up
    assert seen_in(up, FRESH, FRESH, 2, collectives=None) == up


def test_a_leak_without_its_thread_count_keeps_the_rest_and_round_trips_through_json():
    both = Left("t.py::test_a", FRESH, replace(DOUBLE, threads=3))
    assert both.without_threads() == Left("t.py::test_a", FRESH, DOUBLE)
    assert Left("t.py::test_a", FRESH, TorchState(3)).without_threads() is None
    assert both.to_dict() == {"by": "t.py::test_a", "changed": {"threads": [2, 3], "dtype": ["float32", "float64"]}}
    again = Left.from_dict(both.to_dict())
    assert again is not None and again.to_dict() == both.to_dict()
    assert Left.from_dict(None) is None


def test_the_thread_count_alone_keeps_its_own_words():
    assert settings_left_changed("t.py::test_a", FRESH, TorchState(3)) == threads_left_changed("t.py::test_a", 2, 3)
    left = unrecordable_settings(Left("t.py::test_a", FRESH, TorchState(3)))
    assert left == unrecordable_threads("t.py::test_a", 3, 2)
    assert left.endswith("restore the count in that test (try/finally: torch.set_num_threads(2)), then record")
    assert unrecordable_threads("t.py::test_a", 3).endswith("in that test (try/finally), then record")  # before unknown


def test_a_dtype_leak_by_a_test_a_fixture_or_a_wider_fixture_names_the_setting_and_its_restore():
    by_test = settings_left_changed("t.py::test_a", FRESH, DOUBLE)
    assert by_test == (
        "t.py::test_a changed torch's default dtype float32 -> float64 and did not put it back: the tests after it "
        "ran with the default dtype float64, so their measurements depend on test order (a flake under -k or "
        "pytest-randomly) and no baseline is recorded from them; restore it in that test (try/finally: "
        "torch.set_default_dtype(torch.float32))"
    )
    fixture = "fixture doubles (conftest.py:4)"
    assert settings_left_changed(fixture, FRESH, replace(DOUBLE, grad=False)).endswith(
        "did not put them back: the tests after it ran with the default dtype float64 and grad mode off, so their "
        "measurements depend on test order (a flake under -k or pytest-randomly) and no baseline is recorded from "
        "them; restore them in that fixture's teardown (after its yield, or in a finalizer it adds before anything "
        "can raise: torch.set_default_dtype(torch.float32); torch.set_grad_enabled(True))"
    )
    scoped = settings_left_changed(fixture + SCOPED_LEAKER, FRESH, DOUBLE)
    assert scoped.startswith(f"{fixture}, set up by an earlier test, changed torch's default dtype float32 -> float64")
    assert scoped.endswith("or set it in a function-scoped fixture that puts it back")


def test_a_victims_fix_and_unrecordable_reason_name_the_leaker_and_the_restore():
    left = Left("t.py::test_a", FRESH, DOUBLE)
    assert settings_left_fix(left) == (
        "it ran with the default dtype float64 that t.py::test_a left (it ran earlier and did not put it back): "
        "restore it in that test (try/finally: torch.set_default_dtype(torch.float32)) and run again; recording "
        "this test would record it, not undo it"
    )
    assert unrecordable_settings(left) == (
        "it ran with the default dtype float64 that t.py::test_a left (a baseline recorded on it would depend on "
        "test order): restore it in that test (try/finally: torch.set_default_dtype(torch.float32)), then record"
    )
    scoped = Left("fixture doubles (conftest.py:4)" + SCOPED_LEAKER, FRESH, replace(DOUBLE, anomaly=True))
    assert settings_left_fix(scoped).startswith(
        "it ran with the default dtype float64 and anomaly detection on, which fixture doubles (conftest.py:4) sets "
        "for its scope and this test does not ask for"
    )


def test_a_victims_result_carries_its_leak_from_an_xdist_worker():
    """The baseline step's result crosses from an xdist worker as JSON (to_dict): the leak with it."""
    from pytest_opprof.decide import BaselineResult

    left = Left("t.py::test_a", FRESH, replace(DOUBLE, grad=False))
    result = BaselineResult("p.json", "compared", settings_left=(left,))
    again = BaselineResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert [found.to_dict() for found in again.settings_left] == [left.to_dict()]
    assert BaselineResult.from_dict(BaselineResult("p.json", "compared").to_dict()).settings_left == ()


def test_a_scoped_fix_of_several_settings_and_an_empty_leak_from_json_read_right():
    """A review: `set them in a function-scoped fixture that puts it back`; and a `settings_left`
    entry naming no setting this version knows is no leak (it would have ended the summary)."""
    two = replace(DOUBLE, grad=False)
    scoped = settings_left_changed("fixture f (c.py:1)" + SCOPED_LEAKER, FRESH, two)
    assert scoped.endswith("or set them in a function-scoped fixture that puts them back")
    assert Left.from_dict({"by": "t.py::test_a", "changed": {"unknown": [1, 2]}}) is None
    assert Left.from_dict({"by": "t.py::test_a", "changed": {}}) is None


def test_a_mixed_fp32_precision_value_reads_and_restores_per_backend():
    """torch 2.9+'s fp32_precision set beside the legacy API: the value names each backend, with
    `/` between them (a list of settings has its own commas), and its restore sets each back."""
    from pytest_opprof.torchstate import mixed

    value = mixed({"cuda.matmul": "ieee", "mkldnn.matmul": "bf16"})
    assert value == "cuda.matmul=ieee/mkldnn.matmul=bf16"
    assert restore_code(replace(FRESH, matmul=value), FRESH) == (
        'torch.backends.cuda.matmul.fp32_precision = "ieee"; torch.backends.mkldnn.matmul.fp32_precision = "bf16"'
    )
    assert restore_code(FRESH, replace(FRESH, cudnn_tf32=mixed({"cudnn.conv": "ieee"}))) == (
        "torch.backends.cudnn.allow_tf32 = True"
    )
