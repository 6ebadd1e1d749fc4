"""Unit tests of `opprof mv`: a renamed or moved test keeps its baseline."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from baseline_docs import NODE, doc, profile

from pytest_opprof.baseline import (
    BaselineError,
    baseline_path,
    read_baseline,
    write_baseline,
)

# -- opprof mv: a renamed or moved test keeps its baseline -----------------------------------------


def _recorded(root, nodeid=NODE, key="cpu-x86_64"):
    path = baseline_path(root, key, nodeid)
    write_baseline(path, replace(doc(profile(), key=key), nodeid=nodeid))
    return path


def test_move_baseline_rekeys_and_moves_the_file_keeping_every_other_byte(tmp_path):
    """A newcomer had to `git mv` the file and hand-edit its "nodeid": one step now. The file
    goes where the plugin reads the new test's baseline, its other bytes as they were, and the
    folders it leaves empty go (up to the device key's)."""
    from pytest_opprof.baseline import move_baseline

    root = tmp_path / ".opprof"
    old = _recorded(root)
    before = old.read_text()
    moved = move_baseline(old, "tests/vision/test_m.py::TestM::test_new[a/b]")
    assert moved.new == baseline_path(root, "cpu-x86_64", "tests/vision/test_m.py::TestM::test_new[a/b]")
    assert (moved.old, moved.was) == (old, NODE) and not old.exists()
    assert not (root / "cpu-x86_64" / "tests" / "test_mlp.py").exists() and (root / "cpu-x86_64" / "tests").is_dir()
    after = moved.new.read_text()
    assert after == before.replace(f'"nodeid": "{NODE}"', '"nodeid": "tests/vision/test_m.py::TestM::test_new[a/b]"')
    assert read_baseline(moved.new, "tests/vision/test_m.py::TestM::test_new[a/b]") is not None
    again = move_baseline(moved.new, "tests/vision/test_m.py::TestM::test_new[a/b]")
    assert again.new == again.old == moved.new and moved.new.read_text() == after  # nothing to do


def test_move_baseline_keeps_a_byte_order_mark_crlf_endings_and_the_layout(tmp_path):
    """A review: the file was written again, so a CRLF checkout's file (docs/verdicts.md: kept byte for byte
    until a change) came out LF without its BOM, and an indent-4 file changed on 170 lines."""
    from pytest_opprof.baseline import move_baseline

    old = _recorded(tmp_path / ".opprof")
    data = json.loads(old.read_text())
    text = "\ufeff" + json.dumps(data, indent=4).replace("\n", "\r\n")
    old.write_bytes(text.encode("utf-8"))
    moved = move_baseline(old, "tests/test_mlp.py::test_new")
    assert moved.new.read_bytes() == text.replace(json.dumps(NODE), '"tests/test_mlp.py::test_new"').encode("utf-8")


def test_move_baseline_never_replaces_what_stands_at_the_new_place(tmp_path):
    """Another test's file, a folder, a dangling link or a link to FILE itself at the new test's
    place: each refused, naming it, every file as it was (a review: a link to FILE read as `in
    place`, and a dangling one was replaced)."""
    from pytest_opprof.baseline import move_baseline
    from pytest_opprof.errors import mv_in_the_way

    root = tmp_path / ".opprof"
    mine, theirs = _recorded(root), _recorded(root, "tests/test_mlp.py::test_other")
    texts = mine.read_text(), theirs.read_text()
    with pytest.raises(BaselineError) as refused:
        move_baseline(mine, "tests/test_mlp.py::test_other")
    assert str(refused.value) == mv_in_the_way(theirs, "the baseline of 'tests/test_mlp.py::test_other'")
    for name, make, what in (
        ("test_dir", lambda p: p.mkdir(), "a folder"),
        ("test_dangling", lambda p: p.symlink_to(tmp_path / "nowhere.json"), "a symbolic link"),
        ("test_to_me", lambda p: p.symlink_to(mine), "a symbolic link"),
    ):
        place = baseline_path(root, "cpu-x86_64", f"tests/test_mlp.py::{name}")
        make(place)
        with pytest.raises(BaselineError) as refused:
            move_baseline(mine, f"tests/test_mlp.py::{name}")
        assert str(refused.value) == mv_in_the_way(place, what)
    assert (mine.read_text(), theirs.read_text()) == texts


def test_move_baseline_tells_the_same_file_spelled_otherwise(tmp_path, monkeypatch):
    """A file already at the new test's place (moved with its test by hand), reached through a
    link to its folder, is re-keyed where it is: a first version wrote it there and then deleted
    it, the one baseline of the test."""
    from pytest_opprof.baseline import move_baseline

    root = tmp_path / ".opprof"
    place = _recorded(root, "tests/test_mlp.py::test_new")
    place.write_text(place.read_text().replace("tests/test_mlp.py::test_new", NODE))  # still names the old test
    (tmp_path / "link").symlink_to(place.parent)
    monkeypatch.chdir(tmp_path)
    moved = move_baseline(Path("link") / place.name, "tests/test_mlp.py::test_new")
    assert moved.new == moved.old and place.is_file()
    assert read_baseline(place, "tests/test_mlp.py::test_new") is not None


def test_move_baseline_finds_the_baseline_folder_past_a_test_folder_named_as_the_key(tmp_path):
    """A review: with the key `gpu` and tests under tests/gpu/, the nearest folder named `gpu` was
    taken for the key's, and each move nested the file one level deeper, read by no test."""
    from pytest_opprof.baseline import move_baseline

    root = tmp_path / ".opprof"
    old = _recorded(root, "tests/gpu/test_x.py::test_a", key="gpu")
    moved = move_baseline(old, "tests/gpu/test_x.py::test_b")
    assert (
        moved.new
        == baseline_path(root, "gpu", "tests/gpu/test_x.py::test_b")
        == root / "gpu/tests/gpu/test_x.py/test_b.json"
    )


@pytest.mark.parametrize(
    ("nodeid", "problem"),
    [
        ("tests/test_mlp.py", "not a test's node id"),
        ("::test_x", "not a test's node id"),
        ("tests/test_mlp.py::", "not a test's node id"),
        ("tests/test_mlp.py::test_\x1b[31mx", "holds a control character"),
    ],
)
def test_move_baseline_refuses_what_is_no_node_id(tmp_path, nodeid, problem):
    from pytest_opprof.baseline import move_baseline

    old = _recorded(tmp_path / ".opprof")
    with pytest.raises(BaselineError, match=f": {problem}.*; give the test's node id as pytest prints it"):
        move_baseline(old, nodeid)
    assert read_baseline(old, NODE) is not None


def test_move_baseline_refuses_a_file_it_cannot_place(tmp_path):
    """No file, a file that is no baseline, one away from where the plugin reads its test's
    baseline, a link to one (its file would stay behind, read by no test), a place it cannot
    write: each refused, naming it and the fix, the file as it was."""
    from pytest_opprof.baseline import move_baseline
    from pytest_opprof.errors import mv_unplaced

    with pytest.raises(BaselineError, match=r"nope\.json: no such file; give the baseline file"):
        move_baseline(tmp_path / "nope.json", "t.py::a")
    trace = tmp_path / "cpu-x86_64" / "t.json"
    trace.parent.mkdir()
    trace.write_text('{"traceEvents": []}')
    with pytest.raises(BaselineError, match=r"t\.json: "):
        move_baseline(trace, "t.py::a")
    loose = tmp_path / "elsewhere" / "x.json"
    write_baseline(loose, doc(profile()))
    with pytest.raises(BaselineError) as refused:
        move_baseline(loose, "t.py::a")
    assert str(refused.value) == mv_unplaced(loose, "cpu-x86_64", NODE, "t.py::a")
    real = _recorded(tmp_path / ".opprof")
    link = real.with_name("link.json")
    link.symlink_to(real)
    with pytest.raises(BaselineError, match=r"link\.json: a symbolic link; move the file it points to"):
        move_baseline(link, "t.py::a")
    (real.parents[2] / "blocked.py").write_text("")  # a file where the new test's folder belongs
    with pytest.raises(BaselineError, match=r"t\.json: cannot be written \(.*; .*test_fwd\.json is as it was"):
        move_baseline(real, "blocked.py::t")
    assert read_baseline(real, NODE) is not None


def test_move_baseline_says_in_one_line_what_it_may_not_read(tmp_path, monkeypatch):
    """A review (as `nobody`, a folder of mode 000): `exists()` raised PermissionError, a
    traceback with exit 1. As root here nothing is refused: the error is injected."""
    from pytest_opprof.baseline import move_baseline
    from pytest_opprof.errors import mv_unreadable

    old = _recorded(tmp_path / ".opprof")
    denied = PermissionError(13, "Permission denied", str(old.parent))
    monkeypatch.setattr(Path, "is_symlink", lambda self: (_ for _ in ()).throw(denied))
    with pytest.raises(BaselineError) as refused:
        move_baseline(old, "tests/test_mlp.py::test_new")
    assert str(refused.value) == mv_unreadable(old, denied)
    assert str(refused.value).endswith(f"(Permission denied: {old.parent}); nothing was changed")
    monkeypatch.undo()
    assert read_baseline(old, NODE) is not None
