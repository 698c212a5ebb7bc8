"""The Universal Scalability Law fit, on synthetic and recorded steps."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from pinchpoint.analyze.usl import fit_usl, usl

RUNS = Path(__file__).parent.parent / "data" / "runs"
USERS = np.arange(1, 33, dtype=float)
LAMBDA, SIGMA, KAPPA = 100.0, 0.05, 0.002
PEAK_LOAD = math.sqrt((1 - SIGMA) / KAPPA)  # 21.8 users


def test_exact_usl_data_gives_back_its_parameters() -> None:
    fit = fit_usl(USERS, usl(USERS, LAMBDA, SIGMA, KAPPA))
    assert fit is not None
    assert fit.lambda_ == pytest.approx(LAMBDA, rel=1e-4)
    assert fit.sigma == pytest.approx(SIGMA, rel=1e-3)
    assert fit.kappa == pytest.approx(KAPPA, rel=1e-3)
    assert fit.peak_load == pytest.approx(PEAK_LOAD, rel=1e-3)
    assert fit.peak_throughput == pytest.approx(739.77, rel=1e-3)
    assert fit.r_squared == pytest.approx(1.0)
    assert fit.rms_relative_error < 1e-6


def test_noisy_usl_data_gives_back_its_parameters_within_tolerance() -> None:
    rng = np.random.default_rng(3)
    throughput = usl(USERS, LAMBDA, SIGMA, KAPPA) * (1 + rng.normal(0, 0.02, USERS.size))
    fit = fit_usl(USERS, throughput)
    assert fit is not None
    assert fit.lambda_ == pytest.approx(LAMBDA, rel=0.05)
    assert fit.sigma == pytest.approx(SIGMA, abs=0.01)
    assert fit.kappa == pytest.approx(KAPPA, rel=0.1)
    assert fit.peak_load == pytest.approx(PEAK_LOAD, rel=0.05)
    assert fit.peak_throughput == pytest.approx(739.77, rel=0.03)
    assert fit.r_squared > 0.99
    assert fit.rms_relative_error == pytest.approx(0.02, abs=0.01)


def test_linear_throughput_has_no_coherency_cost_and_no_peak() -> None:
    fit = fit_usl(USERS, 100 * USERS)
    assert fit is not None
    assert fit.lambda_ == pytest.approx(100, rel=1e-4)
    assert fit.kappa == pytest.approx(0, abs=1e-8)
    assert fit.sigma == pytest.approx(0, abs=1e-6)
    assert fit.peak_load is None
    assert fit.peak_throughput is None


def test_contention_alone_gives_a_ceiling_but_no_peak_load() -> None:
    fit = fit_usl(USERS, usl(USERS, LAMBDA, 0.1, 0.0))
    assert fit is not None
    assert fit.peak_load is None
    assert fit.peak_throughput == pytest.approx(LAMBDA / 0.1, rel=1e-3)


def test_fewer_than_three_steps_have_no_fit() -> None:
    assert fit_usl([1, 2], [100, 190]) is None
    assert fit_usl([1, 2, 3], [100, 0, None]) is None


def test_two_worker_recorded_run_peaks_near_its_measured_maximum() -> None:
    steps = json.loads((RUNS / "demo-pool2" / "verdict.json").read_text())["steps"]
    throughput = [s["throughput_rps"] for s in steps]
    fit = fit_usl([s["users"] for s in steps], throughput)
    assert fit is not None
    assert fit.peak_throughput == pytest.approx(max(throughput), rel=0.15)
    assert fit.peak_load is not None and 3 <= fit.peak_load <= 7
    assert fit.r_squared > 0.95


def test_dict_uses_json_names() -> None:
    fit = fit_usl(USERS, usl(USERS, LAMBDA, SIGMA, KAPPA))
    assert fit is not None
    assert set(fit.as_dict()) == {
        "lambda",
        "sigma",
        "kappa",
        "peak_throughput",
        "peak_load",
        "r_squared",
        "rms_relative_error",
    }
