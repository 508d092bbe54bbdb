#!/usr/bin/env bash
# Run a CPU-friendly part of Thunder's own test suite (shipped in the lightning-thunder
# wheel) three times: plain, with --safe-tracectx=strict, and with --safe-tracectx=audit;
# compare plain and strict test by test, and keep the audit report.
#
#   scripts/thunder_suite.sh                       # the default selection (below)
#   scripts/thunder_suite.sh test_core.py          # chosen files, every test in them
#   scripts/thunder_suite.sh -k "litgpt"           # the default selection, narrowed by -k
#   scripts/thunder_suite.sh -k "not cuda" test_jit_general.py
#
# The default selection: test_core.py, test_transforms.py, test_update_aliases.py,
# test_torch_compile_executor.py and test_check_trace.py whole, plus the LLM
# architectures (litgpt) of test_jit_general.py and test_interpreter.py on CPU. litgpt
# comes with the thunder-suite extra, which this script installs (-c constraints.txt).
#
# Environment:
#   PYTHON  the interpreter of the environment to test (default: .venv/bin/python, made
#           by `make env`). Its Thunder is the one tested; the thunder-suite extra and
#           this package (editable) are installed into it, with constraints.txt less its
#           lightning-thunder pin, so a Thunder built from source (e.g. main) stays.
#   OUT     where the logs, JUnit XML and audit.json go, relative to the repository
#           (default: build/thunder-suite)
set -euo pipefail
python=
if [ -n "${PYTHON:-}" ]; then  # resolved before the cd below: a relative PYTHON is relative to the caller
  python=$(command -v "$PYTHON") || { echo "PYTHON=$PYTHON: not found" >&2; exit 2; }
  python=$(cd "$(dirname "$python")" && echo "$PWD/$(basename "$python")")
fi
cd "$(dirname "$0")/.."
root=$PWD

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
keyword=
while getopts "k:h" option; do
  case $option in
    k) keyword=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))

pip_install=(-m pip install --quiet --disable-pip-version-check)
if [ -z "$python" ]; then
  make env
  python=$root/.venv/bin/python
  "$python" "${pip_install[@]}" -c constraints.txt -e '.[thunder-suite]'
else
  if ! "$python" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    echo "PYTHON=$PYTHON is not a virtual environment's interpreter; refusing to install into it" >&2
    exit 2
  fi
  grep -v '^lightning-thunder==' constraints.txt > "${TMPDIR:-/tmp}/thunder-suite-constraints.$$.txt"
  trap 'rm -f "${TMPDIR:-/tmp}/thunder-suite-constraints.$$.txt"' EXIT
  "$python" "${pip_install[@]}" -c "${TMPDIR:-/tmp}/thunder-suite-constraints.$$.txt" -e '.[thunder-suite]'
fi
"$python" -c "import thunder, torch; print('lightning-thunder', thunder.__version__, 'from', thunder.__path__[0], '| torch', torch.__version__)" 2>/dev/null

tests_dir=$("$python" -c "import os, thunder.tests as t; print(os.path.dirname(t.__file__))" 2>/dev/null)
out=${OUT:-build/thunder-suite}
mkdir -p "$out"
out=$(cd "$out" && pwd)
files=("$@")
select=()
if [ ${#files[@]} -eq 0 ]; then
  files=(test_core.py test_transforms.py test_update_aliases.py test_torch_compile_executor.py test_check_trace.py
         test_jit_general.py test_interpreter.py)
  # pytest's -k matches a test's file name too: the first five files whole, the other two for litgpt on CPU.
  default="not (test_jit_general or test_interpreter) or (litgpt and not cuda and not meta)"
  select=(-k "($default)${keyword:+ and ($keyword)}")
elif [ -n "$keyword" ]; then
  select=(-k "$keyword")
fi
paths=()
for f in "${files[@]}"; do paths+=("$tests_dir/$f"); done

run() {  # run MODE [pytest options...]
  local mode=$1; shift
  local started=$SECONDS
  (cd "$out" && TORCHINDUCTOR_VEC_ISA_OK=1 "$python" -m pytest -q -p no:cacheprovider \
      --rootdir="$tests_dir" -c /dev/null --junitxml="$mode.xml" "${select[@]}" "$@" "${paths[@]}" > "$mode.log" 2>&1) || true
  echo "$mode: $((SECONDS - started)) s, $(tail -n 1 "$out/$mode.log")"
  grep -h '^mode [a-z]*: [0-9]* tests audited' "$out/$mode.log" || true
}

run plain
run strict --safe-tracectx=strict
run audit --safe-tracectx=audit --safe-tracectx-report=audit.json
"$python" scripts/compare_outcomes.py "$out/plain.xml" "$out/strict.xml"
