"""Tests renamed or moved since their baselines were recorded: a test without a baseline beside
an orphaned file of the same function or test, said with the `opprof mv` that keeps its history."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path

from .baseline import HASHED_NAME
from .results import TestRecord, file_test
from .textout import shell_quote

UNREAD = ("missing", "new")  # a test that had no baseline file: none, or this run recorded its first


def renamed_lines(
    pairs: list[tuple[str, str, str]],
    here: Callable[[str], str] = str,
    elsewhere: Callable[[str, str], list[tuple[str, str]]] = lambda new, old: [],
    recorded: Collection[str] = (),
) -> list[str]:
    """A line per renamed_pairs pair: the `opprof mv` that keeps its baseline (a `git mv` and a
    hand edit of the file's "nodeid" before); its path as `here` makes it (reached from the folder
    pytest ran in: a review's run from a subfolder got a `git mv` that failed beside an `rm` that
    worked). Then one per other device key whose folder holds the old baseline too (`elsewhere`:
    (key, path) for the pair's new and old paths), right after its pair's line. A pair whose new
    file this run `recorded` gets the comparison of the two and the commands that keep either."""
    groups = []
    for nodeid, new, old in pairs:
        how = "renamed" if Path(new).parent == Path(old).parent else "moved"
        line = (
            _recorded_line(nodeid, how, here(new), here(old))
            if new in recorded
            else f"opprof: {nodeid} has no baseline, and {old} is read by no test: if the test was {how}, keep its "
            f"baseline: opprof mv {shell_quote(here(old))} {shell_quote(nodeid)}"
        )
        others = [
            f"opprof: under device key {key} too, keep its baseline: opprof mv {shell_quote(here(other))} "
            f"{shell_quote(nodeid)}"
            for key, other in elsewhere(new, old)
        ]
        groups.append([line, *others])
    return [line for group in sorted(groups) for line in group]


def _recorded_line(nodeid: str, how: str, new: str, old: str) -> str:
    """A test recorded anew beside a file it may have been renamed from: the old file holds the
    times it had, which the recording did not compare with (a sharding trial's rename and
    recording wrote `1 new` and offered `rm` for the old file: a slowdown went in unjudged)."""
    q = shell_quote  # two commands, not `&&`: Windows PowerShell 5.1 refuses it
    return (
        f"opprof: {nodeid} was recorded anew, and {old} is read by no test: if the test was {how}, the old file "
        f"holds the times it had, not compared with this run's: opprof compare {q(old)} {q(new)}; to keep the old "
        f"one: rm -- {q(new)}, then opprof mv {q(old)} {q(nodeid)}; else delete it: rm -- {q(old)}"
    )


def renamed_pairs(
    records: list[TestRecord], orphans: Sequence[str], unrun: Sequence[tuple[str, str]] = ()
) -> list[tuple[str, str, str]]:
    """Tests without a baseline paired with baseline files no test reads, (node id, its baseline
    path, the orphan): alone in the same test file's folder (`test_x[a].json` and `test_x[b]`,
    `test_old.json` and `test_new`: a renamed test or parametrize id), or of the same name, one
    each, in another folder (a test moved to another file, or its file moved). `unrun`: (baseline
    path, id) of the tests that carry operator checks and have no baseline file, collected or left
    out; those that did not run are paired too (a sharding trial's shard that left the renamed test
    out offered `rm` for its baseline, where the shard that ran it offered `opprof mv`)."""
    ran = list(  # by the id the file holds: a pytest-repeat repeat's is the test it repeats
        {r.baseline.path: file_test(r) for r in records if r.baseline and r.baseline.status in UNREAD}.items()
    )
    ran_ids = {file_test(r) for r in records}
    missing = ran + [(path, nodeid) for path, nodeid in dict(unrun).items() if nodeid not in ran_ids]
    pairs = _moved(missing, orphans)  # the same name first: stronger than one of each in a folder
    # then one of each of a parametrized function in a folder, of a method whose class was renamed,
    # of the folder (only tests that ran: one left out of every run here, a GPU test on a CPU job,
    # would claim a deleted test's file in each), then a renamed parametrized function
    for stage, among in (
        (_renamed_id, missing),
        (_renamed_class, missing),
        (_renamed, ran),
        (_renamed_functions, missing),
        (_renamed_id_part, missing),
    ):
        paired = {new for _, new, _ in pairs} | {old for _, _, old in pairs}
        pairs += stage([(p, n) for p, n in among if p not in paired], [o for o in orphans if o not in paired])
    return pairs


def left_out_pairs(
    records: list[TestRecord], orphans: Sequence[str], unrun: Sequence[tuple[str, str]], taken: Collection[str]
) -> list[tuple[str, str, str]]:
    """(node id, its file, the orphan) where a folder holds one orphan no pair of renamed_pairs
    took (`taken`: their files) and one test of `unrun` that did not run: perhaps renamed from it,
    perhaps not (a GPU test left out of every CPU run beside a deleted test's file). Said as
    either (left_out_line), where one shard offered `rm` and the one that ran it `opprof mv`."""
    ran = {file_test(r) for r in records}
    left = [(path, nodeid) for path, nodeid in dict(unrun).items() if nodeid not in ran and path not in taken]
    return _renamed(left, [o for o in orphans if o not in taken])


def left_out_line(nodeid: str, old: str, here: Callable[[str], str] = str) -> str:
    q = shell_quote
    return (
        f"opprof: {old} is read by no test, and {nodeid}, left out of this run, has no baseline: if it was renamed "
        f"from that test, keep its baseline: opprof mv {q(here(old))} {q(nodeid)}; if not, delete the file: "
        f"rm -- {q(here(old))}"
    )


def _renamed_id(missing: list[tuple[str, str]], orphans: Sequence[str]) -> list[tuple[str, str, str]]:
    """(node id, its file, the orphan) where a folder holds one of each of a parametrized function:
    a renamed id beside a deleted test (`test_x[a]` -> `test_x[b]` and `test_old` gone: a folder of
    one missing file and two orphans paired none, and `rm` named `test_x[a]`'s file)."""
    return [pair for pair in _one_each(missing, orphans, _function_of) if _function_of(pair[1])]


def _renamed_class(missing: list[tuple[str, str]], orphans: Sequence[str]) -> list[tuple[str, str, str]]:
    """(node id, its file, the orphan) where a folder holds one of each of a method (`TestBlocks.
    test_conv` -> `TestConvBlocks.test_conv`): an upgrade trial's class renamed beside a renamed
    function, two of each in the folder, paired neither, and the lines offered `rm` for both files."""
    return [pair for pair in _one_each(missing, orphans, _method_of) if _method_of(pair[1])]


def _method_of(path: str) -> str:
    """A test method's file's folder, method and ids (`k/t.py/test_conv[cuda_0]` for
    `TestX.test_conv[cuda_0]-0f1e2d3c.json`: the hash safe_name adds is of the whole id, class
    and all), or '' for a function's (its name holds no class: names hold no dot)."""
    name = HASHED_NAME.sub("", Path(path).name.removesuffix(".json"))
    head = name.split("[", 1)[0]
    if "." not in head:
        return ""
    return str(Path(path).parent / (head.rsplit(".", 1)[1] + name[len(head) :]))


def _function_of(path: str) -> str:
    """A parametrized test's file's folder and function (`k/t.py/test_x`), or '' for another's."""
    name = Path(path).name
    start, end = name.find("["), name.rfind("]")
    return str(Path(path).parent / name[:start]) if 0 < start < end else ""


def _renamed(missing: list[tuple[str, str]], orphans: Sequence[str]) -> list[tuple[str, str, str]]:
    """(node id, its file, the orphan) where a folder holds one of each."""
    return _one_each(missing, orphans, lambda path: str(Path(path).parent))


def _renamed_functions(missing: list[tuple[str, str]], orphans: Sequence[str]) -> list[tuple[str, str, str]]:
    """(node id, its file, the orphan) for a renamed parametrized function: in one folder, the
    files of one function no test reads and the missing ones of one other function, with the
    same set of ids, alone in that folder to have it (a CI trial's `test_param` -> `test_params`,
    six ids: six lines of no baseline and six files read by no test, none paired; a review: ids
    alone would pair a removed `test_a[small]` with an unrelated new `test_c[small]`)."""
    new, old = _functions(p for p, _ in missing), _functions(orphans)
    nodeids = dict(missing)
    found = []
    for (folder, function), files in new.items():
        ids = set(files)
        theirs = [key for key, paths in old.items() if key[0] == folder and set(paths) == ids]
        mine = [key for key, paths in new.items() if key[0] == folder and set(paths) == ids]
        if len(theirs) == 1 and len(mine) == 1 and theirs[0][1] != function:
            found += [(nodeids[files[i]], files[i], old[theirs[0]][i]) for i in sorted(ids)]
    return found


def _renamed_id_part(missing: list[tuple[str, str]], orphans: Sequence[str]) -> list[tuple[str, str, str]]:
    """(node id, its file, the orphan) for a parametrize id renamed in every case of a function:
    one part of the ids (`fp32` -> `f32`, the parts pytest joins with `-`) replaced in each of the
    function's orphans gives each of its missing ids, one to one, and no other replacement does (a
    scale trial's `id="fp32"` -> `"f32"`: 12 files read by no test, 12 tests without a baseline,
    none paired, and `rm` offered for the 12)."""
    new, old = _functions(p for p, _ in missing), _functions(orphans)
    nodeids = dict(missing)
    found = []
    for key, files in new.items():
        theirs = old.get(key, {})
        swap = _one_swap(list(theirs), set(files)) if len(files) == len(theirs) >= 2 else None
        if swap is not None:
            found += [(nodeids[files[swap(i)]], files[swap(i)], theirs[i]) for i in sorted(theirs)]
    return found


def _one_swap(olds: list[str], news: set[str]) -> Callable[[str], str] | None:
    """The one replacement of an id part (`[1-fp32]` -> `[1-f32]`) mapping `olds` onto `news`, one
    to one; None where none does, or more than one could."""

    def parts(bracketed: str) -> list[str]:
        return bracketed[1:-1].split("-")

    first = parts(olds[0])
    candidates = {
        (a, b)
        for other in news
        if len(parts(other)) == len(first)
        for a, b in zip(first, parts(other))
        if a != b and sum(x != y for x, y in zip(first, parts(other))) == 1
    }
    fits = []
    for a, b in candidates:

        def swap(bracketed: str, a: str = a, b: str = b) -> str:
            return "[" + "-".join(b if part == a else part for part in parts(bracketed)) + "]"

        if all(a in parts(o) for o in olds) and {swap(o) for o in olds} == news:
            fits.append(swap)
    return fits[0] if len(fits) == 1 else None


def _functions(paths: Iterable[str]) -> dict[tuple[str, str], dict[str, str]]:
    """Parametrized tests' files by (folder, function) and then by their ids' part
    (`test_p[a_b]-f0c7bb77.json`: `test_p`, `[a_b]`); unparametrized ones left out."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for path in paths:
        name = Path(path).name
        start, end = name.find("["), name.rfind("]")
        if 0 < start < end:
            found.setdefault((str(Path(path).parent), name[:start]), {})[name[start : end + 1]] = path
    return found


def _moved(missing: list[tuple[str, str]], orphans: Sequence[str]) -> list[tuple[str, str, str]]:
    """(node id, its file, the orphan) where one of each, in two folders, has the same file name
    (the test's name)."""
    pairs = _one_each(missing, orphans, lambda path: Path(path).name)
    return [(nodeid, new, old) for nodeid, new, old in pairs if Path(new).parent != Path(old).parent]


def _one_each(
    missing: list[tuple[str, str]], orphans: Sequence[str], key: Callable[[str], str]
) -> list[tuple[str, str, str]]:
    """(node id, its file, the orphan) where exactly one missing file and one orphan share a key."""
    found = []
    for shared in {key(p) for p, _ in missing}:
        here = [(p, n) for p, n in missing if key(p) == shared]
        left = [o for o in orphans if key(o) == shared]
        if len(here) == 1 and len(left) == 1:
            found.append((here[0][1], here[0][0], left[0]))
    return found
