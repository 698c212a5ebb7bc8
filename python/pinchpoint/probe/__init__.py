"""The ``/sys_perf_check`` probe: a bounded unit of work to mount in the app under test.

Mount it in one line:

    app.wsgi_app = ProbeWSGI(app.wsgi_app)             # Flask
    application = ProbeWSGI(get_wsgi_application())    # Django (wsgi.py)
    app.add_middleware(ProbeASGI)                      # Starlette / FastAPI
    app = ProbeASGI(app)                               # any other ASGI app

``GET /sys_perf_check?cpu=2.5&wait=8&bytes=2048`` burns 2.5 ms of CPU time in the serving
thread, then waits 8 ms without using CPU, then answers a 2048-byte JSON body. Defaults:
``cpu=10``, ``wait=0``, a short JSON body. ``cpu + wait`` above ``max_ms`` (default 1000) and
malformed parameters get a 400 naming the parameter; methods other than GET and HEAD get a 405.
Requests to other paths pass straight through.

With ``log_path=...`` (or ``PINCHPOINT_PROBE_LOG`` in the app's environment, where
``pinchpoint init`` finds it), every request that carries the pinchpoint tag (``pp_run=`` in the query
or an ``X-Pinchpoint`` header), on any path, appends one JSON line to that file:
``{"ts": ..., "method": ..., "uri": ..., "status": ..., "duration_s": ...}``.

Standard library only; importing this package does nothing by itself.
"""

from .asgi import ProbeASGI
from .work import PROBE_PATH
from .wsgi import ProbeWSGI

__all__ = ["PROBE_PATH", "ProbeASGI", "ProbeWSGI"]
