#!/usr/bin/env bash
# The C++ formatting check (issue 27): every tracked .cpp/.h is as clang-format (the version pinned
# in scripts/bootstrap.sh) formats it with .clang-format, and no line of them is longer than 120
# characters (comments and strings included, which clang-format leaves alone). Exits 1 naming the
# files. Usage: bash scripts/check_format.sh [--fix]   (--fix formats the files in place instead)
set -euo pipefail
cd "$(dirname "$0")/.."
want="19.1.7"
max_columns=120
have=$(clang-format --version 2>/dev/null | sed -n 's/.*clang-format version \([0-9.]*\).*/\1/p' || true)
if [ "$have" != "$want" ]; then
  echo "check_format: needs clang-format $want (found '${have:-none}'); run scripts/bootstrap.sh" \
       "or pip install clang-format==$want" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h')
if [ "${1:-}" = "--fix" ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 50 clang-format -i
  exit 0
fi
status=0
drift=$(printf '%s\0' "${files[@]}" | xargs -0 -n 50 clang-format --dry-run 2>&1 | \
        sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: .*-Wclang-format-violations.*/\1/p' | sort -u)
if [ -n "$drift" ]; then
  echo "check_format: not formatted (run: bash scripts/check_format.sh --fix):"
  echo "$drift" | sed 's/^/  /'
  status=1
fi
long=$(python3 - "$max_columns" "${files[@]}" <<'PY'
import sys
limit = int(sys.argv[1])
for path in sys.argv[2:]:
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            width = len(line.rstrip("\n"))
            if width > limit:
                print(f"{path}:{number}: {width} columns")
PY
)
if [ -n "$long" ]; then
  echo "check_format: lines longer than $max_columns columns:"
  echo "$long" | sed 's/^/  /'
  status=1
fi
[ "$status" = 0 ] && echo "check_format: ${#files[@]} files formatted, no line over $max_columns columns"
exit $status
