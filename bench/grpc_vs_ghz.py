"""pinchpoint's gRPC calls per generator CPU-second beside its HTTP/1.1 requests and ghz's
calls, side by side in one run.

The servers are fast and not Python, so that the generator is the side measured: a Go
gRPC server (grpc-go, built here from the inline main.go below: every unary call
answered at once with the same small message) for the gRPC loads, nginx (`return 200`)
for the HTTP/1.1 one, each pinned to one core; each load in turn pinned to the other
core, for the same duration and concurrency, interleaved over several rounds:
- grpc: pinchpoint's engine, a unary call (`grpc = "bench.Shop/Echo"`, its message from
  the .proto), `--concurrency` users sharing `--connections` HTTP/2 connections;
- http1: pinchpoint's engine, a GET on HTTP/1.1, one connection per user (as HTTP/1.1
  has it);
- ghz: ghz v0.120.0 with the same .proto, message, concurrency and connections.
Measured: calls (requests) per CPU-second of the load generator's whole process, counted
the same way for each: `pinchpoint load plan.toml` and ghz each run as a child, their
user and system time read by wait4 when they exit (start-up, the load, the summary and
the exit; before, pinchpoint's was counted around the engine's run only), and calls per
second over the load's own duration. Printed per round and as medians, then
the ratios grpc/http1 and grpc/ghz (the bars: at least 0.5 and 1).

Needs two cores, nginx and Go (`go` on PATH or in /usr/local/go/bin); ghz is installed
with `go install` the first time (about a minute), and the server's modules fetched by
`go build`.

    .venv/bin/python bench/grpc_vs_ghz.py --seconds 10 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from engine_vs_wrk import pinchpoint_child, start_nginx

GHZ_VERSION = "v0.120.0"
SERVER_GO = """\
// A gRPC server answering every unary call at once with the same small message.
package main

import (
\t"flag"
\t"fmt"
\t"net"
\t"os"

\t"google.golang.org/grpc"
)

type raw struct{}

func (raw) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (raw) Unmarshal(data []byte, v any) error {
\t*(v.(*[]byte)) = append((*(v.(*[]byte)))[:0], data...)
\treturn nil
}
func (raw) Name() string { return "proto" }

// bench.Item{id: "b", name: "bench item", index: 1}
var answer = []byte{0x0a, 0x01, 'b', 0x12, 0x0a, 'b', 'e', 'n', 'c', 'h', ' ', 'i', 't', 'e', 'm', 0x18, 0x01}

func handle(_ any, stream grpc.ServerStream) error {
\tvar in []byte
\tif err := stream.RecvMsg(&in); err != nil {
\t\treturn err
\t}
\tout := answer
\treturn stream.SendMsg(&out)
}

func main() {
\taddr := flag.String("addr", "127.0.0.1:0", "where to listen")
\tflag.Parse()
\tlis, err := net.Listen("tcp", *addr)
\tif err != nil {
\t\tfmt.Fprintln(os.Stderr, err)
\t\tos.Exit(1)
\t}
\tfmt.Println(lis.Addr().(*net.TCPAddr).Port)
\ts := grpc.NewServer(grpc.ForceServerCodec(raw{}), grpc.UnknownServiceHandler(handle))
\t_ = s.Serve(lis)
}
"""
GO_MOD = "module benchserver\n\ngo 1.21\n\nrequire google.golang.org/grpc v1.56.3\n"
PROTO = """syntax = "proto3";
package bench;
message Ask { string id = 1; int32 n = 2; }
message Item { string id = 1; string name = 2; int32 index = 3; }
service Shop { rpc Echo(Ask) returns (Item); }
"""
METHOD = "bench.Shop/Echo"
DATA = '{"id": "b"}'


def go_binary() -> str:
    found = shutil.which("go") or shutil.which("go", path="/usr/local/go/bin")
    if found is None:
        raise SystemExit("Go is not installed: https://go.dev/dl/ (go on PATH)")
    return found


def ghz_binary(go: str) -> str:
    gopath = subprocess.run([go, "env", "GOPATH"], capture_output=True, text=True, check=True)
    path = Path(gopath.stdout.strip().split(os.pathsep)[0]) / "bin" / "ghz"
    if not path.exists():
        print(f"installing ghz {GHZ_VERSION} with go install (about a minute)", flush=True)
        argv = [go, "install", f"github.com/bojand/ghz/cmd/ghz@{GHZ_VERSION}"]
        subprocess.run(argv, check=True)
    return str(path)


def start_server(go: str, workdir: Path, core: int) -> tuple[subprocess.Popen, int]:
    """The Go gRPC server, built in workdir, listening on a free port of 127.0.0.1."""
    src = workdir / "server"
    src.mkdir()
    (src / "main.go").write_text(SERVER_GO)
    (src / "go.mod").write_text(GO_MOD)
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    subprocess.run([go, "mod", "tidy"], cwd=src, env=env, check=True, capture_output=True)
    subprocess.run([go, "build", "-o", "server", "."], cwd=src, env=env, check=True)
    argv = ["taskset", "-c", str(core), str(src / "server")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def run_engine(text: str, workdir: Path, core: int) -> dict:
    """One `pinchpoint load` of the plan in a child on `core`: its calls and the whole
    child's CPU time."""
    plan = Path(tempfile.mkdtemp(dir=workdir)) / "bench.toml"
    plan.write_text(text)
    summary = pinchpoint_child([str(plan)], core)
    shutil.rmtree(plan.parent, ignore_errors=True)
    errors = sum(summary["errors"].values())
    calls = summary["requests"] - errors
    return {
        "calls": calls,
        "errors": errors,
        "seconds": summary["duration_s"],
        "cpu_s": summary["cpu_s"],
    }


def engine_plan(url: str, args: argparse.Namespace, proto: Path | None) -> str:
    load = f'users = {args.concurrency}\nduration = "{args.seconds:g}s"\nwarmup = "0s"\n'
    load += 'threads = 1\ntimeout = "5s"\n'
    if proto is None:
        return f'[target]\nurl = "{url}"\n\n[load]\n{load}\n[[request]]\npath = "/"\n'
    streams = -(-args.concurrency // args.connections)
    target = f'url = "{url}"\nhttp = "2"\nstreams_per_connection = {streams}\n'
    call = f'grpc = "{METHOD}"\nproto = "{proto}"\ndata = \'{DATA}\'\n'
    return f"[target]\n{target}\n[load]\n{load}\n[[request]]\n{call}"


def run_ghz(ghz: str, port: int, proto: Path, args: argparse.Namespace, core: int) -> dict:
    argv = ["taskset", "-c", str(core), ghz, "--insecure", "--cpus", "1"]
    argv += ["--proto", str(proto), "--call", METHOD, "-d", DATA, "-O", "json"]
    argv += ["-c", str(args.concurrency), "--connections", str(args.connections)]
    argv += ["-z", f"{args.seconds:g}s", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"ghz failed: {out[-500:]}")
    report = json.loads(out)
    codes = report.get("statusCodeDistribution") or {}
    ok = int(codes.get("OK", 0))
    return {
        "calls": ok,
        "errors": int(report["count"]) - ok,
        "seconds": report["total"] / 1e9,
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=50, help="users; ghz's -c")
    ap.add_argument("--connections", type=int, default=5, help="HTTP/2 connections for gRPC")
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        print("needs two cores: one for the servers, one for the generator", file=sys.stderr)
        return 2
    go = go_binary()
    ghz = ghz_binary(go)
    with tempfile.TemporaryDirectory(prefix="pinchpoint-grpc-bench-") as tmp:
        workdir = Path(tmp)
        proto = workdir / "shop.proto"
        proto.write_text(PROTO)
        (workdir / "nginx").mkdir()
        server, grpc_port = start_server(go, workdir, core=0)
        nginx, http_port = start_nginx(workdir / "nginx", core=0)
        grpc_plan = engine_plan(f"http://127.0.0.1:{grpc_port}", args, proto)
        http_plan = engine_plan(f"http://127.0.0.1:{http_port}", args, None)
        runners: dict[str, Callable[[], dict]] = {
            "grpc": lambda: run_engine(grpc_plan, workdir, core=1),
            "http1": lambda: run_engine(http_plan, workdir, core=1),
            "ghz": lambda: run_ghz(ghz, grpc_port, proto, args, core=1),
        }
        results: dict[str, list[dict]] = {name: [] for name in runners}
        try:
            for r in range(args.rounds):
                for name, runner in runners.items():
                    got = runner()
                    got["per_cpu_s"] = got["calls"] / got["cpu_s"]
                    got["rate"] = got["calls"] / got["seconds"]
                    got["cores"] = got["cpu_s"] / got["seconds"]
                    results[name].append(got)
                    print(
                        f"round {r + 1} {name:>5}: {got['rate']:>9,.0f} calls/s  "
                        f"{got['per_cpu_s']:>9,.0f} per generator CPU-s  "
                        f"generator {got['cores']:.2f} cores  errors {got['errors']}",
                        flush=True,
                    )
        finally:
            for proc in (server, nginx):
                proc.terminate()
                proc.wait(timeout=10)
    keys = ("rate", "per_cpu_s", "cores")
    med = {n: {k: statistics.median(x[k] for x in rs) for k in keys} for n, rs in results.items()}
    print()
    for n, m in med.items():
        print(
            f"median {n:>5}: {m['rate']:>9,.0f} calls/s  {m['per_cpu_s']:>9,.0f} per generator "
            f"CPU-s  generator {m['cores']:.2f} cores"
        )
    grpc = med["grpc"]["per_cpu_s"]
    print()
    print(f"ratio grpc/http1: {grpc / med['http1']['per_cpu_s']:.2f}x per CPU-s (bar: 0.5)")
    print(f"ratio grpc/ghz:   {grpc / med['ghz']['per_cpu_s']:.2f}x per CPU-s (bar: 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
