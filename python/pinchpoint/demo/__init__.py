"""The embedded demo stack: nginx → gunicorn → a Flask app with the probe, on loopback.

with DemoStack(workdir, workers=2) as stack:
    ...  # load stack.url; stack.components() describes the tiers for the plan
"""

from pinchpoint.demo.errors import NginxNotFound, StackError, StackTerminated
from pinchpoint.demo.nginx import find_nginx
from pinchpoint.demo.stack import DemoStack

__all__ = ["DemoStack", "NginxNotFound", "StackError", "StackTerminated", "find_nginx"]
