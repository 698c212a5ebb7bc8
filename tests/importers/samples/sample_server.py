"""The local server the Locust and k6 samples ran against (127.0.0.1:18089)."""

import random
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/slow"):
            time.sleep(random.uniform(0.02, 0.05))
        else:
            time.sleep(random.uniform(0.001, 0.005))
        code = 500 if self.path.startswith("/error") else 200
        body = b"ok\n"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", 18089), Handler).serve_forever()
