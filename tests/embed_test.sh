#!/usr/bin/env bash
# Installs outrider into a temporary prefix, builds examples/embed against
# that prefix alone (find_package(outrider)), and runs it against a
# simulated engine: the embedded router must serve a request.
#   tests/embed_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
sim=""
cleanup() {
  if [ -n "$sim" ]; then kill "$sim" 2>/dev/null || true; wait "$sim" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
test -f "$tmp/prefix/lib/cmake/outrider/outriderConfig.cmake"
test -f "$tmp/prefix/include/outrider/actors/router/dispatch/dispatcher.hpp"
cmake -S "$src/examples/embed" -B "$tmp/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache || true)" >"$tmp/configure.log"
cmake --build "$tmp/build" >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$tmp/prefix/bin/outrider-sim" --grpc-port "$port" --block-size 16 \
  --kv-events-config '{"enable_kv_cache_events": false}' >"$tmp/sim.log" 2>&1 &
sim=$!
timeout 60 "$tmp/build/embed_router" "127.0.0.1:$port"
