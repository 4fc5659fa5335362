"""Relation-triple extraction: train an extractor on your data, then predict (subject,
predicate, object) triples with character offsets, evaluate, tune its thresholds and export for
TF Serving.

:func:`load` loads a trained triples model of any head (``casrel``, ``gplinker`` or a head from
another package); training is :func:`kerasbert_apps.triples.train.train`.
"""


def load(folder, verbose=False, engine="auto"):
    """The trained triples model saved in ``folder`` (a model folder, a
    training run's output folder, or an ONNX export of ``kerasbert triples
    export --format onnx``), whatever its head: as
    :func:`kerasbert_apps.ner.load` for an NER model, with the same
    ``verbose`` and ``engine``."""
    from kerasbert_apps.base.onnx_engine import load
    from kerasbert_apps.triples.train import TRIPLES

    return load(TRIPLES, folder, engine, verbose)
