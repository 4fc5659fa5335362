"""The benchmarks, each run from the repository root as ``python -m bench.NAME``; what they share is
:mod:`bench.common`, their records are ``bench/results/``. ``bench/offline_gpu_host/`` is our tooling
for running the GPU benchmarks on a GPU host without network or TensorFlow (its README)."""
