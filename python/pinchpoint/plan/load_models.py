"""The plan's `[load]`: closed-loop steps, users and stages with their think time,
open-loop phases, and the levels the engine runs them as."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator

from pinchpoint.plan.toml import Duration, FieldError, Strict

MAX_RATE = 1_000_000.0  # requests per second
MAX_COUNT = 1_000_000_000
# Closed-loop users: one connection each, so more than the ports one address has.
MAX_USERS = 100_000
# Engine threads: far more than any machine's cores.
MAX_THREADS = 1024


def _think(value: object) -> object:
    """A bare duration is a constant think time."""
    return value if isinstance(value, dict) else {"constant": value}


class ThinkTime(Strict):
    """Closed loop: a user's pause between a response and its next request, one of
    `constant`, `uniform = [min, max]` or `exponential = mean`."""

    constant: Duration | None = None
    uniform: tuple[Duration, Duration] | None = None
    exponential: Duration | None = None

    @model_validator(mode="after")
    def _one(self) -> ThinkTime:
        given = [n for n in ("constant", "uniform", "exponential") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("set one of constant, uniform = [min, max] or exponential = mean")
        if self.uniform is not None and self.uniform[0] > self.uniform[1]:
            raise FieldError(
                "uniform",
                f"the minimum ({self.uniform[0]:g}s) is above the maximum ({self.uniform[1]:g}s)",
            )
        return self


Think = Annotated[ThinkTime, BeforeValidator(_think)]
Rate = Annotated[float, Field(ge=0, le=MAX_RATE)]


class Stage(Strict):
    """Closed loop: go linearly from the previous stage's users (0 before the first) to
    `users` over `ramp`, then hold them for `hold`."""

    users: int = Field(ge=0, le=MAX_USERS)
    ramp: Duration = 0.0
    hold: Duration = 0.0

    @model_validator(mode="after")
    def _some_time(self) -> Stage:
        if self.ramp == 0 and self.hold == 0:
            raise FieldError("hold", "a stage needs a ramp or a hold above zero")
        return self


class Phase(Strict):
    """Open loop, as Artillery's phases: `arrival_rate` for `duration`; with `ramp_to`,
    linearly from arrival_rate to ramp_to; `arrival_count` spread over `duration`;
    or `pause` (no request for that long)."""

    name: str | None = None
    duration: Duration | None = None
    arrival_rate: Rate | None = None
    ramp_to: Rate | None = None
    arrival_count: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    pause: Duration | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> Phase:
        if self.pause is not None:
            for other in ("duration", "arrival_rate", "ramp_to", "arrival_count"):
                if getattr(self, other) is not None:
                    raise FieldError(other, "a pause phase has only a name and its pause")
            if self.pause <= 0:
                raise FieldError("pause", "a pause must last more than zero seconds")
            return self
        if self.ramp_to is not None and self.arrival_rate is None:
            raise FieldError(
                "ramp_to", "a ramp goes from arrival_rate to ramp_to: set arrival_rate"
            )
        if self.arrival_rate is None and self.arrival_count is None:
            raise ValueError(
                "a phase needs arrival_rate (and ramp_to for a ramp), arrival_count, or pause"
            )
        if self.arrival_rate is not None and self.arrival_count is not None:
            raise FieldError("arrival_count", "set arrival_rate or arrival_count, not both")
        if self.duration is None:
            raise FieldError("duration", "the phase needs a duration")
        if self.duration <= 0:
            raise FieldError("duration", "a phase must last more than zero seconds")
        if self.arrival_count is not None and self.arrival_count / self.duration > MAX_RATE:
            raise FieldError(
                "arrival_count",
                f"{self.arrival_count} arrivals in {self.duration:g}s: "
                f"more than {MAX_RATE:g} requests per second",
            )
        return self

    @property
    def seconds(self) -> float:
        return self.pause if self.pause is not None else self.duration or 0.0

    def rate(self) -> float:
        """The phase's mean target rate, requests per second."""
        if self.pause is not None:
            return 0.0
        if self.arrival_count is not None:
            return self.arrival_count / self.seconds
        start = self.arrival_rate or 0.0
        end = self.ramp_to if self.ramp_to is not None else start
        return (start + end) / 2


@dataclass(frozen=True)
class Level:
    """A step or phase of the plan as the engine runs it and the analysis reads it."""

    index: int
    # "users" (closed loop) or "rate" (open loop, requests per second)
    kind: str
    # users, or the target rate; the mean over a ramp
    level: float
    duration: float
    name: str | None = None
    # closed loop: users at the end of the step, and where a ramp starts
    users: int = 0
    ramp_from: int | None = None
    # open loop
    phase: Phase | None = None


def _open_only(load: Load, fields: tuple[str, ...]) -> None:
    for name in fields:
        if name in load.model_fields_set:
            raise FieldError(
                name,
                f'{name} is open loop only: add [[load.phase]], or loop = "open" to a step plan',
            )


class Load(Strict):
    """How the load goes. Closed loop (users that wait for each answer): a step plan
    (`lower` to `upper` users by `step`, each for `duration`), `users` for `duration`,
    or `[[load.stage]]` ramps and holds. Open loop (requests at a scheduled rate,
    answered or not): `[[load.phase]]` as Artillery has them, or `loop = "open"` with a
    step plan in requests per second."""

    loop: Literal["closed", "open"] | None = None
    lower: float | None = Field(default=None, gt=0)
    upper: float | None = Field(default=None, gt=0)
    step: float = Field(default=1, gt=0)
    duration: Duration | None = None
    users: int | None = Field(default=None, ge=1, le=MAX_USERS)
    stage: list[Stage] = Field(default_factory=list)
    phase: list[Phase] = Field(default_factory=list)
    think_time: Think = ThinkTime(constant=0.0)
    arrivals: Literal["uniform", "poisson"] = "uniform"
    seed: int = Field(default=1, ge=0, lt=2**64)
    max_in_flight: int = Field(default=1000, ge=1, le=1_000_000)
    timeout: Duration = Field(default=10.0, gt=0)
    warmup: Duration = 0.5
    threads: int = Field(default=0, ge=0, le=MAX_THREADS)
    # A step plan of users searched for its knee (analyze/knee_search.py) instead of run whole.
    find_knee: bool = False
    # `file.py:function` or `module:function`, called with the request of each flow step
    # marked `hook = true` before it is sent (load/hooks.py).
    hook: str | None = None
    # A locustfile whose users run the closed-loop steps instead of the plan's requests
    # (load/locust_steps.py); a path relative to the working folder.
    locustfile: str | None = Field(default=None, min_length=1)

    @property
    def open(self) -> bool:
        return self.loop == "open" or (self.loop is None and bool(self.phase))

    def searching_knee(self) -> Load:
        """This load with `find_knee` on (`--find-knee`), checked as the plan would be.
        Raises pydantic's ValidationError when the shape cannot be searched."""
        return type(self).model_validate({**self.model_dump(exclude_unset=True), "find_knee": True})

    @model_validator(mode="after")
    def _check_shape(self) -> Load:
        stepped = self.lower is not None or self.upper is not None
        shapes = [
            name
            for name, given in (
                ("lower", stepped),
                ("users", self.users is not None),
                ("stage", bool(self.stage)),
                ("phase", bool(self.phase)),
            )
            if given
        ]
        if not shapes:
            raise ValueError(
                "set lower, upper and duration (a step plan), users and duration, "
                "[[load.stage]] or [[load.phase]]"
            )
        if len(shapes) > 1:
            loc = (shapes[1], 0) if shapes[1] in ("stage", "phase") else shapes[1]
            raise FieldError(loc, f"{shapes[1]} cannot go with {shapes[0]}: choose one load shape")
        if self.find_knee:
            self._check_find_knee(stepped)
        if self.locustfile is not None and (self.open or self.find_knee):
            raise FieldError(
                "locustfile",
                "a locustfile's users run closed-loop steps: not open loop "
                '(loop = "open" or [[load.phase]]) and not find_knee',
            )
        if self.loop == "closed" and self.phase:
            raise FieldError("loop", 'arrival phases are open loop: remove loop = "closed"')
        if self.open and (self.stage or self.users is not None):
            field = "stage" if self.stage else "users"
            raise FieldError("loop", f'{field} is closed loop: remove loop = "open"')
        if stepped:
            self._check_steps()
        elif self.users is not None and self.duration is None:
            raise FieldError("users", "users need a duration")
        elif (self.stage or self.phase) and self.duration is not None:
            raise FieldError("duration", "stages and phases have their own durations")
        if self.open and "think_time" in self.model_fields_set:
            raise FieldError(
                "think_time", "think time is closed loop: an open-loop schedule waits for no answer"
            )
        if not self.open:
            _open_only(self, ("arrivals", "max_in_flight"))
        for level in self.levels():
            if level.phase is not None and level.phase.pause is not None:
                continue
            if self.warmup >= level.duration:
                what = "phase" if self.open else "step"
                raise FieldError(
                    "warmup",
                    f"warmup ({self.warmup:g}s) must be shorter than each {what}: "
                    f"{what} {level.index} lasts {level.duration:g}s",
                )
        return self

    def _check_find_knee(self, stepped: bool) -> None:
        if self.open:
            raise FieldError(
                "find_knee",
                "find_knee steps closed-loop users: it does not go with open loop "
                '(loop = "open" or [[load.phase]])',
            )
        if not stepped:
            raise FieldError(
                "find_knee",
                "find_knee searches the users between lower and upper: "
                "set lower, upper and duration instead of users or [[load.stage]]",
            )
        if self.lower is not None and self.upper is not None and self.upper <= self.lower:
            raise FieldError(
                "upper",
                f"find_knee needs upper above lower ({self.lower:g}): there is nothing to search",
            )

    def _check_steps(self) -> None:
        if self.lower is None or self.upper is None:
            raise FieldError(
                "upper" if self.upper is None else "lower", "a step plan needs lower and upper"
            )
        if self.duration is None:
            raise ValueError("a step plan needs a duration")
        if self.duration <= 0:
            raise FieldError("duration", "duration must be above zero")
        if self.upper < self.lower:
            raise FieldError("upper", f"upper ({self.upper:g}) is below lower ({self.lower:g})")
        if not self.open:
            for name in ("lower", "upper", "step"):
                value = getattr(self, name)
                if value != int(value):
                    raise FieldError(name, f"{name} counts users: a whole number, not {value:g}")
            if self.upper > MAX_USERS:
                raise FieldError("upper", f"at most {MAX_USERS} users")
        elif self.upper > MAX_RATE:
            raise FieldError("upper", f"at most {MAX_RATE:g} requests per second")
        if (self.upper - self.lower) / self.step > 10_000:
            raise FieldError("step", "more than 10 000 steps")

    def step_users(self) -> list[int]:
        """Users of each closed-loop step (at the end of a ramp); empty for open loop."""
        return [lv.users for lv in self.levels()] if not self.open else []

    def levels(self) -> list[Level]:
        """Every step or phase in order, as a load level."""
        if self.lower is not None and self.upper is not None and self.duration is not None:
            count = int((self.upper - self.lower) / self.step + 1e-9) + 1
            values = [self.lower + k * self.step for k in range(count)]
            if self.open:
                return [
                    Level(
                        i,
                        "rate",
                        v,
                        self.duration,
                        phase=Phase(duration=self.duration, arrival_rate=v),
                    )
                    for i, v in enumerate(values)
                ]
            return [Level(i, "users", v, self.duration, users=int(v)) for i, v in enumerate(values)]
        if self.users is not None and self.duration is not None:
            return [Level(0, "users", float(self.users), self.duration, users=self.users)]
        if self.stage:
            out: list[Level] = []
            before = 0
            for n, s in enumerate(self.stage, start=1):
                if s.ramp > 0:
                    out.append(
                        Level(
                            len(out),
                            "users",
                            (before + s.users) / 2,
                            s.ramp,
                            name=f"stage {n}: ramp {before} → {s.users} users",
                            users=s.users,
                            ramp_from=before,
                        )
                    )
                if s.hold > 0:
                    out.append(
                        Level(
                            len(out),
                            "users",
                            float(s.users),
                            s.hold,
                            name=f"stage {n}: hold {s.users} users",
                            users=s.users,
                        )
                    )
                before = s.users
            return out
        return [
            Level(i, "rate", p.rate(), p.seconds, name=p.name, phase=p)
            for i, p in enumerate(self.phase)
        ]
