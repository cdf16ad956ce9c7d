#!/usr/bin/env bash
# check-install.sh: install a postal build into a temporary prefix, then configure and build the
# consumer project in tests/install/ against it with find_package(postal). Proves the installed
# package (headers, libraries, postalConfig.cmake, exported targets) is usable on its own.
# Needs a configured and built tree (default build/release: run `make build` first).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build/release}

if [[ ! -f "$BUILD_DIR/cmake_install.cmake" ]]; then
  echo "check-install: $BUILD_DIR is not a built tree; run 'make build' first." >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/postal-install.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "=== install $BUILD_DIR into $work/prefix"
cmake --install "$BUILD_DIR" --prefix "$work/prefix"

echo "=== configure and build tests/install against it"
cmake -S tests/install -B "$work/consumer" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix"
cmake --build "$work/consumer" -j2
"$work/consumer/postal_install_check"
echo "check-install: OK"
