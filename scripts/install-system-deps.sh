#!/usr/bin/env bash
# Installs the system packages pinchpoint starts for real: `demo` needs nginx; `test` also
# needs what the tests run against: a browser for the report, wrk for the benchmarks, the
# servers whose own log lines the format tests parse, Prometheus with node_exporter, and the
# databases the collectors sample from inside.
set -euo pipefail
mode=${1:-demo}

need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
have nginx || need+=(nginx-light)
python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
if [ "$mode" = test ]; then
  have chromium || need+=(chromium)
  have wrk || need+=(wrk)
  # h2load, the HTTP/2 peer of the engine's h2c bench.
  have h2load || need+=(nghttp2-client)
  # The discovery tests build a program that lies about its name.
  have cc || need+=(gcc libc6-dev)
  # Real programs whose log lines the format tests read.
  have haproxy || need+=(haproxy)
  have apache2 || need+=(apache2)
  have uwsgi || need+=(uwsgi-core uwsgi-plugin-python3)
  [ -x /usr/lib/postgresql/15/bin/initdb ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  # The resource series read from a Prometheus server (the tests start their own).
  have prometheus || need+=(prometheus)
  have prometheus-node-exporter || need+=(prometheus-node-exporter)
  # PHP-FPM and Tomcat, whose log lines and pools the tests read; npm for the Express app.
  ls /usr/sbin/php-fpm* >/dev/null 2>&1 || need+=(php-fpm)
  [ -e /usr/share/tomcat10/bin/bootstrap.jar ] || need+=(tomcat10)
  have npm || need+=(npm)
  # MariaDB and Redis, sampled from inside (the tests start their own servers).
  have mariadbd || need+=(mariadb-server)
  have redis-server || need+=(redis-server)
fi

# The Express app the morgan tests start: its packages beside it, as its lock file pins them.
express="$(cd "$(dirname "$0")/.." && pwd)/tests/collect/express"
express_packages() {
  if [ "$mode" = test ] && [ ! -d "$express/node_modules/morgan" ] && have npm; then
    npm ci --prefix "$express" --no-audit --no-fund --silent >/dev/null
  fi
}
express_packages

[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "pinchpoint needs these system packages: ${need[*]}" >&2
  echo "install them with:  sudo apt-get install -y ${need[*]}   (or run make as root)" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "pinchpoint needs ${need[*]}, and this system has no apt-get: install them with its package manager" >&2
  exit 1
fi
echo "installing ${need[*]} with apt-get"
# pinchpoint starts the servers it needs itself: keep the packages' postinst from starting
# their services (it fails in a container without systemd), unless a policy is in place.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
express_packages
