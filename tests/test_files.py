"""The one writer every output goes through: atomic, exclusive temp files, nothing outside."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from pytest_opprof.errors import UnsafePathError
from pytest_opprof.files import write_atomic, write_atomic_chunks, write_output


def test_a_planted_symlink_at_the_temp_name_is_never_followed(tmp_path, monkeypatch):
    """Even when the temporary name is guessed (uuid pinned) and a symlink planted there, the
    writer refuses to open it (exclusive create) and the target outside stays as it was."""
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    folder = tmp_path / "tree"
    folder.mkdir()
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=0))
    (folder / f".b.json.{os.getpid()}.00000000.tmp").symlink_to(outside)
    with pytest.raises(FileExistsError):
        write_atomic(folder / "b.json", "{}", inside=folder)
    assert outside.read_text() == "precious"
    assert not (folder / "b.json").exists()


def test_the_temp_file_is_removed_when_writing_fails(tmp_path):
    """A chunk source that fails half-way leaves neither the target nor a temporary file."""

    def chunks():
        yield "{"
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_atomic_chunks(tmp_path / "r.json", chunks())
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_replaced_whole_and_a_symlink_at_the_target_is_replaced_not_followed(tmp_path):
    """A symlink at the target is replaced by the new file; what it pointed to is untouched."""
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    folder = tmp_path / "tree"
    folder.mkdir()
    (folder / "b.json").symlink_to(outside)
    write_atomic(folder / "b.json", '{"a": 1}', inside=folder)
    assert outside.read_text() == "precious"
    assert not (folder / "b.json").is_symlink() and (folder / "b.json").read_text() == '{"a": 1}'


@pytest.mark.parametrize("target", ["link/b.json", "link/deeper/b.json", "../b.json"])
def test_a_target_whose_folder_resolves_outside_is_refused_before_anything_is_made(tmp_path, target):
    """A target whose folder resolves outside the chosen folder is refused before any folder or file is made."""
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "tree"
    folder.mkdir()
    (folder / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError, match=r"outside .*tree \(a symlink\?\); nothing was written"):
        write_atomic(folder / target, "{}", inside=folder)
    assert list(outside.iterdir()) == [] and not (tmp_path / "b.json").exists()


def test_two_writers_never_share_a_temporary_file(tmp_path):
    """Unique temp names: 200 interleaved writers of one target all succeed, the last one wins whole."""
    import threading

    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            for _ in range(5):
                write_atomic(tmp_path / "r.json", f'{{"writer": {i}, "pad": "{"x" * 10_000}"}}')
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert (tmp_path / "r.json").read_text().startswith('{"writer": ')
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


@pytest.mark.parametrize("name", ["/proc/self/fd/{fd}", "/dev/fd/{fd}"])
def test_a_report_to_one_of_our_own_descriptors_is_written_at_its_place_in_the_file(tmp_path, name):
    """`--opprof-json=/dev/stdout` with stdout redirected to a log: the log keeps what was
    written before (it was replaced by the JSON alone), the report follows it, the file stays
    the same file. Tried on a descriptor of the test's own (never the real stdout)."""
    from pathlib import Path

    from pytest_opprof.files import own_descriptor, write_output

    log = tmp_path / "log.txt"
    with open(log, "wb") as f:
        f.write(b"header line\n")
        f.flush()
        inode = os.stat(log).st_ino
        path = name.format(fd=f.fileno())
        assert own_descriptor(Path(path)) == f.fileno()
        write_output(Path(path), ['{"schema": 1}', "\n"])
        f.write(b"summary line\n")
    assert log.read_bytes() == b'header line\n{"schema": 1}\nsummary line\n'
    assert os.stat(log).st_ino == inode


def test_standard_stream_names_are_our_descriptors():
    from pathlib import Path

    from pytest_opprof.files import own_descriptor

    assert [own_descriptor(Path(p)) for p in ("/dev/stdout", "/dev/stderr", "/dev/null", "out/r.json")] == [
        1,
        2,
        None,
        None,
    ]


def test_a_report_through_a_symlink_loop_fails_as_the_shells_would(tmp_path):
    """realpath gave the loop's link back, and the report replaced it with a file (a trial)."""
    (tmp_path / "l1").symlink_to("l2")
    (tmp_path / "l2").symlink_to("l1")
    with pytest.raises(OSError, match="a symlink loop"):
        write_output(tmp_path / "l1", ["x"])
    assert (tmp_path / "l1").is_symlink() and os.readlink(tmp_path / "l1") == "l2"
    (tmp_path / "to_be").symlink_to("made.txt")  # a link to a file not there yet: made, as `>` makes it
    write_output(tmp_path / "to_be", ["y"])
    assert (tmp_path / "to_be").is_symlink() and (tmp_path / "made.txt").read_text() == "y"


def test_a_report_through_a_link_that_passes_through_a_file_says_so(tmp_path):
    """Not every link that cannot be followed is a loop (a review: ENOTDIR read `a symlink loop`)."""
    (tmp_path / "f.txt").write_text("")
    (tmp_path / "l1").symlink_to("f.txt/x")
    with pytest.raises(OSError, match=r"a symlink to f.txt/x, which cannot be followed \(Not a directory\)"):
        write_output(tmp_path / "l1", ["x"])


def test_write_new_writes_where_nothing_stands_and_replaces_nothing(tmp_path):
    """`opprof mv`'s writer: a file whole where nothing is; a file, a folder or a dangling link
    there raises FileExistsError and stays (os.replace would have replaced them, a review)."""
    from pytest_opprof.files import write_new

    write_new(tmp_path / "a" / "new.json", b"{}\n")
    assert (tmp_path / "a" / "new.json").read_bytes() == b"{}\n"
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere")
    for taken in ("a/new.json", "a", "dangling.json"):
        with pytest.raises(FileExistsError):
            write_new(tmp_path / taken, b"[]\n")
    assert (tmp_path / "a" / "new.json").read_bytes() == b"{}\n" and not (tmp_path / "nowhere").exists()
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["new.json"]  # no temporary file left


def test_a_path_on_another_drive_is_named_whole_in_a_command(monkeypatch, tmp_path):
    """A record command names a test by its path from the folder pytest ran in; where no relative
    path reaches it (the rootdir on another drive, on Windows: relpath raises), the whole path."""
    from pytest_opprof import layout

    assert layout.reached_from(tmp_path / "tests" / "test_a.py", tmp_path) == str(Path("tests") / "test_a.py")

    def other_drive(path, start=None):
        raise ValueError("path is on mount 'D:', start on mount 'C:'")

    monkeypatch.setattr(layout.os.path, "relpath", other_drive)
    assert layout.reached_from(tmp_path / "tests" / "test_a.py", tmp_path) == str(tmp_path / "tests" / "test_a.py")


def test_a_folder_holds_baselines_where_a_json_file_lies_among_its_first_entries(tmp_path):
    """Whether a folder named like a device key holds baselines: a `.json` file in it or below
    counts, other files do not, and the search stops after 2,000 entries (a trial's
    `opprof_baseline_dir = "/etc"` was walked whole)."""
    from pytest_opprof.layout import holds_json

    deep = tmp_path / "key" / "tests" / "test_a.py"
    deep.mkdir(parents=True)
    (deep / "notes.txt").write_text("")
    assert not holds_json(tmp_path / "key")
    (deep / "test_x.json").write_text("{}")
    assert holds_json(tmp_path / "key")
    big = tmp_path / "big"
    (big / "z").mkdir(parents=True)
    for i in range(2000):
        (big / f"f{i}.txt").write_text("")
    (big / "z" / "b.json").write_text("{}")  # past the first 2,000 entries: not looked at
    assert not holds_json(big)
    (big / "f0.txt").unlink()
    assert holds_json(big)  # 1,999 files and their folder: the 2,000th entry is the last looked at
