"""Errors of the demo stack."""


class StackError(RuntimeError):
    """The demo stack could not be configured, started or stopped."""


class NginxNotFound(StackError):
    """nginx is not installed; the message says how to install it."""


class StackTerminated(KeyboardInterrupt):
    """SIGTERM arrived while the demo stack was running; handled like Ctrl-C."""
