"""Environment variables through which the traced stacks tell the fan-out app its callees
and their wait (fanout_app.py)."""

# The traced gateway's callees, their URLs space-separated, and each's wait.
FANOUT_CALLEES_ENV = "PINCHPOINT_FANOUT_CALLEES"
FANOUT_WAIT_ENV = "PINCHPOINT_FANOUT_WAIT_MS"
# The traced gateway's request: it calls every callee side by side.
FANOUT_PATH = "/fanout"
# The URL the lab's ASGI probe GETs for a request with `call=1` (asgi_probe.py).
ASGI_CALL_ENV = "PINCHPOINT_ASGI_CALL_URL"
