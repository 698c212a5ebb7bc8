"""What a `with` block does to the objects it holds: a Closing one is closed at its end, a
Started one started at its start and stopped at its end, however the block ends."""

import pytest

from pinchpoint.lifecycle import Closing, Started


class _Door(Closing):
    def __init__(self) -> None:
        self.events: list[str] = []

    def close(self) -> None:
        self.events.append("close")


class _Engine(Started):
    def __init__(self) -> None:
        self.events: list[str] = []

    def start(self) -> None:
        self.events.append("start")

    def stop(self) -> None:
        self.events.append("stop")


class _Careful(_Engine):
    """Sees what ended the block."""

    def leave(self, error: BaseException | None) -> None:
        self.events.append(f"leave {type(error).__name__}")


def test_a_closing_object_is_itself_in_the_block_and_closed_at_its_end() -> None:
    door = _Door()
    with door as held:
        assert held is door
        assert door.events == []
    assert door.events == ["close"]


def test_a_closing_object_is_closed_when_the_block_fails_and_the_error_goes_on() -> None:
    door = _Door()
    with pytest.raises(ValueError, match="inside"), door:
        raise ValueError("inside")
    assert door.events == ["close"]


def test_a_started_object_is_started_on_entry_and_stopped_on_exit() -> None:
    engine = _Engine()
    with engine as held:
        assert held is engine
        assert engine.events == ["start"]
    assert engine.events == ["start", "stop"]
    with pytest.raises(KeyboardInterrupt), _Engine() as failing:
        raise KeyboardInterrupt
    assert failing.events == ["start", "stop"]


def test_leave_is_told_what_ended_the_block() -> None:
    with _Careful() as calm:
        pass
    with pytest.raises(RuntimeError), _Careful() as failed:
        raise RuntimeError("x")
    assert (calm.events, failed.events) == (
        ["start", "leave NoneType"],
        ["start", "leave RuntimeError"],
    )
