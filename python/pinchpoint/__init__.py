"""pinchpoint: finds the component that limits a backend stack under load.

This module imports nothing: the probe (`pinchpoint.probe`) runs inside users' apps and
must pull in the standard library only."""


def open(path):
    """Open a run folder: a `pinchpoint.api.Run` with `.requests`, `.tiers`, `.resources`
    (Polars DataFrames), `.verdict`, `.run` (dicts) and `.plan_text`, each read on first
    use. Raises FileNotFoundError when `path` is not a run folder."""
    from pinchpoint.api import open_run

    return open_run(path)
