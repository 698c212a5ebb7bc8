"""Drives the Rust load engine from Python."""

from pinchpoint.load.engine import LoadResult, run_steps

__all__ = ["LoadResult", "run_steps"]
