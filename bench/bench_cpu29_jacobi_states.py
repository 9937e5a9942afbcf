"""The 512 x 512 Jacobi step of bench_cpu29.py, anywave's cpu target against NumPy, in three
states of one process (issue 29): fresh, right after a 1024^2 float32 matmul, and one second
later. NumPy's slice expression allocates four 1 MiB temporaries; glibc serves them with mmap in a
fresh process and from the heap once an array over its (dynamic) mmap threshold has been freed,
so NumPy's time moves about 4x between the states. Prints medians of 9 interleaved calls (wall
and process CPU time).

    PYTHONPATH=src python bench/bench_cpu29_jacobi_states.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_cpu29 as B  # noqa: E402


def measure(tag: str, u: np.ndarray) -> None:
    B.jacobi(u, "cpu")
    B.np_jacobi(u)
    wall: dict[str, list[float]] = {"anywave": [], "numpy": []}
    cpu: dict[str, list[float]] = {"anywave": [], "numpy": []}
    fns = {"anywave": lambda: B.jacobi(u, "cpu"), "numpy": lambda: B.np_jacobi(u)}
    for _ in range(9):
        for k, f in fns.items():
            t, p = time.perf_counter(), time.process_time()
            f()
            wall[k].append(time.perf_counter() - t)
            cpu[k].append(time.process_time() - p)
    print(tag + ": " + "; ".join(f"{k} {statistics.median(v) * 1e3:.3f} ms wall, "
                                  f"{statistics.median(cpu[k]) * 1e3:.3f} ms CPU" for k, v in wall.items()))


def main() -> int:
    u = np.random.default_rng(0).standard_normal((512, 512), dtype=np.float32)
    measure("fresh process", u)
    a = np.random.default_rng(1).standard_normal((1024, 1024), dtype=np.float32)
    _ = a @ a
    measure("after a 1024^2 matmul", u)
    time.sleep(1)
    measure("one second later", u)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
