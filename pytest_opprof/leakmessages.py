"""The messages about torch's process-wide settings a test or fixture left changed (the thread count,
the default dtype, grad mode...): who changed them, what the tests after it measured, and where to
put them back. The other messages: errors.py.

Tests import these formatters so they assert the real text. Imported by every pytest run (the
settings watchers name leakers in its words): keep its imports to the standard library."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torchstate only where a leak is told
    from .torchstate import Left, TorchState


LEAKS_JOINED = " then "  # the tests of a leak that each changed the count the one before left
FIXTURE_LEAKER = "fixture "  # a leaker that is a fixture: `fixture one_thread (conftest.py:12)`
XUNIT_LEAKER = "setup method "  # a setup method pytest runs as a fixture: `setup method setUpClass of TestX`
SCOPED_LEAKER = " (for its scope)"  # a wider fixture whose count a test that does not ask for it ran on
SCOPE_WORDS = "for its scope, and tests there that do not ask for it"  # threads_of_scope's: the run line names them
SCOPE_FIX = "ask for the fixture in those tests, or set the count in a function-scoped fixture that puts it back"
SCOPE_FIX_ONE = SCOPE_FIX.replace("those tests", "this test")  # the fix as one victim's lines give it


def _restore_in(leaker: str, code: str = "") -> str:
    """Where to put the count back: a test's call (try/finally), a fixture's teardown, or each;
    `code`: the calls that put settings other than the count alone back (torchstate.restore_code)."""
    if code and (LEAKS_JOINED in leaker or not leaker.startswith(FIXTURE_LEAKER)):  # a fixture's own: below
        where = _restore_in(leaker)  # `...)`: the code inside, but where the parentheses list kinds
        return f"{where[:-1]}: {code})" if not where.startswith("each of them") else f"{where} with {code}"
    if LEAKS_JOINED in leaker:
        return _restore_in_each(leaker.split(LEAKS_JOINED))
    if leaker.startswith(FIXTURE_LEAKER):
        return (
            "that fixture's teardown (after its yield, or in a finalizer it adds before anything can raise: "
            f"{code or 'torch.set_num_threads(<the count before>)'})"
        )
    if leaker.startswith(XUNIT_LEAKER):
        return "its teardown method (teardown_module, teardown_function, tearDownClass, ...)"
    return "that test (try/finally)"


_RESTORE_WAYS = {  # how each kind of leaker puts a setting back, where several of kinds are named
    "test": ("those tests (try/finally)", "a test: try/finally"),
    "fixture": ("those fixtures' teardowns (after their yield)", "a fixture: after its yield"),
    "setup": (
        "their teardown methods (teardown_module, teardown_function, tearDownClass, ...)",
        "a setup method: its teardown method",
    ),
}


def _restore_in_each(leakers: list[str]) -> str:
    """Where several leakers in turn put the count back: by their kinds (a break trial's two setup
    methods were told `after their yield`)."""
    kinds = {
        "fixture" if part.startswith(FIXTURE_LEAKER) else "setup" if part.startswith(XUNIT_LEAKER) else "test"
        for part in leakers
    }
    if len(kinds) == 1:
        return _RESTORE_WAYS[kinds.pop()][0]
    return "each of them (" + "; ".join(way for kind, (_, way) in _RESTORE_WAYS.items() if kind in kinds) + ")"


def settings_left_changed(leaker: str, before: TorchState, after: TorchState) -> str:
    """`leaker`: a test or a fixture, or several joined by LEAKS_JOINED (in turn, from `before` to
    `after`), or a wider fixture a test ran on without asking for it (SCOPED_LEAKER); the thread
    count alone in its own words (threads_left_changed)."""
    from .torchstate import changed_text, left_text, restore_code, threads_only

    if threads_only(before, after):
        return threads_left_changed(leaker, before.threads, after.threads)
    changed, left, it = changed_text(before, after), left_text(before, after), _it(before, after)
    if leaker.endswith(SCOPED_LEAKER):
        return (
            f"{leaker.removesuffix(SCOPED_LEAKER)}, set up by an earlier test, changed {changed} {SCOPE_WORDS} ran "
            f"with {left}: their measurements depend on which tests ran before them (a flake under -k or "
            f"pytest-randomly) and no baseline is recorded from them; {_scope_fix(SCOPE_FIX, it)}"
        )
    them = "them" if LEAKS_JOINED in leaker else "it"
    return (
        f"{leaker} changed {changed} and did not put {it} back: the tests after {them} ran with {left}, so their "
        f"measurements depend on test order (a flake under -k or pytest-randomly) and no baseline is recorded "
        f"from them; restore {it} in {_restore_in(leaker, restore_code(before, after))}"
    )


def _it(before: TorchState, after: TorchState) -> str:
    """How the messages refer to the settings that changed: `it`, or `them` for several."""
    from .torchstate import changes

    return "them" if len(changes(before, after)) > 1 else "it"


def _scope_fix(fix: str, it: str) -> str:
    """SCOPE_FIX (or SCOPE_FIX_ONE) for settings other than the count alone."""
    return fix.replace("set the count", f"set {it}").replace("puts it back", f"puts {it} back")


def settings_left_fix(found: Left) -> str:
    """The fix of a test's change in its measurement where it ran on settings other than the
    thread count alone that an earlier test left: in that test, not by recording."""
    from .torchstate import left_text, restore_code

    leaker, left, it = found.by, left_text(found.before, found.after), _it(found.before, found.after)
    if leaker.endswith(SCOPED_LEAKER):
        return (
            f"it ran with {left}, which {leaker.removesuffix(SCOPED_LEAKER)} sets for its scope and this test does not "
            f"ask for (an earlier test did): {_scope_fix(SCOPE_FIX_ONE, it)}, and run again; recording this test "
            f"would record {it}, not undo {it}"
        )
    they = "they" if LEAKS_JOINED in leaker else "it"
    return (
        f"it ran with {left} that {leaker} left ({they} ran earlier and did not put {it} back): restore {it} in "
        f"{_restore_in(leaker, restore_code(found.before, found.after))} and run again; recording this test would "
        f"record {it}, not undo {it}"
    )


def unrecordable_settings(found: Left) -> str:
    """A measurement on settings that earlier tests left: the thread count alone in its own words."""
    from .torchstate import left_text, restore_code

    if found.threads_only:
        return unrecordable_threads(found.by, found.after.threads, found.before.threads)
    leaker, left, it = found.by, left_text(found.before, found.after), _it(found.before, found.after)
    code = restore_code(found.before, found.after)
    if leaker.endswith(SCOPED_LEAKER):
        return (
            f"it ran with {left} that {leaker.removesuffix(SCOPED_LEAKER)} sets for its scope, without asking for it "
            f"(a baseline recorded on {it} would depend on test order): {_scope_fix(SCOPE_FIX_ONE, it)}, then record"
        )
    return (
        f"it ran with {left} that {leaker} left (a baseline recorded on {it} would depend on test order): restore "
        f"{it} in {_restore_in(leaker, code)}, then record"
    )


def threads_left_changed(leaker: str, before: int, after: int) -> str:
    """The thread count alone: settings_left_changed."""
    if leaker.endswith(SCOPED_LEAKER):
        return threads_of_scope(leaker.removesuffix(SCOPED_LEAKER), before, after)
    them = "them" if LEAKS_JOINED in leaker else "it"
    return (
        f"{leaker} changed torch's thread count {before} -> {after} and did not put it back: the tests after {them} "
        f"ran on {after}, so their CPU times depend on test order (a flake under -k or pytest-randomly) and no "
        f"baseline is recorded from them; restore the count in {_restore_in(leaker, f'torch.set_num_threads({before})')}"
    )  # the count before is known here: the code with it (a recheck read `<the count before>` beside real code)


def threads_of_scope(leaker: str, before: int, after: int) -> str:
    """A wider fixture (module, class, package, session) that set the count for the tests of its
    scope, while a test there that does not ask for it runs on that count."""
    return (
        f"{leaker}, set up by an earlier test, changed torch's thread count {before} -> {after} {SCOPE_WORDS} ran on "
        f"{after}: their CPU times depend on which tests ran before them (a flake under -k or pytest-randomly) and no "
        f"baseline is recorded from them; {SCOPE_FIX}"
    )


def threads_left_fix(leaker: str) -> str:
    """The fix of a test's thread-count change earlier tests left: in them, not by recording."""
    if leaker.endswith(SCOPED_LEAKER):
        return (
            f"the count is the one {leaker.removesuffix(SCOPED_LEAKER)} sets for its scope, which this test does not "
            f"ask for (an earlier test did): {SCOPE_FIX_ONE}, and run again; recording "
            "this test would record that count, not undo it"
        )
    they = "they" if LEAKS_JOINED in leaker else "it"
    return (
        f"the count is the one {leaker} left ({they} ran earlier and did not put it back): restore it in "
        f"{_restore_in(leaker)} and run again; recording this test would record that count, not undo it"
    )


def unrecordable_threads(leaker: str, count: int, before: int | None = None) -> str:
    """A measurement on the torch thread count earlier tests left (threads_left_changed); `before`:
    the count they found, the code that puts it back (None: unknown, no code)."""
    if leaker.endswith(SCOPED_LEAKER):
        return (
            f"it ran on the torch thread count {count} that {leaker.removesuffix(SCOPED_LEAKER)} sets for its scope, "
            f"without asking for it (a baseline recorded on it would depend on test order): "
            f"{SCOPE_FIX_ONE}, then record"
        )
    return (
        f"it ran on the torch thread count {count} that {leaker} left (a baseline recorded on it would depend on "
        f"test order): restore the count in {_restore_in(leaker, _set_threads(before))}, then record"
    )


def _set_threads(count: int | None) -> str:
    """The call that sets the thread count back, or nothing where the count before is unknown."""
    return f"torch.set_num_threads({count})" if count is not None else ""
