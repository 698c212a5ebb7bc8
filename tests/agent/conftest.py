"""Every agent test's plans read the agents' token from TOKEN_ENV, as a plan must."""

from __future__ import annotations

import pytest
from agent_helpers import TOKEN, TOKEN_ENV


@pytest.fixture(autouse=True)
def _agent_token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
