"""Relation-triple extraction: train an extractor on your data, then predict (subject,
predicate, object) triples with character offsets, evaluate, tune its thresholds and export for
TF Serving.

:func:`load` loads a trained triples model of any head (``casrel``, ``gplinker`` or a head from
another package); training is :func:`kerasbert_apps.triples.train.train`.
"""


def load(folder, verbose=False, engine="auto"):
    """The trained triples model saved in ``folder``, whatever its head: a
    model folder, or a training run's output folder (whose ``model/`` is
    used). The head recorded in the folder's settings file picks the
    pipeline class (:func:`kerasbert_apps.base.heads.head_of`); a LoRA folder
    loads its adapters onto the checkpoint it names. The result is a
    :class:`~kerasbert_apps.base.pipeline.Pipeline`: ``predict``, ``export``,
    ``save``.

    With ``verbose``, the folder used is printed on standard error.

    ``engine``: ``"onnx"`` runs an ONNX export (``kerasbert triples export
    --format onnx``: its version folder, or the export base) with ONNX
    Runtime, without importing TensorFlow (an
    :class:`~kerasbert_apps.base.onnx_engine.OnnxEngine`: ``predict`` only);
    ``"savedmodel"`` loads the model folder; ``"auto"`` (the default) runs
    ``folder`` with ONNX Runtime when it is an ONNX export and onnxruntime
    is installed, and loads it as a model folder otherwise
    (:func:`kerasbert_apps.base.onnx_engine.load`).
    """
    from kerasbert_apps.base.onnx_engine import load
    from kerasbert_apps.triples.train import TRIPLES

    return load(TRIPLES, folder, engine, verbose)
