#!/usr/bin/env bash
# The emulator's suites on torch 2.14, TorchNeuron's documented torch (torch-neuronx 2.14.3.x), in a
# virtualenv of their own; the project's own .venv keeps the README's torch 2.13.0 CPU build.
# Run from the repository root:
#   bash bench/torch214.sh                  # venv at $VENV (default /tmp/venv214), then all three suites
#   SUITES="backend" bash bench/torch214.sh # any of: backend opinfo validate
# TORCH_SPEC picks the wheel (default torch==2.14.1); INDEX=URL installs it from another index
# (e.g. https://download.pytorch.org/whl/cpu for the CPU build; PyPI's default Linux wheel is the
# multi-GB CUDA one, which works on a CPU-only machine too). Logs land in $OUT (default /tmp/torch214).
# docs/backend.md "Supported torch" has one run's figures.
set -u
VENV=${VENV:-/tmp/venv214}
OUT=${OUT:-/tmp/torch214}
TORCH_SPEC=${TORCH_SPEC:-torch==2.14.1}
SUITES=${SUITES:-backend opinfo validate}
JOBS=${JOBS:-2}
mkdir -p "$OUT"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" || exit 3
  "$VENV/bin/pip" install -q "$TORCH_SPEC" ${INDEX:+--index-url "$INDEX"} || exit 3
  "$VENV/bin/pip" install -q -e ".[validate,test]" || exit 3
fi
PY="$VENV/bin/python"
"$PY" -c "import torch; print('torch', torch.__version__)"
echo "== build-backend"
/usr/bin/time -f "build %e s wall %U s user" "$VENV/bin/cuda2neuron" build-backend 2>&1 | tail -2 || exit 4
status=0
for suite in $SUITES; do
  case $suite in
    backend)  cmd=("$PY" -m pytest -q tests/backend -n "$JOBS" -p no:cacheprovider) ;;
    opinfo)   cmd=("$PY" bench/opinfo_sweep.py --jobs "$JOBS" --out "$OUT/sweep.jsonl") ;;
    validate) cmd=("$PY" -m pytest -q tests/validate -n "$JOBS" -p no:cacheprovider) ;;
    *) echo "unknown suite $suite"; exit 2 ;;
  esac
  echo "== $suite: ${cmd[*]}"
  /usr/bin/time -f "$suite %e s wall %U s user" "${cmd[@]}" > "$OUT/$suite.log" 2>&1
  rc=$?
  tail -25 "$OUT/$suite.log"
  echo "== $suite rc=$rc"
  [ $rc -eq 0 ] || status=1
done
exit $status
