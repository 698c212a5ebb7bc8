"""The capacity model of the matrix: where each resource saturates in closed loop, how
the cores are shared beside a hog, and the users stepped past a knee."""

from __future__ import annotations

import math
import random

from pinchpoint_lab.matrix.spec import CORES, HEALTHY_SHARE, MARGIN, OVERHEAD_CPU_MS, PAST_KNEE


def first_level(levels: list[int], users: float) -> int:
    """The first stepped level with at least `users` users (the highest if none)."""
    return next((n for n in levels if n >= users - 1e-9), levels[-1])


def steps_for(knee: float, rng: random.Random, most: int = 64) -> tuple[int, int, int]:
    """Users from 1 past the knee, in 4 to 6 steps."""
    upper = min(most, max(4, math.ceil(PAST_KNEE * knee) + 1))
    count = rng.randint(4, 6)
    step = max(1, math.ceil((upper - 1) / (count - 1)))
    return 1, 1 + step * (count - 1), step


def cpu_at(rps: float, cpu_ms: float) -> float:
    """The stack's cores at `rps` requests/s of `cpu_ms` each."""
    return rps * (cpu_ms + OVERHEAD_CPU_MS) / 1000


def light(rps: float, cpu_ms: float, cores: float) -> bool:
    """The stack's CPU at `rps` stays under half of `cores`."""
    return cpu_at(rps, cpu_ms) <= HEALTHY_SHARE * cores


def hog_duties(cores: float) -> list[float]:
    """The hog's processes, each's share of a core (as neighbour.py's CpuHog runs)."""
    whole = math.floor(cores)
    return [1.0] * whole + ([cores - whole] if cores > whole else [])


def fair_shares(demands: list[float], cores: float) -> list[float]:
    """Each task's cores when `cores` are shared max-min fairly: a task gets what it asks,
    up to an equal share of what the tasks asking less left."""
    shares = [0.0] * len(demands)
    left = cores
    by_demand = sorted(range(len(demands)), key=lambda i: demands[i])
    for k, i in enumerate(by_demand):
        shares[i] = min(demands[i], left / (len(demands) - k))
        left -= shares[i]
    return shares


def stack_cores(tasks: int, hog: float) -> float:
    """The cores `tasks` busy processes of the stack (each at most one core) get beside
    a hog of `hog` cores."""
    duties = hog_duties(hog)
    return sum(fair_shares([*duties, *[1.0] * tasks], CORES)[len(duties) :])


def group_cores(hog: float) -> float:
    """The cores a cgroup's processes get beside a hog of `hog` cores: the scheduler shares
    the CPU between groups first, so however many of its processes are busy, a cgroup
    competes with each of the hog's processes as one task (seed 401: PostgreSQL in a quota
    of 0.58 beside a 1.5-core hog got 0.42-0.47 cores, throttled in 0-13% of periods)."""
    return stack_cores(1, hog)


def heavy(hog: float) -> bool:
    return hog > 1.0


def cpu_start(levels: list[int], knee: float, tasks: int, hog: float) -> int:
    """Where the host's CPU fills beside the hog: a one-core hog leaves it at the quiet
    knee (as measured); a heavier one moves it with the cores the stack gets."""
    return first_level(levels, knee * stack_cores(tasks, hog) / stack_cores(tasks, 1.0))


def separated(smallest: float, others: list[float]) -> bool:
    return all(smallest <= MARGIN * other for other in others)


def levels(users: tuple[int, int, int]) -> list[int]:
    lower, upper, step = users
    return list(range(lower, upper + 1, step))
