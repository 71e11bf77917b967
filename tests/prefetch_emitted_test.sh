#!/bin/sh
# The index's walks ask for their next blocks' table slots ahead
# (flat_table::prefetch, prefetch_line in actors/indexer/flat_table.hpp).
# GCC once deleted every such call as dead code (its pure-const analysis
# found the prefetch-only helpers free of effects), silently: the walks
# were right, only slower. This checks the optimised binary: each walk
# named below must contain prefetch instructions.
#
#   tests/prefetch_emitted_test.sh BINARY
set -eu
bin=$1
if ! command -v objdump >/dev/null 2>&1; then
  echo "objdump not found" >&2
  exit 1
fi
case "$(uname -m)" in
  x86_64 | i?86) insn='prefetch' ;;
  aarch64) insn='prfm' ;;
  *) echo "no prefetch mnemonic known for $(uname -m): not checked"; exit 0 ;;
esac
listing=$(mktemp)
trap 'rm -f "$listing"' EXIT
objdump -d --no-show-raw-insn -C "$bin" >"$listing"
status=0
for fn in 'outrider::indexer::prefix_index::find_groups(' \
  'outrider::indexer::prefix_index::holds_along('; do
  # The function's body: from its label to the blank line after it.
  n=$(awk -v fn="$fn" '
    /^[0-9a-f]+ <.*>:$/ { inside = index($0, "<" fn) > 0; next }
    /^$/ { inside = 0 }
    inside' "$listing" | grep -c "$insn" || true)
  echo "$fn: $n $insn instruction(s)"
  if [ "$n" -eq 0 ]; then
    echo "FAIL: $fn has no $insn instruction: its prefetches were compiled away" >&2
    status=1
  fi
done
exit $status
