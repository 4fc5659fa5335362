"""Writes the LoRA model folders of tests/data/lora_b1718a2/ with the code of commit b1718a2.

Run from a detached worktree of that commit, its packages first on the path
and a working folder outside both trees (``OLD``, ``OLD_PATH`` and ``WORK``
are folders of your choice; ``REPO`` is this repository, ``../shared``
beside it)::

    git worktree add --detach "$OLD" b1718a2
    mkdir -p "$OLD_PATH" && ln -sfn "$OLD/apps" "$OLD_PATH/kerasbert_apps" && ln -sfn "$OLD/kerasbert" "$OLD_PATH/kerasbert"
    cd "$WORK" && PYTHONPATH="$OLD_PATH" python "$REPO/tests/data/lora_b1718a2/make.py"

Each folder is the ``OUTPUT/model`` of a tiny ``--lora-rank 2`` training run
of that code (the toy checkpoint, toy sentences, one epoch) through its
command line, as a user's run wrote it: its ``model.json`` carries the
run's compile settings (the ``GroupedAdamW`` optimizer of
``kerasbert.optimizer`` and its ``WarmupLinearDecay`` schedule). Two edits,
both in the settings file: the checkpoint the adapters go on, an absolute
path of the machine that wrote it, becomes the toy checkpoint's folder name
(a test points it at the toy checkpoint), and the triples thresholds are
lowered so that the one-epoch model finds triples. ``expected.json``: what
that code's ``predict`` gave for :data:`TEXTS` (in the training process,
where the folder loaded).
"""

import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKPOINT = HERE.parents[2].parent / "shared" / "data" / "models" / "keras_bert_test_checkpoint"
TEXTS = ["all work and no play makes jack a dull boy", "jack likes dull boy", "", "dull jack likes dull boy and play"]
WORDS = "all work and no play makes jack a dull boy".split()


def sentences(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 12))]
        at = rng.randrange(len(words))
        words[at:at] = ["jack", "likes", "dull", "boy"] if rng.random() < 0.6 else ["dull", "jack"]
        out.append(" ".join(words))
    return out


def ner_record(text):
    """``jack`` is a PER."""
    entities, start = [], 0
    for word in text.split(" "):
        if word == "jack":
            entities.append({"start": start, "end": start + 4, "type": "PER"})
        start += len(word) + 1
    return {"text": text, "entities": entities}


def triples_record(text):
    return {"text": text, "triple_list": [["jack", "likes", "dull boy"]] if "jack likes dull boy" in text else []}


def main():
    import kerasbert
    import kerasbert_apps

    for package in (kerasbert, kerasbert_apps):  # the old code, not this tree's
        assert HERE.parents[2] not in Path(package.__path__[0]).resolve().parents, package.__path__
    from kerasbert.cli import main as cli
    from kerasbert_apps.ner.train import NER
    from kerasbert_apps.triples.train import TRIPLES

    work = Path(tempfile.mkdtemp())
    runs = {"crf": ("ner", NER, ner_record, ["--lstm-units", "4", "--no-calibrate"]),
            "casrel": ("triples", TRIPLES, triples_record, [])}
    for head, (task_name, task, record, options) in runs.items():
        for split, n, seed in (("train", 16, 0), ("dev", 6, 1)):
            (work / f"{head}_{split}.jsonl").write_text(
                "".join(json.dumps(record(t)) + "\n" for t in sentences(n, seed)), encoding="utf-8")
        output = work / head
        status = cli([task_name, "train", "--checkpoint", str(CHECKPOINT), "--train", str(work / f"{head}_train.jsonl"),
                      "--dev", str(work / f"{head}_dev.jsonl"), "--output", str(output), "--epochs", "1",
                      "--batch-size", "8", "--max-length", "16", "--seed", "7", "--lora-rank", "2", "--head", head,
                      *options])
        assert status == 0, head
        pipeline = task.load(output)
        if task_name == "triples":
            pipeline = pipeline.with_thresholds({key: 0.005 for key in pipeline.thresholds})
            pipeline.save_settings(output / "model")
        folder = HERE / head
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(output / "model", folder)
        (folder / "dev_scores.json").unlink()  # a training report, not read by loading
        settings_file = folder / pipeline.settings_file
        settings = json.loads(settings_file.read_text(encoding="utf-8"))
        assert "compile_config" in json.loads((folder / "model.json").read_text(encoding="utf-8"))
        settings["lora"]["checkpoint"] = CHECKPOINT.name
        settings_file.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (folder / "expected.json").write_text(json.dumps(pipeline.predict(TEXTS), indent=1) + "\n")
        print(head, sorted(p.name for p in folder.iterdir()))
    shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
