"""interrupts.catching: SIGINT and SIGTERM counted, not fatal, while a run goes."""

from __future__ import annotations

import os
import signal

import pytest

from pinchpoint.load import interrupts


def test_signals_are_counted_and_the_handlers_restored() -> None:
    before = {sig: signal.getsignal(sig) for sig in interrupts.SIGNALS}
    said: list[str] = []
    with interrupts.catching(say=said.append) as caught:
        assert interrupts.active() is caught and interrupts.count() == 0
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        assert caught.signals == [signal.SIGTERM, signal.SIGINT]
        assert caught.first_name() == "SIGTERM" and caught.exit_code() == 143
        caught.tell("a line")
        with interrupts.catching() as inner:
            assert inner is caught, "nested, the outer count is kept"
    assert said == ["a line"]
    assert interrupts.active() is None and interrupts.count() == 0
    assert {sig: signal.getsignal(sig) for sig in interrupts.SIGNALS} == before


def test_sigint_exits_130_and_a_third_signal_raises() -> None:
    with interrupts.catching() as caught:
        os.kill(os.getpid(), signal.SIGINT)
        assert caught.exit_code() == 130
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert caught.count() == 3


def test_no_signal_no_exit_code() -> None:
    with interrupts.catching() as caught:
        pass
    assert caught.exit_code() == 0 and caught.first_name() == ""
