#!/usr/bin/env bash
# install-deps.sh: install the Debian 12 (bookworm) packages postal needs to build, test,
# benchmark and fuzz. Idempotent: asks dpkg which packages are missing and only then runs
# `apt-get update` (once) and `apt-get install` for those. Runs as root, or through sudo.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git python3
  clang libclang-rt-14-dev clang-format
  # libraries (see ARCHITECTURE.md, "Dependencies")
  libboost-fiber-dev libboost-dev libboost-context-dev
  libcereal-dev libabsl-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libspdlog-dev
  libsqlite3-dev sqlite3 libmimalloc-dev
  libssl-dev openssl
  nats-server libnats-dev
  # tests and benchmarks (libcaf-dev: the peer runtime the benchmarks compare against)
  libgtest-dev libgmock-dev googletest libbenchmark-dev libcaf-dev
)

log() { printf 'install-deps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
  || die "dpkg-query/apt-get not found; this script supports Debian 12 (bookworm) only."

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  log "all ${#PACKAGES[@]} packages are installed; nothing to do."
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  die "missing packages: ${missing[*]}. Run this script as root, or install sudo."
fi

log "missing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
log "installed ${#missing[@]} package(s)."
