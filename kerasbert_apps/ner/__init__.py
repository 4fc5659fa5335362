"""Named-entity recognition: train a tagger on your data, then predict entities with character
offsets, evaluate, calibrate, select texts to label and export for TF Serving.

:func:`load` loads a trained NER model of any registered head (the kit's own or a head from
another package: ``kerasbert heads`` lists them); training is :func:`kerasbert_apps.ner.train.train`.
"""


def load(folder, verbose=False, engine="auto"):
    """The trained NER model saved in ``folder``, whatever its head: a model
    folder, or a training run's output folder (whose ``model/`` is used). The
    head recorded in the folder's settings file picks the pipeline class
    (:func:`kerasbert_apps.base.heads.head_of`); a LoRA folder loads its
    adapters onto the checkpoint it names. The result is a
    :class:`~kerasbert_apps.base.pipeline.Pipeline`: ``predict``, ``export``,
    ``save``.

    With ``verbose``, the folder used is printed on standard error.

    ``engine``: ``"onnx"`` runs an ONNX export (``kerasbert ner export
    --format onnx``: its version folder, or the export base) with ONNX
    Runtime, without importing TensorFlow (an
    :class:`~kerasbert_apps.base.onnx_engine.OnnxEngine`: ``predict`` only);
    ``"savedmodel"`` loads the model folder; ``"auto"`` (the default) runs
    ``folder`` with ONNX Runtime when it is an ONNX export and onnxruntime
    is installed, and loads it as a model folder otherwise
    (:func:`kerasbert_apps.base.onnx_engine.load`).
    """
    from kerasbert_apps.base.onnx_engine import load
    from kerasbert_apps.ner.train import NER

    return load(NER, folder, engine, verbose)
