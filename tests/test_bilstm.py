"""The heads' BiLSTM (kerasbert.layers.bilstm): Keras's layer, computed faster on JAX.

* on JAX, ``"scan"`` and ``"cudnn"`` (its weight layout and lengths checked with
  ``jax.experimental.rnn``'s own reference, ``lstm_ref``, which JAX's tests
  hold its cuDNN kernel to; the kernel itself needs a GPU) give Keras's
  outputs and gradients on ragged right-padded rows, the scan also on a mask
  with holes and under mixed_bfloat16; ``"auto"`` is the scan on a CPU;
* a model folder written before keeps its BiLSTM weights and outputs, on JAX
  (every implementation) and on TensorFlow (Keras's own, and the serving
  graph's fused kernel).
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
OLD_CRF = REPO_ROOT / "tests" / "data" / "heads_33d6836" / "crf"

JAX_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import jax, jax.numpy as jnp
    import keras
    from jax.experimental import rnn
    from kerasbert.layers.bilstm import bilstm, cudnn_bilstm

    def reference_lstm(x, h0, c0, w, lengths, input_size, hidden_size, num_layers, dropout, bidirectional):
        parts = rnn.unpack_lstm_weights(w, input_size, hidden_size, num_layers, bidirectional)
        return rnn.lstm_ref(x, h0, c0, *parts, lengths, input_size, hidden_size, num_layers, 0.0, bidirectional)

    jax.config.update("jax_default_matmul_precision", "float32")
    rng = np.random.default_rng(0)
    batch, time, features, units = 3, 7, 5, 4
    x = rng.normal(size=(batch, time, features)).astype("float32")
    probe = rng.normal(size=(batch, time, 2 * units)).astype("float32")
    weights = None

    def layer_with(implementation, dtype=None):
        global weights
        keras.config.set_dtype_policy(dtype or "float32")
        layer = bilstm(units, implementation=implementation)
        keras.config.set_dtype_policy("float32")
        layer.build((None, time, features))
        if weights is None:
            weights = [rng.normal(scale=0.5, size=v.shape).astype("float32") for v in layer.weights]
        layer.set_weights(weights)
        return layer

    def outputs_and_gradients(implementation, mask, dtype=None, call=None):
        layer = layer_with(implementation, dtype)

        def loss(values, x):
            if call is None:
                y, _ = layer.stateless_call(values, [v.value for v in layer.non_trainable_variables], x, mask=mask)
            else:
                with keras.StatelessScope(state_mapping=list(zip(layer.trainable_weights, values))):
                    y = call(x, mask, layer.forward_layer.cell, layer.backward_layer.cell)
            return jnp.sum(jnp.asarray(y, jnp.float32) * probe), y

        values = [v.value for v in layer.trainable_weights]
        (_, y), grads = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(values, x)
        return [np.asarray(y, np.float32)] + [np.asarray(g, np.float32) for g in grads[0]] + [np.asarray(grads[1])]

    def worst(a, b):
        return max(float(np.abs(p - q).max()) for p, q in zip(a, b))

    ragged = np.arange(time)[None] < np.array([[7], [4], [1]])
    holes = ragged.copy()
    holes[0, 2] = holes[0, 5] = False
    keras_ragged = outputs_and_gradients("keras", ragged)
    result = {
        "padded_zero": bool(np.all(keras_ragged[0][~ragged] == 0)),
        "scan": worst(outputs_and_gradients("scan", ragged), keras_ragged),
        "scan_holes": worst(outputs_and_gradients("scan", holes), outputs_and_gradients("keras", holes)),
        "scan_no_mask": worst(outputs_and_gradients("scan", None), outputs_and_gradients("keras", None)),
        "cudnn_layout": worst(outputs_and_gradients(
            "cudnn", ragged, call=lambda *a: cudnn_bilstm(*a, lstm=reference_lstm)), keras_ragged),
        "scan_bf16": worst(outputs_and_gradients("scan", ragged, "mixed_bfloat16"),
                           outputs_and_gradients("keras", ragged, "mixed_bfloat16")),
        "scale": float(max(np.abs(a).max() for a in keras_ragged)),
        "auto_on_cpu": layer_with("auto").chosen_implementation(),
        "dropout_falls_back": None,
    }
    dropped = keras.layers.LSTM(units, return_sequences=True, dropout=0.5)
    from kerasbert.layers.bilstm import Bidirectional

    layer = Bidirectional(dropped, implementation="scan")
    layer.build((None, time, features))
    result["dropout_falls_back"] = [layer.chosen_implementation(training=True), layer.chosen_implementation(training=False)]

    # the first-use check of "auto" on a GPU, with cuDNN's kernel replaced by its
    # reference (the check runs while the training step is being traced)
    import warnings
    import kerasbert.layers.bilstm as module

    rnn.lstm = reference_lstm
    probes = []

    def traced(x):
        with jax.ensure_compile_time_eval():
            probes.append(module._probe_cudnn())
        return x

    jax.jit(traced)(1.0)
    good_weights = module.cudnn_weights
    module.cudnn_weights = lambda f, b: good_weights(b, f)  # the directions swapped: must be caught
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        probes.append(module._probe_cudnn())
    module.cudnn_weights = good_weights
    result["probes"] = probes
    result["probe_warning"] = [str(w.message) for w in caught]

    # a folder written before: its BiLSTM weights load into the new layer, and
    # every implementation gives its outputs
    from kerasbert_apps.ner.train import NER

    pipeline = NER.load(sys.argv[1])
    model = pipeline.model
    rows = {"token_ids": np.array([[2, 5, 6, 7, 3, 0], [2, 8, 3, 0, 0, 0]], np.int32),
            "segment_ids": np.zeros((2, 6), np.int32),
            "padding_mask": np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], np.int32)}
    potentials = {}
    for implementation in ("keras", "scan"):
        model.lstm.implementation = implementation
        potentials[implementation] = np.asarray(model(rows, training=False)["potentials"])
    result["old_folder_class"] = type(model.lstm).__module__ + "." + type(model.lstm).__name__
    result["old_folder"] = float(np.abs((potentials["scan"] - potentials["keras"])[rows["padding_mask"] == 1]).max())
    result["old_folder_weights"] = [np.asarray(w).tolist() for w in model.lstm.weights[:1]]
    print("RESULT " + json.dumps(result))
    """
)


@pytest.fixture(scope="module")
def jax_result():
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", JAX_SCRIPT, str(OLD_CRF)], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"JAX subprocess failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def test_fast_paths_equal_keras_on_jax(jax_result):
    r = jax_result
    assert r["padded_zero"] and r["scale"] > 0.5  # outputs and gradients of a real size
    # outputs, the six weight gradients and the input gradient, float32
    assert r["scan"] < 1e-5, r
    assert r["scan_holes"] < 1e-5, r
    assert r["scan_no_mask"] < 1e-5, r
    assert r["cudnn_layout"] < 1e-5, r
    # mixed_bfloat16 computes in bfloat16 on both paths (different summation orders)
    assert r["scan_bf16"] < 0.1 * r["scale"], r
    assert r["auto_on_cpu"] == "scan"
    assert r["dropout_falls_back"] == ["keras", "scan"]
    # the first-use check on a GPU: passes inside a trace, fails (with a warning) on a wrong layout
    assert r["probes"] == [True, False]
    assert any("differs from the scan" in w for w in r["probe_warning"]), r["probe_warning"]


def test_old_folder_keeps_its_bilstm_on_jax(jax_result):
    import h5py
    import zipfile

    assert jax_result["old_folder_class"] == "kerasbert.layers.bilstm.Bidirectional"
    assert jax_result["old_folder"] < 1e-5
    with zipfile.ZipFile(OLD_CRF / "model.keras") as archive, archive.open("model.weights.h5") as f:
        with h5py.File(f) as h5:
            saved = np.asarray(h5["layers/bidirectional/forward_layer/cell/vars/0"])
    np.testing.assert_array_equal(np.asarray(jax_result["old_folder_weights"][0], np.float32), saved)


def test_old_folder_on_tensorflow_runs_keras_and_the_fused_kernel(tmp_path):
    import keras

    from kerasbert_apps.ner.heads.bio.fused_bilstm import fused_bilstm
    from kerasbert_apps.ner.train import NER
    from kerasbert.layers.bilstm import Bidirectional

    folder = tmp_path / "crf"
    shutil.copytree(OLD_CRF, folder)
    model = NER.load(folder).model
    assert isinstance(model.lstm, Bidirectional) and isinstance(model.lstm, keras.layers.Bidirectional)
    assert model.lstm.chosen_implementation() == "keras"  # TensorFlow: Keras's own (cuDNN on a GPU)
    x = np.random.default_rng(0).normal(size=(2, 5, model.lstm.forward_layer.cell.kernel.shape[0])).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], bool)
    want = np.asarray(model.lstm(x, mask=mask))
    got = np.asarray(fused_bilstm(model.lstm)(x, mask))
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.abs(want).max() > 0.01


def test_unknown_implementation_is_refused():
    from kerasbert.layers.bilstm import bilstm

    with pytest.raises(ValueError, match="implementation must be one of auto, cudnn, scan, keras"):
        bilstm(4, implementation="fast")
