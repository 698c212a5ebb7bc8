#!/usr/bin/env bash
# Installs the system packages pinchpoint's demo and tests start for real.
set -euo pipefail

need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)

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
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
