"""`pinchpoint init` on an nginx passing gRPC calls (`grpc_pass`): a gRPC path takes no
query, so a log_format without `$http_x_pinchpoint` cannot match the calls, and init
says which format to use."""

from __future__ import annotations

from pathlib import Path

from test_nginx import main_conf, server, tier_of, write

from pinchpoint.logformats.nginx import NGINX_FORMAT, NGINX_GRPC_FORMAT


def _tier(root: Path, log_format: str, location: str) -> tuple[Path, list[str]]:
    http = (
        f"log_format pinchpoint '{log_format}';\n"
        f"access_log {root}/access.log pinchpoint;\n"
        + server(f"  location / {{ {location}; }}", listen="127.0.0.1:8080 http2")
    )
    conf = write(root, {"nginx.conf": main_conf(root, http)})
    tier = tier_of(conf)
    assert tier.log_format_string == log_format
    return conf, tier.warnings


def test_a_grpc_location_whose_log_lacks_the_tag_header_says_which_format_to_use(
    tmp_path: Path,
) -> None:
    conf, warnings = _tier(tmp_path, NGINX_FORMAT, "grpc_pass grpc://127.0.0.1:50051")
    (warning,) = [w for w in warnings if "grpc_pass" in w]
    assert warning.startswith(f"grpc_pass at {conf}:")
    assert f"`log_format pinchpoint '{NGINX_GRPC_FORMAT}';`" in warning


def test_a_grpc_location_logging_the_tag_header_or_a_proxied_one_warns_of_nothing(
    tmp_path: Path,
) -> None:
    _, warnings = _tier(tmp_path / "grpc", NGINX_GRPC_FORMAT, "grpc_pass 127.0.0.1:50051")
    assert [w for w in warnings if "log_format" in w or "grpc_pass" in w] == []
    _, warnings = _tier(tmp_path / "http", NGINX_FORMAT, "proxy_pass http://127.0.0.1:9000")
    assert [w for w in warnings if "log_format" in w or "grpc_pass" in w] == []
