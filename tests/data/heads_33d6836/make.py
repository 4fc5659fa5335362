"""Writes the model folders of tests/test_heads_compat.py with the code of commit 33d6836.

Run from a worktree of that commit (``git worktree add --detach OLD
33d6836``, OLD a folder of your choice) with its packages first on the path::

    mkdir -p OLD-path && ln -sfn OLD/apps OLD-path/kerasbert_apps \\
        && ln -sfn OLD/kerasbert OLD-path/kerasbert
    PYTHONPATH=OLD-path python tests/data/heads_33d6836/make.py

Each head gets a folder (its settings file as that code wrote it, without
``"head"``) holding an untrained model on the tiny test checkpoint (random
head weights, seed fixed), and ``expected.json``: what that code's
``predict`` gave for :data:`TEXTS`.
"""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import keras

import kerasbert_apps

HERE = Path(__file__).resolve().parent
CHECKPOINT = HERE.parents[2].parent / "shared" / "data" / "models" / "keras_bert_test_checkpoint"
TEXTS = ["all work and no play makes jack a dull boy", "jack", "", "dull dull jack boy play work all and no makes"]


def main():
    assert "old40" in kerasbert_apps.__path__[0], kerasbert_apps.__path__  # the old code, not this tree's
    from kerasbert.loader import load_encoder
    from kerasbert.tokenizer import BertTokenizer
    from kerasbert_apps.ner.span_tagger import SpanTagger
    from kerasbert_apps.ner.tagger import Tagger
    from kerasbert_apps.triples.extractor import Extractor
    from kerasbert_apps.triples.gplinker import GPLinkerExtractor

    tokenizer = BertTokenizer(str(CHECKPOINT / "vocab.txt"), lowercase=True)
    common = dict(dropout=0.0, freeze_encoder=False, lstm=True, lstm_units=4, constrained_decoding=True,
                  pointer_size=8)
    tags = ["O", "B-PER", "I-PER", "B-THING", "I-THING"]
    predicates = ["likes", "works_for"]
    made = {  # head: (pipeline, labels, build settings, thresholds that let a random model find a few)
        "crf": (Tagger, tags, dict(common, crf=True), {}),
        "softmax": (Tagger, tags, dict(common, crf=False), {}),
        "global-pointer": (SpanTagger, ["PER", "THING"], common, {}),
        "casrel": (Extractor, predicates, common, {"thresholds": (0.015, 0.012)}),
        "gplinker": (GPLinkerExtractor, predicates, common, {"thresholds": {"entity": 0.6, "link": 0.55}}),
    }
    for name, (cls, labels, settings, more) in made.items():
        keras.utils.set_random_seed(7)
        model = cls.build_model(load_encoder(str(CHECKPOINT)), labels, SimpleNamespace(**settings))
        pipeline = cls(model, tokenizer, labels, max_length=8, overlap=2, **more)  # short windows: the merge runs too
        folder = HERE / name
        pipeline.save(folder)
        (folder / "expected.json").write_text(json.dumps(pipeline.predict(TEXTS), indent=1) + "\n")
        print(name, sorted(p.name for p in folder.iterdir()))


if __name__ == "__main__":
    sys.exit(main())
