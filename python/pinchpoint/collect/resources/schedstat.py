"""How long a component's threads waited for a CPU: the run-queue delay the scheduler
keeps per thread in /proc/<pid>/task/<tid>/schedstat (its second field, nanoseconds).

A thread that waits for a core is computing-bound, not idle: CPU time alone cannot tell a
worker starved of CPU (by a full host or a neighbour) from a worker waiting on I/O, the
time it waited for a core can. Summed over a component's threads and divided by the
interval it is the number of its tasks that waited for a CPU, on average.
"""

from __future__ import annotations

import os

PROC = "/proc"


def run_delay_s(pid: int, proc: str = PROC) -> float | None:
    """Seconds the process's threads have waited for a CPU since each started; None when
    the kernel keeps no schedstat (or the process is gone)."""
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return None
    total = 0
    seen = False
    for tid in tids:
        try:
            with open(f"{proc}/{pid}/task/{tid}/schedstat", "rb") as f:
                fields = f.read().split()
        except OSError:  # the thread ended since listed
            continue
        if len(fields) >= 2 and fields[1].isdigit():
            total += int(fields[1])
            seen = True
    return total / 1e9 if seen else None
