"""The terminal: the command's consoles and one-line messages (`console`), the SLA's
outcome of a run (`sla`), the verdict's step table and headline (`verdict`), and the
comparison of two runs (`comparison`).

The names below are the commands' everyday ones; they load rich on first use only, so
that `--help` does not pay for it. `verdict` and `comparison` load rich and the report's
tables when imported.
"""

from pinchpoint.terminal.console import Console, err_console, fail, warn
from pinchpoint.terminal.sla import sla_outcome

__all__ = ["Console", "err_console", "fail", "sla_outcome", "warn"]
