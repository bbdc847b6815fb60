#!/usr/bin/env bash
# CTest python_lint: pylint with analysis/pyproject.toml's checks over the Python the project
# ships and tests with. Skipped (77) where pylint is not installed (launch/common.sh installs it).
#   python_lint.sh SOURCE_DIR
set -uo pipefail
src="$1"
command -v pylint >/dev/null || { echo "python_lint: pylint not found (apt-get install pylint)"; exit 77; }
cd "$src" || exit 2
exec pylint --rcfile analysis/pyproject.toml --score=n analysis/ringbench_analysis launch/*.py tests/analysis/*.py
