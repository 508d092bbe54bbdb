#!/usr/bin/env bash
# Run a CPU-friendly part of Thunder's own test suite (shipped in the lightning-thunder
# wheel) three times: plain, with --safe-tracectx=strict, and with --safe-tracectx=audit;
# compare plain and strict test by test, and keep the audit report.
#
#   scripts/thunder_suite.sh                 # the default files
#   scripts/thunder_suite.sh test_core.py    # chosen files
set -euo pipefail
cd "$(dirname "$0")/.."
make env
.venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[thunder-suite]'

tests_dir=$(.venv/bin/python -c "import os, thunder.tests as t; print(os.path.dirname(t.__file__))" 2>/dev/null)
out=${OUT:-build/thunder-suite}
mkdir -p "$out"
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(test_core.py test_transforms.py test_update_aliases.py test_torch_compile_executor.py test_check_trace.py)
paths=()
for f in "${files[@]}"; do paths+=("$tests_dir/$f"); done

run() {  # run MODE [pytest options...]
  local mode=$1; shift
  local started=$SECONDS
  (cd "$out" && TORCHINDUCTOR_VEC_ISA_OK=1 ../../.venv/bin/python -m pytest -q -p no:cacheprovider \
      --rootdir="$tests_dir" -c /dev/null --junitxml="$mode.xml" "$@" "${paths[@]}" > "$mode.log" 2>&1) || true
  echo "$mode: $((SECONDS - started)) s, $(tail -n 1 "$out/$mode.log")"
}

run plain
run strict --safe-tracectx=strict
run audit --safe-tracectx=audit --safe-tracectx-report=audit.json
.venv/bin/python scripts/compare_outcomes.py "$out/plain.xml" "$out/strict.xml"
