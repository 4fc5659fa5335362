"""The head contract: the checks every head keeps, shipped with the kit for the kit's heads and
for a head of another package (the way keras-hub ships ``run_task_test`` and spaCy its pytest
utilities). The checks every Keras layer keeps are the layer harness, :mod:`kerasbert.testing`.

A head's own test file runs every check for its head, with pytest (the only thing it needs
beyond the kit)::

    from kerasbert_apps.testing import HeadContract

    class TestMyHead(HeadContract):
        heads = [("ner", "my-head")]

The head is found in the registry (:mod:`kerasbert_apps.base.heads`): a head of another package
must be installed (``pip install -e .``: its ``kerasbert.heads`` entry point is how the fresh
processes below find it too). ``train_options`` of the class (a dict) sets the head's options
for its tiny training run (small sizes keep it quick). Nothing else is needed: no data files,
no checkpoint, no ``conftest.py``.

For each head, on a tiny random BERT checkpoint in Google's layout that the package writes
(:func:`tiny_checkpoint`) and toy data it makes (:func:`toy_records`): a tiny training run
through the task's ``train`` (the folder records its head), then, on that model with its head's
weights shaken so that it predicts many entities / triples (a stricter comparison than a
1-epoch model that predicts little) and its decoding settings away from their defaults (score
temperature, thresholds):

* listing the heads (what ``--help`` does) imports neither TensorFlow nor the head's model code;
* the save / load round trip, through the task's one loader (``kerasbert_apps.<task>.load``);
* the text SavedModel and its bfloat16 twin, served in a fresh process that imports only
  TensorFlow and TF-Text, give ``predict``'s outputs (offsets, labels, scores within 2e-4) with
  core ops plus the allowed TF-Text op only;
* the ONNX export (``export --format onnx``), run by ONNX Runtime in a fresh process that
  imports no TensorFlow, gives ``predict``'s outputs and answers (scores within 1e-3); a head
  that cannot be converted declares why (its pipeline's ``no_onnx_export``) and its export is
  refused in one line saying so;
* the ``--input ids`` export, with core ops only, gives ``predict``'s answers (an NER head's
  outputs through the head's own decoding; a triples head's token positions read as character
  offsets through the tokenizer's); ``--jit-compile head`` is refused in one line for a head
  without a compiled part;
* a LoRA folder (adapters and head only) loads back to the same outputs and merges, and
  ``kerasbert TASK predict`` in a fresh process answers what the pipeline that saved it
  predicts (its head shaken too: entities / triples to compare);
* ``predict`` on the JAX backend gives what TensorFlow gives (and, for a head with a score
  temperature, the scores calibration fits it on);
* NER: ``ner select`` measures the head's outputs if it declares a measure (the entities are
  ``predict``'s, ``P(best)`` a probability), else refuses it in one line.

The fresh processes run once per task for all the class's heads (their imports are most of
their cost: one TensorFlow process serves the exports and then runs the LoRA folders' ``predict``,
one JAX process loads every folder); a head is trained once per test process and set of
``train_options``, whichever classes use it (:func:`trained_head`). Head-specific behaviour
(decoding rules, training rows, thresholds) belongs in the head's own tests beside the class.

The kit runs the same class over its own heads (``tests/test_heads_ner.py``:
``heads = kit_heads("ner")``), so a new folder under ``kerasbert_apps/<task>/heads/`` is checked
with no line of test code.

Modules: :mod:`~kerasbert_apps.testing.toy` (the toy world), :mod:`~kerasbert_apps.testing.trained`
(the trained heads), :mod:`~kerasbert_apps.testing.compare` (how answers are compared),
:mod:`~kerasbert_apps.testing.processes` (the other processes' scripts),
:mod:`~kerasbert_apps.testing.onnx_check` (the ONNX export's check),
:mod:`~kerasbert_apps.testing.contract` (the checks).
"""

from kerasbert_apps.testing.contract import HeadContract
from kerasbert_apps.testing.toy import MAX_LENGTH
from kerasbert_apps.testing.toy import TEXTS
from kerasbert_apps.testing.toy import VOCAB
from kerasbert_apps.testing.toy import WORDS
from kerasbert_apps.testing.toy import ner_record
from kerasbert_apps.testing.toy import tiny_checkpoint
from kerasbert_apps.testing.toy import toy_records
from kerasbert_apps.testing.toy import toy_sentences
from kerasbert_apps.testing.toy import triples_record
from kerasbert_apps.testing.trained import FIXED
from kerasbert_apps.testing.trained import SMALL
from kerasbert_apps.testing.trained import kit_heads
from kerasbert_apps.testing.trained import lora_pipeline
from kerasbert_apps.testing.trained import session_checkpoint
from kerasbert_apps.testing.trained import trained_head

__all__ = ["FIXED", "HeadContract", "MAX_LENGTH", "SMALL", "TEXTS", "VOCAB", "WORDS", "kit_heads", "lora_pipeline",
           "ner_record", "session_checkpoint", "tiny_checkpoint", "toy_records", "toy_sentences", "trained_head",
           "triples_record"]
