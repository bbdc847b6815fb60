#!/usr/bin/env bash
# analysis_install: the package installs as documented (README, docs/analysis.md) into fresh
# venvs without network, straight from the checkout, and leaves nothing in it; the installed
# rb-analysis runs from outside the checkout and names what a Python without its modules lacks.
#   install_check.sh PYTHON SOURCE_DIR WORKDIR
# Exit 0 pass, 1 fail, 77 skipped (no python3-venv on this machine).
set -euo pipefail
py="$1" src="$2" work="$3"
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
if ! "$py" -m venv --system-site-packages "$work/venv" >"$work/venv.log" 2>&1; then
  if grep -q -i 'ensurepip\|venv' "$work/venv.log"; then
    cat "$work/venv.log"; echo "SKIPPED: $py cannot create a venv (Debian: apt-get install python3-venv)"; exit 77
  fi
  cat "$work/venv.log"; exit 1
fi
# What a build in the source tree leaves there (setuptools: build/, *.egg-info; dist/, wheels).
leftovers() { find "$src/analysis" \( -name build -o -name dist -o -name '*.egg-info' -o -name '*.whl' \
                -o -name '*.tar.gz' \) -print; }
[ -z "$(leftovers)" ] || fail "the checkout has build leftovers before the test: $(leftovers)"
version="$(sed -n 's/^project(ringbench VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")"
[ -n "$version" ] || fail "no project(ringbench VERSION ...) in CMakeLists.txt"
set -x
# The README's line (build isolation on: the in-tree backend needs nothing downloaded), and the
# same with --no-build-isolation; --no-index makes any download attempt fail.
"$work/venv/bin/pip" install --no-index "$src/analysis" || fail "pip install (build isolation)"
"$py" -m venv --system-site-packages "$work/venv2"
"$work/venv2/bin/pip" install --no-index --no-build-isolation "$src/analysis" || fail "pip install --no-build-isolation"
[ -z "$(leftovers)" ] || fail "pip wrote into the checkout: $(leftovers)"
cd "$work"  # away from the checkout: only the installed package can be imported
[ -x "$work/venv/bin/rb-analysis" ] || fail "no rb-analysis console script in the venv"
help="$("$work/venv/bin/rb-analysis" --help)" || fail "rb-analysis --help exited non-zero"
grep -q 'report' <<<"$help" && grep -q 'compare' <<<"$help" || fail "--help does not list the commands"
[ "$("$work/venv/bin/rb-analysis" --version)" = "rb-analysis $version" ] \
  || fail "rb-analysis --version is not 'rb-analysis $version' (CMakeLists.txt's project VERSION)"
where="$("$work/venv/bin/python" -c 'import ringbench_analysis as m; print(m.__file__)')"
case "$where" in "$work/venv/"*) ;; *) fail "ringbench_analysis imported from $where, not the venv" ;; esac
# A real command on a small file: the installed reader and CLI work, not only --help.
PYTHONPATH="$src/tests/analysis" "$work/venv/bin/python" -c \
  "import synthetic; synthetic.make_run('$work/run.h5', 2)" || fail "synthetic file"
sweeps="$("$work/venv/bin/rb-analysis" table "$work/run.h5")" || fail "rb-analysis table exited non-zero"
grep -q '^ring' <<<"$sweeps" || fail "rb-analysis table lists no ring sweep"
"$work/venv2/bin/rb-analysis" table "$work/run.h5" | grep -q '^ring' || fail "the --no-build-isolation install does not run"

# A venv that sees none of the system's packages (as one made from a python3 that is not
# Debian's): pip names the dependency it cannot get, and with --no-deps the installed
# rb-analysis names every module it lacks, in one message, exit 2.
"$py" -m venv "$work/bare"
if "$work/bare/bin/pip" install --no-index "$src/analysis" > "$work/bare.log" 2>&1; then
  fail "pip install succeeded in a venv without numpy, matplotlib and pandas"
fi
grep -Eq 'No matching distribution found for (numpy|matplotlib|pandas)' "$work/bare.log" \
  || { cat "$work/bare.log"; fail "pip did not name the missing dependency"; }
"$work/bare/bin/pip" install --no-index --no-deps "$src/analysis" || fail "pip install --no-deps"
rc=0
msg="$("$work/bare/bin/rb-analysis" table "$work/run.h5" 2>&1)" || rc=$?
[ "$rc" = 2 ] || fail "rb-analysis without its modules exited $rc, not 2: $msg"
grep -q 'cannot import h5py, numpy, pandas, matplotlib' <<<"$msg" || fail "the message does not name the missing modules: $msg"
! grep -q Traceback <<<"$msg" || fail "a traceback instead of the message: $msg"
set +x
echo "all checks passed"
