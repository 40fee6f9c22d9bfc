#!/usr/bin/env bash
# Installs the Debian packages cosched needs, only those missing, so a warm machine pays nothing.
set -euo pipefail
PKGS=(
  numactl libnuma-dev       # CPU/memory binding and the native runtime's topology
  intel-cmt-cat             # rdtset/pqos: used only where resctrl exists
  linux-perf                # perf stat for profiles
  build-essential libasan8 libtsan2 libubsan1 util-linux   # gcc, make, sanitizer runtimes, setarch for native/
  sysbench xz-utils p7zip-full   # real fixed-work programs for the batch runner and the runtime tests
  stress-ng                 # stream/matrix/cache stressors: real programs for calibrating the node model
  wrk                       # the HTTP load generator of bench/
  python3-venv
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing Debian packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: installing Debian packages needs root (run 'make' as root, or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
