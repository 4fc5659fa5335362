"""The heads' BiLSTM on JAX: training steps per second of each implementation of ``kerasbert.layers.bilstm``.

Figures, not a test. One jitted step: the layer's forward pass on ragged right-padded ``batch x time
x features`` inputs and the gradients of its outputs' sum for the inputs and weights. Each
implementation (``keras``, the reference; ``scan``; ``cudnn`` on a CUDA GPU) is compiled, warmed
up, timed back to back (median of ``--repeats`` runs of ``--steps`` steps) and compared with ``keras``.

    KERAS_BACKEND=jax python -m bench.bilstm_speed                     # CPU: 16 x 64 x 256, 128 units
    KERAS_BACKEND=jax python -m bench.bilstm_speed --batch 256 --time 128 --features 768   # a GPU
"""

import argparse
import os
import time

import numpy as np

from bench.common import fail
from bench.common import flags_line
from bench.common import median_ms
from bench.common import write_result


def measure(batch, seq, features, units, precision, implementations, steps, repeats, seed=0):
    """One row per implementation: ``{"implementation", "step_ms", "steps_per_s",
    "max_difference"}`` (``max_difference``: outputs and gradients against ``keras``)."""
    import jax
    import jax.numpy as jnp
    import keras

    from kerasbert.layers.bilstm import bilstm

    rng = np.random.default_rng(seed)
    keras.config.set_dtype_policy(precision)
    lengths = np.linspace(seq, seq // 2, batch).astype(np.int32)
    mask = jnp.asarray(np.arange(seq)[None] < lengths[:, None])
    x = jnp.asarray(rng.normal(size=(batch, seq, features)).astype(np.float32))
    probe = jnp.asarray(rng.normal(size=(batch, seq, 2 * units)).astype(np.float32))
    rows, reference, weights = [], None, None
    for implementation in implementations:
        layer = bilstm(units, implementation=implementation)
        layer.build((None, seq, features))
        if weights is None:
            weights = [rng.normal(scale=0.1, size=v.shape).astype(np.float32) for v in layer.weights]
        layer.set_weights(weights)
        chosen = layer.chosen_implementation()
        non_trainable = [v.value for v in layer.non_trainable_variables]

        def loss(values, x, layer=layer, non_trainable=non_trainable):
            y, _ = layer.stateless_call(values, non_trainable, x, mask=mask)
            return jnp.sum(y.astype(jnp.float32) * probe), y

        step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))
        values = [v.value for v in layer.trainable_variables]
        started = time.perf_counter()
        out = jax.block_until_ready(step(values, x))
        compile_s = time.perf_counter() - started
        flat = [np.asarray(out[0][1], np.float32)] + [np.asarray(g, np.float32) for g in jax.tree.leaves(out[1])]
        if reference is None:
            reference = flat
        difference = max(float(np.abs(a - b).max()) for a, b in zip(flat, reference))

        def run(count=steps, step=step, values=values):
            for _ in range(count):
                out = step(values, x)
            jax.block_until_ready(out)

        run(2)  # warm-up
        seconds = median_ms(run, repeats=repeats, warmup=0) / 1000 / steps
        rows.append({"implementation": implementation, "runs_as": chosen, "precision": precision, "batch": batch,
                     "time": seq, "features": features, "units": units, "step_ms": round(seconds * 1000, 3),
                     "steps_per_s": round(1 / seconds, 2), "compile_s": round(compile_s, 2),
                     "max_difference": float(f"{difference:.3g}")})
    keras.config.set_dtype_policy("float32")
    base = rows[0]["step_ms"] if rows and rows[0]["implementation"] == "keras" else None
    for row in rows:
        row["speedup_vs_keras"] = round(base / row["step_ms"], 2) if base else None
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--time", type=int, default=64)
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--precisions", default="float32,mixed_bfloat16")
    parser.add_argument("--implementations", default="keras,scan,cudnn",
                        help="comma-separated; cudnn is left out where the device has none")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="write the record under this folder instead of bench/results")
    args = parser.parse_args()
    if os.environ.get("KERAS_BACKEND") != "jax":
        fail("bilstm_speed needs KERAS_BACKEND=jax")
    import jax

    from kerasbert.layers.bilstm import cudnn_works

    implementations = [i for i in args.implementations.split(",") if i != "cudnn" or cudnn_works()]
    device = jax.devices()[0]
    print(flags_line())
    print(f"device: {device.device_kind} ({device.platform}); jax {jax.__version__}")
    rows = []
    for precision in args.precisions.split(","):
        for row in measure(args.batch, args.time, args.features, args.units, precision, implementations,
                           args.steps, args.repeats):
            row["device"] = device.device_kind
            rows.append(row)
            print(f"{precision} {row['implementation']} ({row['runs_as']}): {row['step_ms']:.2f} ms/step, "
                  f"{row['speedup_vs_keras']}x keras, max difference {row['max_difference']:.2g}, "
                  f"compile {row['compile_s']:.1f} s", flush=True)
    setup = {"step": "forward + gradients (inputs and weights) of one Bidirectional(LSTM) layer, jitted",
             "rows": "ragged right-padded: lengths from time down to time/2", "timed": f"{args.repeats} x "
             f"{args.steps} steps back to back, median", "device": device.device_kind, "platform": device.platform,
             "jax": jax.__version__, "cudnn_available": cudnn_works()}
    write_result("bilstm_speed", rows, setup=setup, name="bilstm", root=args.out,
                 columns=["implementation", "runs_as", "precision", "batch", "time", "features", "units", "step_ms",
                          "speedup_vs_keras", "max_difference", "device"])


if __name__ == "__main__":
    main()
