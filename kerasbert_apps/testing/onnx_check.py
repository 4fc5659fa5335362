"""The contract's ONNX check: every head's ONNX export (:func:`kerasbert_apps.base.onnx_export.export_onnx`)
run by ONNX Runtime in a fresh process that imports no TensorFlow, against what the head's
pipeline predicts; or, for a head that declares it has no ONNX export (its pipeline's
``no_onnx_export``), the export's one-line refusal giving the head's reason."""

import json
import subprocess
import sys
from types import SimpleNamespace

from kerasbert_apps.testing.compare import same_answers
from kerasbert_apps.testing.compare import same_rows
from kerasbert_apps.testing.processes import fresh_env
from kerasbert_apps.testing.toy import MAX_LENGTH
from kerasbert_apps.testing.trained import count_found

#: What the engine's answers may differ from the pipeline's by: scores (ONNX Runtime's float
#: arithmetic is not TensorFlow's; ``predict`` rounds scores to 4 decimals).
ONNX_ATOL = 1e-3
#: Modules the engine's process must not import.
HEAVY = ("tensorflow", "keras", "tf2onnx", "tensorflow_text", "jax")

#: The fresh process of each task: loads every export with the task's one loader
#: (``kerasbert_apps.<task>.load``, which picks ONNX Runtime for an ONNX export), gives its
#: output rows and its ``predict`` results for the texts, and the heavy modules it imported.
ONNX_PROCESS = r"""
import importlib, json, sys
job = json.load(open(sys.argv[1], encoding="utf-8"))
load = importlib.import_module("kerasbert_apps." + job["task"]).load
out = []
for path in job["exports"]:
    engine = load(path)
    out.append({"engine": type(engine).__name__, "rows": engine.output_rows(job["texts"], batch_size=8),
                "predicted": engine.predict(job["texts"])})
heavy = sorted(m for m in sys.modules if m.split(".")[0] in job["heavy"])
json.dump({"heads": out, "heavy": heavy}, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
"""


def onnx_exports(task, every, texts, tmp):
    """Every trained head of ``task`` (``every``: :func:`~kerasbert_apps.testing.trained.trained_head`'s)
    exported as ONNX into ``tmp`` -- or refused, its error kept -- and ONE fresh process
    (:data:`ONNX_PROCESS`) running the exports on ``texts``. Returns ``{"exports": [path or
    None], "refused": [message or None], "heads": [what the process gave, per export],
    "heavy": [...]}``; a head's unexpected failure to export is its check's to report."""
    from kerasbert.errors import KerasbertError
    from kerasbert_apps.base.onnx_export import export_onnx

    exports, refused = [], []
    for trained in every:
        try:
            exports.append(str(export_onnx(trained.pipeline, tmp / trained.name)))
            refused.append(None)
        except KerasbertError as error:
            exports.append(None)
            refused.append(str(error))
    job = {"task": task, "texts": texts, "exports": [p for p in exports if p], "heavy": list(HEAVY)}
    got = {"heads": [], "heavy": []}
    if job["exports"]:
        (tmp / "onnx_job.json").write_text(json.dumps(job, ensure_ascii=False), encoding="utf-8")
        run = subprocess.run([sys.executable, "-c", ONNX_PROCESS, str(tmp / "onnx_job.json"), str(tmp / "onnx_out.json")],
                             capture_output=True, text=True, env=fresh_env(), cwd=tmp)
        assert run.returncode == 0, run.stderr[-3000:]
        got = json.loads((tmp / "onnx_out.json").read_text(encoding="utf-8"))
    answers = iter(got["heads"])
    return SimpleNamespace(every=every, exports=exports, refused=refused, heavy=got["heavy"],
                           heads=[next(answers) if path else None for path in exports])


def check_onnx_answers(trained, export, refused, answers, texts):
    """One head's ONNX check (:func:`onnx_exports` made ``export``, ``refused`` and
    ``answers``): a head that declares no ONNX export is refused in one line giving its
    reason; any other head's export, run by ONNX Runtime, gives the output rows and the
    ``predict`` results of its pipeline (``trained.rows``: the serving path, the SavedModel's),
    long texts decoded across windows, scores within :data:`ONNX_ATOL`."""
    reason = trained.pipeline.no_onnx_export
    if reason:
        assert export is None and refused == f"the {trained.name} head has no ONNX export: {reason}", refused
        return
    assert export is not None, f"{trained.name}: {refused} (a head without an ONNX export declares why: its " \
                               "pipeline's no_onnx_export)"
    assert answers["engine"] == "OnnxEngine", answers["engine"]
    windowed = [row for text, row in zip(texts, trained.rows) if len(text.split()) > MAX_LENGTH]
    assert count_found(windowed) > 0 and count_found(trained.rows) > 20, trained.name
    same_rows(answers["rows"], trained.rows, ONNX_ATOL, f"{trained.name} ONNX export", texts=texts)
    same_answers(answers["predicted"], trained.pipeline.predict(texts), ONNX_ATOL, f"{trained.name} ONNX export")
