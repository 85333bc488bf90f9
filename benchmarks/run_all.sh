#!/usr/bin/env bash
# Every benchmark in one invocation (~12-15 min on the 2-core machine); results in
# benchmarks/measured/, the log in benchmarks/out/run_all.log. Usage: bash benchmarks/run_all.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash benchmarks/peers/setup_venv.sh
python benchmarks/bench_core.py "$@"
python benchmarks/bench_equations.py "$@"
python benchmarks/bench_sobol.py "$@"
python benchmarks/compare.py "$@"
python benchmarks/bench_store.py
python benchmarks/bench_gradient.py "$@"
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_surrogate.py  # ~25 min; needs /tmp/peerenv (openturns, chaospy)
python benchmarks/summarize.py
echo "all benchmarks: $(( $(date +%s) - start )) s"
