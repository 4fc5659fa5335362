"""Round trips the way a user makes them: for each training option that
changes what a folder holds, the folder is written with the CLI (here, in the
test process) and the command a user runs next reads it in a FRESH process,
the installed ``kerasbert`` console script, which has imported nothing of
ours before it reads the folder.

A folder must hold what its next command needs, and need nothing that only
the process that wrote it had loaded: a LoRA folder's model config once
carried the training optimizer's class, which the training process had
imported and a fresh ``predict`` had not.

The options, two per run where they combine as a user would combine them
(each run costs seconds of tracing): ``pretrain``, whose ``OUTPUT/encoder``
is the ``--checkpoint`` of a ``--lora-rank`` run in ``mixed_float16`` (loss
scaling: the most training-only state of the mixed precisions), exported;
``distill`` of that LoRA run; ``--freeze-encoder`` (the layer mix) in
``mixed_bfloat16``. Every head's LoRA folder (NER and triples) answers
``predict`` in a fresh process in the head contract (``kerasbert_apps.testing``).
Tiny runs (the toy checkpoint, a few toy sentences, one epoch); one fresh
process per folder, running the next command of its option (the imports of
TensorFlow are most of its cost). Each fresh process must answer what this
process (which wrote the folder) answers with it: the same entities, offsets
and all, scores within 2e-4; the same scores of ``evaluate``. Each folder
here predicts entities on the texts, so that there is something to compare."""

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import pytest

from conftest import require_shared
from kerasbert.cli import main
from kerasbert_apps import ner
from kerasbert_apps.testing import ner_record
from kerasbert_apps.testing import toy_sentences
from kerasbert_apps.testing.compare import predict_keys
from kerasbert_apps.testing.compare import same_answers
from kerasbert_apps.testing.trained import count_found

KERASBERT = Path(sys.executable).with_name("kerasbert")
TEXTS = ["jack likes dull boy", "all work and no play makes jack a dull boy", "dull jack"] + [
    " ".join(words) for words in toy_sentences(9, 5)]


def toy():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """NER train and dev files (JSON lines) and a file of texts."""
    tmp = tmp_path_factory.mktemp("round_trip_data")
    files = {}
    for split, n, seed in (("train", 16, 0), ("dev", 6, 1)):
        files[split] = tmp / f"{split}.jsonl"
        files[split].write_text("".join(json.dumps(ner_record(w)) + "\n" for w in toy_sentences(n, seed)),
                                encoding="utf-8")
    files["texts"] = tmp / "texts.txt"
    files["texts"].write_text("".join(t + "\n" for t in TEXTS), encoding="utf-8")
    return files


def write(*argv):
    """``kerasbert ARGV`` in this process (the command that writes a folder);
    the global dtype policy a ``--precision`` run sets is put back after it."""
    try:
        assert main([str(a) for a in argv]) == 0, argv
    finally:
        keras.mixed_precision.set_global_policy("float32")


def train_argv(data, output, *options, checkpoint=None):
    """``kerasbert ner train`` on the toy data: one epoch, windows of 16
    tokens, the CRF head without its BiLSTM (less to trace, here and in the
    next command), no calibration pass."""
    return ("ner", "train", "--checkpoint", checkpoint or toy(), "--train", data["train"], "--dev", data["dev"],
            "--output", output, "--epochs", "1", "--batch-size", "8", "--max-length", "16", "--seed", "7",
            "--no-lstm", "--no-calibrate", *options)


def fresh(*argv, cwd):
    """``kerasbert ARGV`` in a fresh process; its standard output. Fails with
    the command's last lines of standard error if it does not exit 0."""
    argv = [str(a) for a in argv]
    run = subprocess.run([str(KERASBERT), *argv], capture_output=True, text=True, cwd=cwd,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    last = [line for line in run.stderr.splitlines() if line.strip()][-5:]
    assert run.returncode == 0, f"kerasbert {' '.join(argv[:2])} in a fresh process: " + "\n".join(last)
    return run.stdout


def predicted(stdout):
    """The JSON lines of ``ner predict``'s output."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def answers_here(folder, texts=TEXTS):
    """What this process, which wrote ``folder``, predicts with it (checked: some entities)."""
    answers = ner.load(folder).predict(texts)
    assert count_found(answers) > 0, f"{folder} predicts no entity here: nothing to compare"
    return answers


@pytest.fixture(scope="module")
def lora_run(data, tmp_path_factory):
    """``pretrain`` on toy text, then ``ner train --lora-rank 2 --precision
    mixed_float16`` with pretrain's ``OUTPUT/encoder`` as ``--checkpoint``:
    the training output folder (its model: adapters and head, the
    pre-trained encoder named as the checkpoint they go on)."""
    tmp = tmp_path_factory.mktemp("lora")
    text = tmp / "text.txt"
    text.write_text("".join(" ".join(w) + "\n" for w in toy_sentences(24, 3)), encoding="utf-8")
    write("pretrain", "--checkpoint", toy(), "--text", text, "--output", tmp / "pre", "--max-length", "16",
          "--batch-size", "4", "--steps-per-epoch", "2", "--held-out", "4")
    write(*train_argv(data, tmp / "run", "--lora-rank", "2", "--precision", "mixed_float16",
                      checkpoint=tmp / "pre" / "encoder"))
    settings = json.loads((tmp / "run" / "model" / "tagger.json").read_text(encoding="utf-8"))
    assert settings["lora"]["checkpoint"] == str((tmp / "pre" / "encoder").resolve())
    return tmp / "run"


def test_lora_folder_on_a_pretrained_encoder_exports_in_a_fresh_process(lora_run, tmp_path):
    """``ner export`` of the LoRA run: the fresh process loads the encoder
    that ``pretrain`` wrote (as the checkpoint of the adapters) and the LoRA
    folder (whose run compiled a loss-scaled optimizer, mixed_float16); its
    export, served here, answers what the folder predicts here."""
    import tensorflow as tf

    out = fresh("ner", "export", "--model", lora_run, "--output", tmp_path / "export", cwd=tmp_path)
    assert "SavedModel: " in out and (tmp_path / "export" / "1" / "saved_model.pb").exists()
    export = tf.saved_model.load(str(tmp_path / "export" / "1"))
    served = ner.load(lora_run).predict(TEXTS, serving=export.signatures["serving_default"])
    same_answers(served, answers_here(lora_run), 2e-4, "the LoRA folder's export")


def test_distilled_student_predicts_in_a_fresh_process(data, lora_run, tmp_path):
    """``ner distill`` of the LoRA run (the student: a plain folder), then ``ner predict`` on the
    student in a fresh process: what the student predicts here."""
    write("ner", "distill", "--teacher", lora_run, "--train", data["train"], "--dev", data["dev"],
          "--output", tmp_path / "student", "--student-layers", "1", "--epochs", "1", "--batch-size", "8",
          "--no-calibrate")
    assert (tmp_path / "student" / "model" / "model.keras").exists()
    rows = predicted(fresh("ner", "predict", "--model", tmp_path / "student", data["texts"], cwd=tmp_path))
    want = answers_here(tmp_path / "student")
    same_answers(predict_keys(rows, want), want, 2e-4, "the student in a fresh process")


def test_frozen_encoder_in_mixed_bfloat16_evaluates_in_a_fresh_process(data, tmp_path):
    """``--freeze-encoder`` (the head reads a learned mix of the encoder's
    layers) in ``mixed_bfloat16`` (the layers' dtype policies in ``model.keras``),
    then ``ner evaluate`` in a fresh process: the scores ``ner evaluate`` gives
    here, on a folder that predicts entities on the dev texts."""
    write(*train_argv(data, tmp_path / "run", "--freeze-encoder", "--precision", "mixed_bfloat16"))
    fresh("ner", "evaluate", "--model", tmp_path / "run", "--data", data["dev"], "--output", tmp_path / "scores.json",
          cwd=tmp_path)
    write("ner", "evaluate", "--model", tmp_path / "run", "--data", data["dev"], "--output", tmp_path / "here.json")
    dev = [json.loads(line)["text"] for line in data["dev"].read_text(encoding="utf-8").splitlines()]
    answers_here(tmp_path / "run", dev)
    scores, here = (json.loads((tmp_path / name).read_text(encoding="utf-8")) for name in ("scores.json", "here.json"))
    assert "f1" in scores
    same_answers(scores, here, 1e-4, "evaluate in a fresh process")
