#!/usr/bin/env bash
# CTest clang_format: every C++/CUDA file git tracks is as .clang-format writes it (100 columns;
# applied once to the whole tree in its own commit). Skipped (77) without clang-format or git.
#   clang_format.sh SOURCE_DIR
set -uo pipefail
src="$1"
command -v clang-format >/dev/null || { echo "clang_format: clang-format not found (apt-get install clang-format)"; exit 77; }
cd "$src" && git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "clang_format: $src is not a git checkout"; exit 77; }
bad=0
while IFS= read -r f; do
  clang-format --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || { echo "clang_format: $f is not formatted (clang-format -i $f)"; bad=1; }
done < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh')
[ "$bad" = 0 ] && echo "clang_format: every tracked C++/CUDA file is formatted"
exit "$bad"
