#!/usr/bin/env bash
# Wheels for a GPU host that has Python 3.12 (x86_64), JAX, PyTorch and
# transformers but neither this project nor Keras, and no network: the
# project's own wheel, and Keras, keras-hub and what they import on the JAX
# backend, in the versions of the environment that runs this script. On the
# host (no TensorFlow needed; keras-hub imports without tensorflow-text):
#
#   python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target gpu-site WHEELS/*.whl
#   export PYTHONPATH=$PWD/gpu-site KERAS_BACKEND=jax
#
# usage: bench/offline_gpu_host/wheels.sh [DIR]   (default: .whl; replaced); run from the repository root
set -euo pipefail
dir=${1:-.whl}
python=${PYTHON:-python}
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
# seqeval ships no wheel: built here (pure Python). The others are downloaded
# for CPython 3.12 on manylinux x86_64 (optree and h5py have compiled code).
built=(seqeval)
downloaded=(keras keras-hub namex optree absl-py rich markdown-it-py mdurl pygments h5py)

version() { "$python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }

rm -rf "$dir"
mkdir -p "$dir"
"$python" -m pip wheel -q --no-deps -w "$dir" .
for name in "${built[@]}"; do
    "$python" -m pip wheel -q --no-deps -w "$dir" "$name==$(version "$name")"
done
for name in "${downloaded[@]}"; do
    "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${platforms[@]}" -d "$dir" "$name==$(version "$name")"
done
ls -1 "$dir"
du -sh "$dir"
