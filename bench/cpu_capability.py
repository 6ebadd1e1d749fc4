"""How far torch's CPU kernels move with the vector instructions they run with, beside the matmul
(BLAS) that the machine references time: the bound compare.py gives a `cpu_capability` change.

    for c in "" avx2 default; do ATEN_CPU_CAPABILITY=$c python bench/cpu_capability.py; done

ATEN_CPU_CAPABILITY can only lower the capability below the CPU's best.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def best_ms(fn: Callable[[], object], repeat: int = 20) -> float:
    for _ in range(5):
        fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main() -> None:
    x = torch.randn(512, 1024)
    square = x[:256, :256].contiguous()
    timings = {
        "sigmoid": best_ms(x.sigmoid),
        "exp": best_ms(x.exp),
        "gelu": best_ms(lambda: torch.nn.functional.gelu(x)),
        "matmul 256x256": best_ms(lambda: square @ square),
    }
    print(torch.backends.cpu.get_cpu_capability(), "  ".join(f"{k} {v:.3f} ms" for k, v in timings.items()))


if __name__ == "__main__":
    main()
