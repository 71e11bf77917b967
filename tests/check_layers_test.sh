#!/usr/bin/env bash
# scripts/check-layers passes on a tree whose includes point down and fails,
# naming each one, on includes that go the wrong way.
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{runtime,cluster/kv,cluster/engine,actors/router,actors/sidecar,actors/indexer,app}
echo '#include "runtime/errors.hpp"' >"$tmp/cluster/engine/a.hpp"
echo '#include "cluster/kv/kv_event.hpp"' >"$tmp/actors/router/b.cpp"
echo '#include "actors/sidecar/lifecycle.hpp"' >"$tmp/app/main.cpp"
"$src/scripts/check-layers" "$tmp" >"$tmp/ok.log"
# Four that go the wrong way.
echo '#include "actors/sidecar/relay.hpp"' >>"$tmp/actors/router/b.cpp"
echo '#include "actors/router/brain/kv_router.hpp"' >"$tmp/actors/indexer/c.cpp"
echo '#include "cluster/discovery.hpp"' >"$tmp/cluster/kv/d.cpp"
echo '#include "app/x.hpp"' >"$tmp/runtime/e.cpp"
if "$src/scripts/check-layers" "$tmp" >"$tmp/bad.log" 2>&1; then
  echo "check-layers accepted includes that go the wrong way" >&2
  exit 1
fi
test "$(grep -c 'must not include' "$tmp/bad.log")" -eq 4
grep -q 'actors/router/b.cpp:2: actors/router/ must not include actors/sidecar/relay.hpp' "$tmp/bad.log"
grep -q 'runtime/e.cpp:1: runtime/ must not include app/x.hpp' "$tmp/bad.log"
# A pure core that links what brings actors and sockets, through another
# target: named with the path.
mkdir -p "$tmp/links"
cat >"$tmp/links/CMakeLists.txt" <<'EOF'
target_link_libraries(outrider_kv PRIVATE xxhash)
target_link_libraries(outrider_text PUBLIC nlohmann_json::nlohmann_json)
target_link_libraries(outrider_prefix_index PUBLIC outrider_kv)
target_link_libraries(outrider_sidecar_core PUBLIC outrider_kv)
target_link_libraries(outrider_router_core PUBLIC outrider_prefix_index
  outrider_helpers)
target_link_libraries(outrider_helpers PUBLIC outrider_runtime)
EOF
rm -f "$tmp/actors/router/b.cpp" "$tmp/actors/indexer/c.cpp" \
  "$tmp/cluster/kv/d.cpp" "$tmp/runtime/e.cpp"
if "$src/scripts/check-layers" "$tmp" >"$tmp/links.log" 2>&1; then
  echo "check-layers accepted a pure core linking the runtime" >&2
  exit 1
fi
grep -q 'pure core outrider_router_core links outrider_router_core -> outrider_helpers -> outrider_runtime' "$tmp/links.log"
test "$(grep -c 'pure core' "$tmp/links.log")" -eq 1
