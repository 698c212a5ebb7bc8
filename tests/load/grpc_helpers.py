"""A real grpcio server for the gRPC tests: the Shop service of PROTO, its stubs generated
from the .proto by grpc_tools, with server reflection; Echo answers after DELAY_MS and
Count sends `n` items DELAY_MS apart. The tags of the calls it served are kept. And nginx
passing gRPC calls to it."""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
from grpc_reflection.v1alpha import reflection
from grpc_tools import protoc

from pinchpoint.demo import find_nginx
from pinchpoint_lab.ports import end

DELAY_MS = 20
PROTO = """syntax = "proto3";
package test;
message Ask { string id = 1; int32 n = 2; }
message Item { string id = 1; string name = 2; int32 index = 3; }
service Shop {
  rpc Echo(Ask) returns (Item);
  rpc Count(Ask) returns (stream Item);
}
"""


def open_plan(phase_s: float) -> str:
    """An open-loop plan of echo calls and two-message streams, 40/s then 80/s for
    `phase_s` each; PORT and PROTO are the target's port and the .proto's path."""
    phases = ", ".join(
        f'{{ duration = "{phase_s:g}s", arrival_rate = {rate} }}' for rate in (40, 80)
    )
    return f"""
[target]
url = "http://127.0.0.1:PORT"
http = "2"

[load]
phase = [{phases}]

[[request]]
grpc = "test.Shop/Echo"
proto = "PROTO"
data = {{ id = "open" }}

[[request]]
grpc = "test.Shop/Count"
proto = "PROTO"
data = '{{"id": "open", "n": 2}}'
"""


class Server:
    """The Shop service's methods; `tags` keeps each call's `x-pinchpoint` metadata."""

    def __init__(self, pb: ModuleType) -> None:
        self.pb = pb
        self.tags: list[str] = []
        self.lock = threading.Lock()

    def _seen(self, context: grpc.ServicerContext) -> None:
        tag = dict(context.invocation_metadata()).get("x-pinchpoint", "")
        with self.lock:
            self.tags.append(str(tag))

    def Echo(self, ask: Any, context: grpc.ServicerContext) -> Any:
        self._seen(context)
        time.sleep(DELAY_MS / 1000)
        return self.pb.Item(id=ask.id, name=f"item {ask.id}", index=0)

    def Count(self, ask: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        self._seen(context)
        for i in range(ask.n):
            time.sleep(DELAY_MS / 1000)
            yield self.pb.Item(id=ask.id, name=f"item {ask.id}", index=i + 1)


@dataclass(frozen=True)
class Shop:
    port: int
    proto: Path
    server: Server


@contextmanager
def shop(folder: Path, interceptors: Sequence[grpc.ServerInterceptor] = ()) -> Iterator[Shop]:
    """The Shop service on 127.0.0.1 (plaintext HTTP/2), its .proto written in folder;
    `interceptors` wrap its calls (OpenTelemetry's, to trace them)."""
    proto = folder / "shop.proto"
    proto.write_text(PROTO)
    args = ["protoc", f"-I{folder}", f"--python_out={folder}", f"--grpc_python_out={folder}"]
    assert protoc.main([*args, str(proto)]) == 0
    sys.path.insert(0, str(folder))
    try:
        pb = importlib.import_module("shop_pb2")
        pb_grpc = importlib.import_module("shop_pb2_grpc")
    finally:
        sys.path.remove(str(folder))
    servicer = Server(pb)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), interceptors=interceptors)
    pb_grpc.add_ShopServicer_to_server(servicer, server)
    names = (pb.DESCRIPTOR.services_by_name["Shop"].full_name, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield Shop(port, proto, servicer)
    finally:
        server.stop(grace=None)


@dataclass(frozen=True)
class GrpcNginx:
    port: int
    access_log: Path
    pid_file: Path


@contextmanager
def grpc_nginx(folder: Path, upstream_port: int, log_format: str) -> Iterator[GrpcNginx]:
    """nginx on 127.0.0.1 taking plaintext HTTP/2 (h2c) and passing every call to the
    gRPC server at upstream_port (`grpc_pass`), its access log in log_format."""
    nginx = find_nginx()
    folder.mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    user = "user root;\n" if os.geteuid() == 0 else ""
    access_log, pid_file = folder / "access.log", folder / "nginx.pid"
    (folder / "nginx.conf").write_text(
        f"""daemon off;
{user}worker_processes 1;
pid {pid_file};
error_log {folder / "error.log"} warn;
events {{ worker_connections 1024; }}
http {{
    log_format pinchpoint '{log_format}';
    access_log {access_log} pinchpoint;
{temp}
    server {{
        listen 127.0.0.1:{port} http2;
        keepalive_requests 1000000;
        location / {{
            grpc_pass grpc://127.0.0.1:{upstream_port};
            grpc_read_timeout 300s;
        }}
    }}
}}
"""
    )
    argv = [str(nginx), "-p", f"{folder}/", "-c", str(folder / "nginx.conf")]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            if proc.poll() is not None:
                error = folder / "error.log"
                raise RuntimeError(f"nginx exited: {error.read_text() if error.exists() else ''}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("nginx is not listening after 10 s") from None
                time.sleep(0.05)
        yield GrpcNginx(port, access_log, pid_file)
    finally:
        end(proc)
