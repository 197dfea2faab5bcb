#!/usr/bin/env bash
# ntkpipe's MLP Gram against neural-tangents 0.6.5 on the same weights (benchmarks/nt_reference.py).
#
#   bash benchmarks/neural_tangents_env.sh --build                 # build benchmarks/.nt-env (about 2.6 GB)
#   bash benchmarks/neural_tangents_env.sh [nt_reference options]  # run the comparison
#   bash benchmarks/neural_tangents_env.sh --points 300 --implementations 1 2 3
#
# neural-tangents 0.6.5 (its last release) imports only on old JAX, so it runs in its own virtual
# environment: jax/jaxlib 0.4.25, numpy < 2 (TensorFlow comes with it). The comparison runs in two
# processes of one invocation: this environment's python exports the weights (in, out layout) and
# times ntkpipe; the .nt-env python times neural-tangents on them and checks it gives the same kernel.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ENV="${NT_ENV:-$HERE/.nt-env}"
PYTHON="${PYTHON:-python}"
NT_PYTHON="${NT_PYTHON:-python3.11}"

if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
    sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 0
fi
if [[ "${1:-}" == "--build" ]]; then
    "$NT_PYTHON" -m venv "$ENV"
    "$ENV/bin/pip" install --quiet "jax[cpu]==0.4.25" "jaxlib==0.4.25" "numpy<2" "neural-tangents==0.6.5"
    "$ENV/bin/python" -c "import neural_tangents, jax; print('built', '$ENV', 'jax', jax.__version__)"
    exit 0
fi
if [[ ! -x "$ENV/bin/python" ]]; then
    echo "error: no neural-tangents environment at $ENV; build it first (about 2.6 GB):" >&2
    echo "  bash benchmarks/neural_tangents_env.sh --build" >&2
    exit 2
fi
exec "$PYTHON" "$HERE/nt_reference.py" --nt-python "$ENV/bin/python" "$@"
