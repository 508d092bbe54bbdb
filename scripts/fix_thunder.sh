#!/usr/bin/env bash
# Fix a copy of Thunder with `safe-tracectx lint --fix` (or a patch) and check the fix: the lint
# of both copies, a part of Thunder's own suite run from each copy (plain and with
# --safe-tracectx=strict) compared test by test, and the reproductions of findings 1 and 2
# (docs/findings.md) run against each copy.
#
#   scripts/fix_thunder.sh                                   # Thunder main, the archive in ../shared
#   scripts/fix_thunder.sh path/to/site-packages             # a folder holding a thunder/ package
#   PATCH=docs/thunder-fixes/main.diff scripts/fix_thunder.sh   # apply this patch instead of --fix
#
# The source is an archive (.tar.gz, its one top folder holding thunder/) or a folder holding
# thunder/. Each copy gets a virtual environment of its own whose site-packages holds the copy's
# thunder/ and takes everything else (torch, pytest, this package) from PYTHON's environment.
#
# Environment:
#   PYTHON  the interpreter whose environment the copies use (default: .venv/bin/python)
#   OUT     where the copies, environments, logs and JUnit XML go (default: build/fix-thunder)
#   PATCH   a git-style patch (a/thunder/..., b/thunder/...) to apply instead of running --fix
#   TESTS   the test files of thunder/tests to run (default: test_core.py test_transforms.py
#           test_update_aliases.py test_check_trace.py)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

source=${1:-$root/../shared/thunder-main/lightning-thunder-main-1e22aac.tar.gz}
python=${PYTHON:-$root/.venv/bin/python}
out=${OUT:-build/fix-thunder}
read -r -a tests <<< "${TESTS:-test_core.py test_transforms.py test_update_aliases.py test_check_trace.py}"
[ -e "$source" ] || { echo "no such source: $source" >&2; exit 2; }
source=$(cd "$(dirname "$source")" && echo "$PWD/$(basename "$source")")
[ -z "${PATCH:-}" ] || PATCH=$(cd "$(dirname "$PATCH")" && echo "$PWD/$(basename "$PATCH")")
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/orig" "$out/fixed" "$out/venv-orig" "$out/venv-fixed"

# The two copies: orig and fixed, each with thunder/ at its top.
copy() {  # copy DEST
  mkdir -p "$1"
  if [ -f "$source" ]; then
    tar -xzf "$source" -C "$1" --strip-components=1
  else
    cp -r "$source/thunder" "$1/thunder"
  fi
  find "$1" -name __pycache__ -prune -exec rm -rf {} +
}
copy "$out/orig"
copy "$out/fixed"
stc=("$python" -m safe_tracectx lint --isolated)
if [ -n "${PATCH:-}" ]; then
  (cd "$out/fixed" && git apply --check "$PATCH" && git apply "$PATCH")
  echo "applied $PATCH"
else
  (cd "$out/fixed" && "${stc[@]}" --fix thunder > /dev/null 2> "$out/fix.log") || true
  cat "$out/fix.log"
fi
echo "changed: $(cd "$out" && diff -rq orig/thunder fixed/thunder | awk '{print $2}' | sed 's|^orig/||' | tr '\n' ' ')"
for copy in orig fixed; do
  (cd "$out/$copy" && "${stc[@]}" thunder > "$out/lint-$copy.txt" 2>&1) || true
  echo "lint $copy: $(tail -n 1 "$out/lint-$copy.txt")"
done

# An environment for each copy: its own site-packages first, then PYTHON's.
base_site=$("$python" -c 'import site; print(site.getsitepackages()[0])')
for copy in orig fixed; do
  venv=$out/venv-$copy
  "$python" -m venv --without-pip "$venv"
  site=$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
  echo "import site; site.addsitedir('$base_site')" > "$site/zz_base_environment.pth"
  cp -r "$out/$copy/thunder" "$site/thunder"  # the package as a wheel would install it, tests included
  where=$("$venv/bin/python" -c 'import thunder; print(thunder.__file__)' 2>/dev/null)
  case $where in
    "$site"/thunder/*) echo "$copy: thunder $("$venv/bin/python" -c 'import thunder; print(thunder.__version__)' 2>/dev/null) from $where" ;;
    *) echo "$copy: thunder is imported from $where, not from $site" >&2; exit 1 ;;
  esac
done

# The reproductions of findings 1 (detached_trace) and 2 (_grad_transform): is a trace left active?
cat > "$out/repro.py" <<'EOF'
import thunder, torch
from thunder.core.trace import TraceCtx, detached_trace, get_tracectx, tracectx

outer = TraceCtx()
with tracectx(outer):
    try:
        with detached_trace():
            raise RuntimeError("inside")
    except RuntimeError:
        pass
    detached_left = get_tracectx() is not outer
print("finding 1, detached_trace after a raise:", "LEAKS its trace" if detached_left else "trace restored")

jitted = thunder.jit(lambda x: x.sin())
jitted(torch.randn(2))
trace = thunder.last_traces(jitted)[0]
try:
    thunder._grad_transform(trace)
except AttributeError as error:
    print("finding 2, _grad_transform raised:", error)
left = get_tracectx()
print("finding 2, after the error:", "LEAKS its trace" if left is not None else "no trace active")
EOF
for copy in orig fixed; do
  echo "--- reproductions, $copy"
  (cd "$out" && "$out/venv-$copy/bin/python" repro.py 2>&1 | grep '^finding') || true
done

# Thunder's tests from each copy, plain and strict, compared test by test.
run() {  # run COPY MODE [pytest options...]
  local copy=$1 mode=$2; shift 2
  local venv=$out/venv-$copy started=$SECONDS tests_dir paths=()
  tests_dir=$("$venv/bin/python" -c "import os, thunder.tests as t; print(os.path.dirname(t.__file__))" 2>/dev/null)
  for f in "${tests[@]}"; do paths+=("$tests_dir/$f"); done
  (cd "$out" && TORCHINDUCTOR_VEC_ISA_OK=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
      --rootdir="$tests_dir" -c /dev/null --junitxml="$copy-$mode.xml" "$@" "${paths[@]}" > "$copy-$mode.log" 2>&1) || true
  echo "$copy $mode: $((SECONDS - started)) s, $(tail -n 1 "$out/$copy-$mode.log")"
}
run orig plain
run fixed plain
run orig strict --safe-tracectx=strict
run fixed strict --safe-tracectx=strict
status=0
for mode in plain strict; do
  "$python" scripts/compare_outcomes.py "$out/orig-$mode.xml" "$out/fixed-$mode.xml" || status=1
done
exit $status
