"""Relation-triple extraction: train an extractor on your data, then predict (subject,
predicate, object) triples with character offsets, evaluate, tune its thresholds and export for
TF Serving.

:func:`load` loads a trained triples model of any head (``casrel``, ``gplinker`` or a head from
another package); training is :func:`kerasbert_apps.triples.train.train`.
"""


def load(folder, verbose=False):
    """The trained triples model saved in ``folder``, whatever its head: a
    model folder, or a training run's output folder (whose ``model/`` is
    used). The head recorded in the folder's settings file picks the
    pipeline class (:func:`kerasbert_apps.base.heads.head_of`); a LoRA folder
    loads its adapters onto the checkpoint it names. The result is a
    :class:`~kerasbert_apps.base.pipeline.Pipeline`: ``predict``, ``export``,
    ``save``.

    With ``verbose``, the folder used is printed on standard error.
    """
    from kerasbert_apps.triples.train import TRIPLES

    return TRIPLES.load(folder, verbose=verbose)
