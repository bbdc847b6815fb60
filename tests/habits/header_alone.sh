#!/usr/bin/env bash
# CTest header_alone: every kernels/*.hpp compiles on its own with only kernels/ on the include
# path: no header leans on one included before it, and none reaches into src/ (the layers run
# one way; CMake keeps src/ off the kernels targets' path, this keeps it off each header's).
#   header_alone.sh CXX SOURCE_DIR WORK_DIR
set -uo pipefail
cxx="$1"; src="$2"; work="$3"
mkdir -p "$work"
failed=0
for h in "$src"/kernels/*.hpp; do
  tu="$work/$(basename "$h" .hpp).cpp"
  printf '#include "%s"\n' "$(basename "$h")" > "$tu"
  if ! "$cxx" -std=c++17 -fsyntax-only -Wall -Wextra -Werror -I"$src/kernels" "$tu"; then
    echo "header_alone: $h does not compile alone (only kernels/ on the include path)" >&2
    failed=1
  fi
done
[ "$failed" = 0 ] && echo "header_alone: $(ls "$src"/kernels/*.hpp | wc -l) headers compile alone"
exit "$failed"
