"""Which precision the hardware trains and serves fastest: ``--precision auto``.

bfloat16 pays where the hardware multiplies in it: CPUs with bfloat16 units
(the ``avx512_bf16`` or ``amx_bf16`` flag) and GPUs of compute capability 8 or
more. Elsewhere TensorFlow emulates it with float32 arithmetic and casts, and a
bfloat16 run is several times slower than float32. ``auto`` applies that rule,
as the per-class training and serving records have it:

* training (``kerasbert ner|triples train|distill``, ``kerasbert pretrain``):
  ``mixed_bfloat16`` on a CPU with AMX (``amx_bf16``) and on such GPUs,
  ``float32`` elsewhere: a training step reaches AMX through oneDNN's
  gradient matmuls, while on a CPU with ``avx512_bf16`` alone the step's
  casts and elementwise work cost more than its bfloat16 dot products save
  (measured slower than float32 there);
* an export or a prediction (``--precision`` of ``export`` / ``predict``):
  ``bfloat16`` on a CPU with bfloat16 units, ``float32`` elsewhere (the CPU's
  flags decide: exports are served on CPUs).

A training step compiled by XLA on a CPU (the JAX backend, or
``--jit-compile``) stays float32 under ``auto``: XLA's CPU backend has no
oneDNN, and its bfloat16 dots do not reach the bfloat16 units.

A choice of bfloat16 is said in one line (float32 goes without a word); an explicit choice is
kept, with one line saying when it will be slower and why.

The CPU's flags are read from ``/proc/cpuinfo``; the environment variable
``KERASBERT_CPU_FLAGS`` (space-separated flags, e.g. ``"avx2"``) replaces
them, to choose for another machine (or to make a test suite choose the same
everywhere).
"""

import os

#: The CPU flags of bfloat16 units (Linux ``/proc/cpuinfo`` names): where a served model's bfloat16 pays.
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
#: Where a bfloat16 training step pays on a CPU.
TRAINING_BF16_FLAGS = ("amx_bf16",)
#: The CPU flags of float16 units.
FP16_FLAGS = ("amx_fp16", "avx512_fp16")
#: The environment variable that replaces the CPU flags read from ``/proc/cpuinfo``.
FLAGS_VARIABLE = "KERASBERT_CPU_FLAGS"


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The CPU's flags, a set of names (``{"avx2", "avx512_bf16", ...}``):
    ``$KERASBERT_CPU_FLAGS`` when set, else the first ``flags`` line of
    ``cpuinfo``; an empty set where neither says (not Linux)."""
    given = os.environ.get(FLAGS_VARIABLE)
    if given is not None:
        return set(given.replace(",", " ").split())
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def gpu_compute_capability():
    """``(name, major)`` of the first GPU the Keras backend sees (``major``
    None where the backend does not say), or None without a GPU."""
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            return None
        details = tf.config.experimental.get_device_details(gpus[0])
        capability = details.get("compute_capability")
        return details.get("device_name", gpus[0].name), capability[0] if capability else None
    if backend == "jax":
        import jax

        gpus = [d for d in jax.devices() if d.platform == "gpu"]
        if not gpus:
            return None
        capability = getattr(gpus[0], "compute_capability", None)
        return gpus[0].device_kind, int(str(capability).split(".")[0]) if capability else None
    if backend == "torch":
        import torch

        if not torch.cuda.is_available():
            return None
        return torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0)[0]
    return None


def _cpu_words(flags, wanted):
    have = [flag for flag in wanted if flag in flags]
    return f"this CPU has {have[0]}" if have else f"this CPU has no {' or '.join(wanted)}"


def choose_training_precision(requested, flags=None, gpu=False, xla=False):
    """``(precision, line)`` for training: ``requested`` itself unless it is
    ``"auto"`` (:mod:`the rule <kerasbert.training.precision>`), and the line
    to print (None when there is nothing to say). ``flags``: the CPU's
    (default :func:`cpu_flags`); ``gpu``: :func:`gpu_compute_capability`'s
    answer (False: ask it); ``xla``: the step is XLA-compiled (JAX, or
    ``--jit-compile``), whose CPU backend has no oneDNN: its bfloat16 dots
    do not reach the CPU's bfloat16 units, so auto keeps float32 on a CPU."""
    flags = cpu_flags() if flags is None else flags
    gpu = gpu_compute_capability() if gpu is False else gpu
    bf16_cpu = any(flag in flags for flag in TRAINING_BF16_FLAGS) and not xla
    if gpu is not None:
        name, major = gpu
        bf16_gpu = major is None or major >= 8
        if requested == "auto":
            chosen = "mixed_bfloat16" if bf16_gpu else "float32"
            detail = f", compute capability {major}" if major is not None else ""
            return chosen, f"--precision auto: {chosen} (GPU {name}{detail})"
        if requested == "mixed_bfloat16" and not bf16_gpu:
            return requested, (f"note: --precision mixed_bfloat16 on GPU {name} (compute capability {major}, "
                               "below 8: no bfloat16 units): slower than float32; mixed_float16 runs on its units")
        return requested, None
    if requested == "auto":  # float32, the precision of every earlier release, goes without a word
        chosen = "mixed_bfloat16" if bf16_cpu else "float32"
        return chosen, f"--precision auto: {chosen} ({_cpu_words(flags, TRAINING_BF16_FLAGS)})" if bf16_cpu else None
    if requested == "mixed_bfloat16" and xla and any(flag in flags for flag in TRAINING_BF16_FLAGS):
        return requested, ("note: --precision mixed_bfloat16 with an XLA-compiled step on the CPU (JAX or "
                           "--jit-compile): XLA's CPU backend does not reach the bfloat16 units, so it may run "
                           "slower than float32; --precision auto chooses float32 here")
    if requested == "mixed_bfloat16" and not bf16_cpu and "avx512_bf16" in flags:
        return requested, ("note: --precision mixed_bfloat16 on a CPU with avx512_bf16 but no amx_bf16: a training "
                           "step's casts and elementwise work cost more than its bfloat16 dot products save, so it "
                           "runs slower than in float32 here; --precision auto chooses float32 on this CPU")
    if requested == "mixed_bfloat16" and not bf16_cpu:
        return requested, (f"note: --precision mixed_bfloat16 on a CPU without bfloat16 units ("
                           f"{_cpu_words(flags, BF16_FLAGS)}): TensorFlow emulates the bfloat16 matmuls, so "
                           "training runs slower than in float32 here; --precision auto chooses float32 on this CPU")
    if requested == "mixed_float16" and not any(flag in flags for flag in FP16_FLAGS):
        return requested, (f"note: --precision mixed_float16 on a CPU without float16 units ("
                           f"{_cpu_words(flags, FP16_FLAGS)}): emulated, slower than float32; it is meant for GPUs")
    return requested, None


def choose_serving_precision(requested, flags=None):
    """``(precision, line)`` for an export or a prediction (``"float32"`` or
    ``"bfloat16"``): ``"auto"`` is bfloat16 on a CPU with bfloat16 units,
    float32 elsewhere; an explicit ``"bfloat16"`` on a CPU without them is
    kept, with a line saying it is slower here."""
    flags = cpu_flags() if flags is None else flags
    bf16_cpu = any(flag in flags for flag in BF16_FLAGS)
    if requested == "auto":
        chosen = "bfloat16" if bf16_cpu else "float32"
        return chosen, f"--precision auto: {chosen} ({_cpu_words(flags, BF16_FLAGS)})" if bf16_cpu else None
    if requested == "bfloat16" and not bf16_cpu:
        return requested, (f"note: --precision bfloat16 on a CPU without bfloat16 units ("
                           f"{_cpu_words(flags, BF16_FLAGS)}): TensorFlow emulates its matmuls, so this model runs "
                           "slower than in float32 here; it pays on a CPU with avx512_bf16 or amx_bf16")
    return requested, None
