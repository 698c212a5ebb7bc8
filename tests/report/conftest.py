"""Fixtures: a verdict and a complete run folder (see fake_run.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_run import RUN_ID, make_verdict, write_run


@pytest.fixture
def verdict() -> dict[str, Any]:
    return make_verdict()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / RUN_ID)
