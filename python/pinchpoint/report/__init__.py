"""The self-contained `report.html` (`pinchpoint.report.html.write_report`), and the
tables and charts it shows (the terminal's step table and verdict, made from the same
tables, are in `pinchpoint.terminal.verdict`).

It reads the run folder and the verdict only, never the engine or the analysis code.
This package's `__init__` imports nothing, so that a light module here (`fmt`, `load`)
does not pull in the charts."""
