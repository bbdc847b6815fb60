#!/usr/bin/env bash
# analysis_install: the package installs as documented (docs/analysis.md) into a fresh venv
# without network, and the installed rb-analysis runs from outside the checkout.
#   install_check.sh PYTHON SOURCE_DIR WORKDIR
# Exit 0 pass, 1 fail, 77 skipped (no python3-venv or no setuptools on this machine).
set -euo pipefail
py="$1" src="$2" work="$3"
if ! "$py" -c 'import setuptools' 2>/dev/null; then
  echo "SKIPPED: $py has no setuptools (Debian: apt-get install python3-setuptools)"; exit 77
fi
rm -rf "$work" && mkdir -p "$work"
# A copy: pip builds in place and would leave build/ and *.egg-info in the checkout.
cp -r "$src/analysis" "$work/pkg"
rm -rf "$work/pkg/build" "$work/pkg"/*.egg-info
if ! "$py" -m venv --system-site-packages "$work/venv" >"$work/venv.log" 2>&1; then
  if grep -q -i 'ensurepip\|venv' "$work/venv.log"; then
    cat "$work/venv.log"; echo "SKIPPED: $py cannot create a venv (Debian: apt-get install python3-venv)"; exit 77
  fi
  cat "$work/venv.log"; exit 1
fi
fail() { echo "FAIL: $*"; exit 1; }
set -x
"$work/venv/bin/pip" install --no-build-isolation --no-index "$work/pkg" || fail "pip install"
cd "$work"  # away from the checkout: only the installed package can be imported
[ -x "$work/venv/bin/rb-analysis" ] || fail "no rb-analysis console script in the venv"
help="$("$work/venv/bin/rb-analysis" --help)" || fail "rb-analysis --help exited non-zero"
grep -q 'report' <<<"$help" && grep -q 'compare' <<<"$help" || fail "--help does not list the commands"
where="$("$work/venv/bin/python" -c 'import ringbench_analysis as m; print(m.__file__)')"
case "$where" in "$work/venv/"*) ;; *) fail "ringbench_analysis imported from $where, not the venv" ;; esac
# A real command on a small file: the installed reader and CLI work, not only --help.
PYTHONPATH="$src/tests/analysis" "$work/venv/bin/python" -c \
  "import synthetic; synthetic.make_run('$work/run.h5', 2)" || fail "synthetic file"
sweeps="$("$work/venv/bin/rb-analysis" table "$work/run.h5")" || fail "rb-analysis table exited non-zero"
grep -q '^ring' <<<"$sweeps" || fail "rb-analysis table lists no ring sweep"
set +x
echo "all checks passed"
