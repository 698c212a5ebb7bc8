"""gRPC calls: a request or flow step with `grpc = "package.Service/Method"` calls that
method, declared in `proto` (a path from the working folder, as a feed's file is; its
imports found in `import_paths`, then in its own folder), with `data` its request
message: a table, or a JSON text, whose strings may hold `${name}`. The engine compiles
the .proto and checks the message against it here, before the run; checks and captures
read the answer as JSON (a server-streaming call's: an array of its messages).

    [[flow.step]]
    name = "item"
    grpc = "shop.Catalog/GetItem"
    proto = "protos/shop.proto"
    data = { id = "${item}", with_stock = true }
    capture = [{ name = "price", json = "$.price" }]
"""

from __future__ import annotations

import json
from pathlib import Path

from pinchpoint.plan.toml import FieldError
from pinchpoint.plan.user_paths import NotUsable, open_input

# The record of each message a server-streaming call receives: `<request>/message`.
STREAM_RECORD = "message"
# A .proto larger than this is not one a service declares its methods in.
MAX_PROTO_BYTES = 16 << 20


def data_text(data: dict | str | None) -> str:
    """The request message as the engine reads it: JSON text (`{}` when none is given)."""
    if data is None:
        return "{}"
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


def grpc_fault(
    grpc: str | None, ws: str | None, path: str, method: str | None
) -> tuple[str, str] | None:
    """(field, why) when a gRPC call also names what only an HTTP request or a WebSocket
    has; `method` is the plan's own, None when it sets none."""
    if grpc is None:
        return None
    if ws is not None:
        return "ws", "a request is a WebSocket or a gRPC call, not both"
    if path:
        return "path", "a gRPC call's path is its method's: set grpc, not path"
    if method is not None and method != "POST":
        return "method", f"a gRPC call is a POST, not {method}"
    return None


def check_call(grpc: str, proto: str | None, import_paths: list[str], data: str) -> bool:
    """Whether the call answers with a stream; FieldError on the field at fault when the
    engine cannot make it from the .proto (a missing file, an unknown service or method,
    a field of `data` the message does not have)."""
    from pinchpoint import _engine

    if proto is None:
        raise FieldError("proto", "a gRPC call needs the .proto that declares its method")
    if Path(proto).exists():  # a missing one is named by the engine, with its import paths
        try:
            open_input(Path(proto), MAX_PROTO_BYTES, ".proto").close()
        except NotUsable as e:
            raise FieldError("proto", str(e)) from None
    try:
        return _engine.grpc_method(grpc, proto, import_paths, data)
    except ValueError as e:
        field, why = e.args if len(e.args) == 2 else ("grpc", str(e))
        raise FieldError(field, " ".join(str(why).split())) from None


def without_grpc(
    grpc: str | None, proto: str | None, import_paths: list[str], data: object
) -> str | None:
    """The field set for a gRPC call on a request that is not one."""
    if grpc is not None:
        return None
    given = [
        ("proto", proto is not None),
        ("import_paths", bool(import_paths)),
        ("data", data is not None),
    ]
    return next((name for name, set_ in given if set_), None)


def grpc_label(grpc: str) -> str:
    """A call as the run's tables name it."""
    return f"gRPC {grpc}"
