"""The contract's other processes: the fresh TensorFlow process that serves the exports and
runs ``predict`` on the LoRA folders, the JAX process, and the listing of the heads (each a
script run with ``python -c`` or from a file), and what they need."""

import os

import pytest

#: The fresh TensorFlow process of each task: first it serves the text
#: exports importing only TensorFlow and TF-Text (as TF Serving does), then
#: -- nothing of kerasbert imported yet -- runs ``kerasbert TASK predict``
#: on every LoRA folder (as a user's first command after a ``--lora-rank`` run).
FRESH_PROCESS = r"""
import contextlib, io, json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the TF-Text op, as TF Serving links it)
job = json.load(open(sys.argv[1], encoding="utf-8"))
texts = job["texts"]
served = []
for path in job["exports"]:
    serve = tf.saved_model.load(path).signatures["serving_default"]
    rows = []
    for b in range(0, len(texts), 16):
        got = {k: v.numpy() for k, v in serve(text=tf.constant(texts[b:b + 16], tf.string)).items()}
        for i in range(len(texts[b:b + 16])):
            n = int(got["count"][i])
            rows.append({k: [x.decode("utf-8") if isinstance(x, bytes) else x for x in v[i, :n].tolist()]
                         for k, v in got.items() if k != "count"})
    served.append(rows)
ours = [m for m in sys.modules if m.split(".")[0] in ("kerasbert", "kerasbert_apps")]
predicted = []
from kerasbert.cli import main

for folder in job["lora"]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([job["task"], "predict", "--model", folder, job["lora_texts"]])
        except Exception as error:  # reported per folder
            status, err = repr(error), io.StringIO(repr(error))
    predicted.append({"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()[-2000:]})
json.dump({"served": served, "imported_before": ours, "lora": predicted}, open(sys.argv[2], "w", encoding="utf-8"),
          ensure_ascii=False)
"""

JAX_PREDICT = r"""
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras
assert keras.backend.backend() == "jax"
import importlib
from kerasbert_apps.ner.examples import Example

load = importlib.import_module("kerasbert_apps." + sys.argv[1]).load
texts = json.load(open(sys.argv[2], encoding="utf-8"))
for folder in sys.argv[3:]:
    pipeline = load(folder)
    out = {"rows": pipeline.output_rows(texts, batch_size=16)}
    if hasattr(pipeline, "score_outcomes"):  # calibration's pass, on the host
        scores_at, _ = pipeline.score_outcomes([Example(t, [], "jax") for t in texts], batch_size=16)
        out["outcomes"] = scores_at(1.3).tolist()
    print("OUT " + json.dumps(out, ensure_ascii=False), flush=True)
"""

LISTING = r"""
import json, sys
from kerasbert_apps.base import heads

names = {task: list(heads.names(task)) for task in heads.TASKS}
print(json.dumps({"names": names, "modules": sorted(sys.modules)}))
"""


def require_module(name):
    """``name`` importable, or the test skips -- and fails where ``CI`` is set, so that a missing
    package never hides a check there (``pytest.importorskip`` would skip silently)."""
    import importlib.util

    if importlib.util.find_spec(name) is None:
        message = f"needs {name} (pip install {name})"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)


def fresh_env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
