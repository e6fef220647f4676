#!/usr/bin/env bash
# validate with the reference on a real GPU: the original runs on CUDA, the port on the emulated
# neuron device (built here against the machine's own torch), the golden in float64 on the CPU.
# Run from the repository root on a CUDA machine whose python3 has torch (no network needed):
#   OUT=/tmp/gpu bash bench/validate_on_gpu.sh
# WHEELS=DIR installs the wheels in DIR first (libcst, when that python lacks it). Reports, the
# validate outputs and the tests/validate log land in $OUT. docs/validate.md has one run's results.
set -u
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
nvidia-smi -L
python3 -c "import sys,torch;print(sys.version.split()[0], torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-')"
if [ -n "${WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl || exit 3
fi
# The package laid out as installed (rules/ and backend/ ship inside cuda2neuron/).
rm -rf /tmp/pkg && mkdir -p /tmp/pkg && cp -r cuda2neuron /tmp/pkg/ && cp -r rules /tmp/pkg/cuda2neuron/rules && cp -r backend /tmp/pkg/cuda2neuron/backend
export PYTHONPATH=/tmp/pkg:/tmp/site PYTHONSAFEPATH=1  # not the checkout's cuda2neuron/ (no backend/ inside)
c2n() { python3 -m cuda2neuron "$@"; }
echo "== build-backend"; /usr/bin/time -f "build %e s wall %U s user" python3 -m cuda2neuron build-backend 2>&1 | tail -3
echo "== setup $(( $(date +%s) - t0 )) s"
rm -rf /tmp/cnn_neuron; c2n migrate examples/cnn_cuda --out /tmp/cnn_neuron >/dev/null 2>&1 || { echo migrate failed; exit 4; }
for mode in entry script; do
  if [ $mode = entry ]; then a=(--entry validate_entry:build); else a=(--script train.py -- --steps 3); fi
  echo "== validate cnn_cuda $mode"
  /usr/bin/time -f "validate %e s" python3 -m cuda2neuron validate examples/cnn_cuda /tmp/cnn_neuron --report "$OUT/cnn_$mode.json" "${a[@]}" > "$OUT/cnn_$mode.txt" 2>&1
  echo "rc=$?"; tail -25 "$OUT/cnn_$mode.txt"
done
echo "== pytest tests/validate ($(( $(date +%s) - t0 )) s in)"
timeout ${PYTEST_LIMIT:-300} python3 -m pytest tests/validate -q -n ${NPROC:-12} -p no:cacheprovider --maxfail=40 -o addopts="-ra" > "$OUT/pytest_validate.log" 2>&1
echo "pytest rc=$?"; tail -40 "$OUT/pytest_validate.log"
echo "== total $(( $(date +%s) - t0 )) s"
