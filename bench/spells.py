"""Slow spells of a parallel op, and what ends them: the data behind the confirmation's pause.

Times windows of 20 calls of a small `max_pool2d` (parallel on torch's threads), each window's
best call, in one process. Prints:
- how often a window is slow (over 1.25x the fastest window's best) right after the process
  idled 0.3 s, and after 0.5 s of settling: none, a busy Python loop (one thread), torch's
  threads busy with a parallel add (what `settle_cpus` does before a confirmation);
- for windows back to back and 0.5 s apart (idle), the chance a window is slow after a slow
  one and after a fast one: how long a spell lasts.

    python bench/spells.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from pytest_opprof.capture import settle_cpus

SLOW = 1.25  # a window this many times the fastest window's best is slow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    x = torch.relu(torch.randn(4, 16, 32, 32))

    def pool() -> None:
        torch.nn.functional.max_pool2d(x, 2)

    for _ in range(200):
        pool()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; max_pool2d of {tuple(x.shape)}")
    after = _after_idle(pool, args.rounds)
    lasting = {gap: _series(pool, gap, 12.0) for gap in (0.0, 0.5)}
    fastest = min(min(v) for v in [*after.values(), *lasting.values()])
    print(f"fastest window {fastest * 1e3:.1f} us; a window is slow past x{SLOW}")
    for kind, windows in after.items():
        slow = sum(w > SLOW * fastest for w in windows)
        print(f"  after 0.3 s idle, then {kind:<22} slow {slow}/{len(windows)}")
    for gap, windows in lasting.items():
        slow = [w > SLOW * fastest for w in windows]
        pairs = list(zip(slow, slow[1:]))
        after_slow = [b for a, b in pairs if a]
        after_fast = [b for a, b in pairs if not a]
        print(
            f"  windows {gap} s apart: {len(windows)}, slow {sum(slow) / len(slow):.0%}; "
            f"slow after a slow one {_share(after_slow)}, after a fast one {_share(after_fast)}"
        )


def _window(pool: Callable[[], None]) -> float:
    """The best of 20 calls, in ms."""
    best = None
    for _ in range(20):
        start = time.perf_counter_ns()
        pool()
        elapsed = time.perf_counter_ns() - start
        best = elapsed if best is None else min(best, elapsed)
    return (best or 0) / 1e6


def _python_busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(1000))


def _after_idle(pool: Callable[[], None], rounds: int) -> dict[str, list[float]]:
    settles: dict[str, Callable[[], None]] = {
        "nothing": lambda: None,
        "0.5 s of Python": lambda: _python_busy(0.5),
        "0.5 s of settle_cpus": lambda: settle_cpus(0.5),
    }
    found: dict[str, list[float]] = {kind: [] for kind in settles}
    for _ in range(rounds):
        for kind, settle in settles.items():
            time.sleep(0.3)
            settle()
            found[kind].append(_window(pool))
    return found


def _series(pool: Callable[[], None], gap: float, seconds: float) -> list[float]:
    windows = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        windows.append(_window(pool))
        time.sleep(gap)
    return windows


def _share(flags: list[bool]) -> str:
    return f"{sum(flags)}/{len(flags)}" if flags else "-"


if __name__ == "__main__":
    main()
