#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The style suite (docs/style.md §8): every C file is clang-format clean, carries an
# SPDX line, and uses none of the banned functions.
set -uo pipefail
root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"

mapfile -t files < <(find src include tests -name '*.[ch]' -not -path '*/build*' -not -path '*/node_modules/*' | sort)
fail=0

if ! command -v clang-format >/dev/null; then
  echo "style: clang-format is missing (scripts/install-deps.sh installs it)"
  exit 1
fi

for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" 2>/dev/null; then
    echo "style: $f is not clang-format clean"
    fail=1
  fi
  if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier'; then
    echo "style: $f has no SPDX line"
    fail=1
  fi
done

banned='\b(sprintf|strcpy|strcat|strtok|strerror|atoi|gets)[[:space:]]*\('
if hits=$(grep -n -E "$banned" "${files[@]}" | grep -v -E '\b(snprintf|vsnprintf|strerror_r)\b'); then
  echo "style: banned functions (docs/style.md §8):"
  echo "$hits"
  fail=1
fi

echo "style: checked ${#files[@]} files"
if [ $fail -eq 0 ]; then
  echo "1 passed, 0 failed"
else
  echo "0 passed, 1 failed"
fi
exit $fail
