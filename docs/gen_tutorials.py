"""The tutorials' commands, run, and their outputs as the pages show them.

Each tutorial page (``docs/tutorials/NAME.md``) shows its commands and their outputs through
markers, ``<!-- kerasbert:tutorial NAME STEP -->``, which the site's build
(``docs/hooks.py``) replaces with the step's command and the output recorded in
``docs/tutorials/NAME.json``. This script writes those files: it runs every step of
:data:`TUTORIALS` in a fresh folder, exactly as the page shows it (``bash -c``, the
``kerasbert`` command of this checkout's environment), and records what each printed, with
the figures that change from run to run masked (:func:`mask`: seconds, timestamps, the
folder's absolute path). The data the tutorials read is written by :func:`write_data` from the
shipped sample corpora (``kerasbert_apps/samples``) into ``docs/tutorials/data/``, committed, so a reader
with a clone has it too.

Two steps are not run as shown: ``docker run`` (TF Serving itself), and the ``curl`` request
to it, whose reply is computed from the exported SavedModel the way TF Serving's REST API
answers a row-format ``instances`` request (:func:`tf_serving_reply`).

The steps that need a checkpoint the repository does not ship name it under ``checkpoints/``
(:data:`CHECKPOINTS`: the folder's name on the page, the page says where to download it); here
those names are links to the project's copies (``$KERASBERT_SHARED``, else ``../shared``). Each
record also says when and on what it ran (``ran``: the date, the platform, the versions of
Python and the packages that make the outputs).

    python docs/gen_tutorials.py              # run every tutorial, rewrite its JSON
    python docs/gen_tutorials.py NAME ...     # only these
    python docs/gen_tutorials.py --check      # run them, exit 1 if a page's outputs are stale

``tests/test_tutorials.py`` runs the check (:func:`differences`): what a command prints must be
the same text, and each of its numbers within :data:`TOLERANCE` of the recorded one (the
figures a training run gives move a little with the CPU's arithmetic; a score that falls by
more is a stale page, or a regression). The rows of a score-bin table and an epoch's
best-so-far verdict are left out of the text check (:data:`SCORE_BIN`, :data:`EPOCH_VERDICT`:
they follow the scores); the totals and the scores are checked.
"""

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "tutorials"
DATA = PAGES / "data"
#: Where the tutorials' commands run: the folder's absolute path shows as this in the outputs.
WORKDIR_SHOWN = "$PWD"
#: Checkpoints a clone does not have: the folder the pages name (``checkpoints/NAME``, which the
#: reader downloads) -> the project's copy under ``$KERASBERT_SHARED/data/models``.
CHECKPOINTS = {
    "keras_bert_test_checkpoint": "keras_bert_test_checkpoint",
    "albert_tiny_zh_google": "albert_tiny_zh_google_INDEX_ONLY",
    "albert_tiny_zh_brightmart": "albert_tiny_zh_brightmart_INDEX_ONLY",
}
#: The corpora the tutorials read that the clone does not ship, by the folder name the page gives
#: them under ``corpora/`` (the page says where to download them) -> the project's copy under
#: ``data/``.
CORPORA = {"people_daily": "people_daily_ner_partial"}
#: The packages whose versions a record names (with Python's).
PACKAGES = ("kerasbert", "tensorflow", "keras", "keras-hub", "tensorflow-text")
#: How far a number of a command's output may move from the recorded one and still be current:
#: scores written as fractions (F1, precision, recall, entity scores, ECE: a number from 0 to 1
#: with a decimal point) by this much, absolute ...
TOLERANCE = 0.05
#: ... and any other number (counts, losses, sizes) by this share of the recorded one (at least 1).
RELATIVE_TOLERANCE = 0.25

# The tutorials: name -> steps. A step is a dict: "id" (the marker's STEP), and "run" (a shell
# command, run in the tutorial's folder; its output recorded; "exit": the exit status it is
# expected to end with, default 0), "python" (a Python script, run by `python -` there, shown
# as Python) or "show" (a command shown but not run: "reply" names the function that computes
# what it would print, with its arguments).
CONLL = "docs/tutorials/data/conll"
CHARS = "docs/tutorials/data/chinese"
TRIPLES = "docs/tutorials/data/triples"
MODELS = "checkpoints"
PEOPLE = "corpora/people_daily"
#: The tutorial's split of People's Daily: it trains on example.dev (2,318 sentences: a short run;
#: example.train is for your full run), chooses its epoch on the first 1,000 sentences of
#: example.test and is scored on the other 3,636.
PEOPLE_SPLIT = (f"zcat {PEOPLE}/example.test.gz | awk -v RS= -v ORS='\\n\\n' 'NR <= 1000' > select.txt\n"
                f"zcat {PEOPLE}/example.test.gz | awk -v RS= -v ORS='\\n\\n' 'NR > 1000' > test.txt\n"
                "grep -c '^$' select.txt test.txt")
#: The pretraining text: the training file's characters, one sentence a line.
PEOPLE_TEXT = (f"awk 'NF {{ printf \"%s\", $1 }} !NF {{ print \"\" }}' {PEOPLE}/example.dev > text.txt\n"
               "wc -l text.txt\nhead -n 2 text.txt")

OFFSETS = f"""import kerasbert

tokenizer = kerasbert.load_tokenizer("{MODELS}/albert_tiny_zh_google")   # vocab.txt is enough
text = "李明在北京大学读书。ＡＩ"
batch = tokenizer([text])
for token_id, (start, end) in zip(batch.token_ids[0], batch.offsets[0]):
    print(f"{{tokenizer.id_to_token(token_id):8}} {{start:2}} {{end:2}}  {{text[start:end]!r}}")
"""

TUTORIALS = {
    "conll-to-serving": [
        {"id": "data", "run": f"head -n 13 {CONLL}/train.conll"},
        {"id": "train", "run": f"kerasbert ner train --checkpoint starter --train {CONLL}/train.conll "
                               f"--dev {CONLL}/dev.conll --output runs/conll --epochs 3"},
        {"id": "files", "run": "ls runs/conll runs/conll/model"},
        {"id": "evaluate", "run": f"kerasbert ner evaluate --model runs/conll --data {CONLL}/test.conll "
                                  "--output runs/conll/test_scores.json"},
        {"id": "predict", "run": "echo 'Maria Sanchez flew from Lisbon to Berlin for Siemens.' "
                                 "| kerasbert ner predict --model runs/conll -"},
        {"id": "export", "run": "kerasbert ner export --model runs/conll --output exports/conll"},
        {"id": "serve", "show": 'docker run --rm -p 8501:8501 -v "$PWD/exports/conll:/models/conll" '
                                "-e MODEL_NAME=conll tensorflow/serving"},
        {"id": "request", "show": "curl -s -X POST localhost:8501/v1/models/conll:predict -d "
                                  "'{\"instances\": [{\"text\": \"Maria Sanchez flew from Lisbon to Berlin for "
                                  "Siemens.\"}]}'",
         "reply": ("tf_serving_reply", "exports/conll/1",
                   [{"text": "Maria Sanchez flew from Lisbon to Berlin for Siemens."}])},
    ],
    "chinese-char-per-line": [
        {"id": "bio", "run": f"head -n 12 {CHARS}/train.bio"},
        {"id": "bmes", "run": f"head -n 12 {CHARS}/train.bmes"},
        {"id": "inspect-google", "run": f"kerasbert inspect {MODELS}/albert_tiny_zh_google", "exit": 1},
        {"id": "inspect-brightmart", "run": f"kerasbert inspect {MODELS}/albert_tiny_zh_brightmart", "exit": 1},
        {"id": "offsets", "python": OFFSETS},
        {"id": "people", "run": f"head -n 8 {PEOPLE}/example.dev"},
        {"id": "split", "run": PEOPLE_SPLIT},
        {"id": "text", "run": PEOPLE_TEXT},
        {"id": "pretrain", "run": "kerasbert pretrain --from-scratch --text text.txt --output runs/zh-encoder "
                                  "--size tiny --max-length 64 --epochs 8"},
        {"id": "inspect-encoder", "run": "kerasbert inspect runs/zh-encoder/encoder"},
        {"id": "train", "run": f"kerasbert ner train --checkpoint runs/zh-encoder/encoder --train {PEOPLE}/example.dev "
                               "--dev select.txt --output runs/people --epochs 8"},
        {"id": "evaluate", "run": "kerasbert ner evaluate --model runs/people --data test.txt "
                                  "--output runs/people/test_scores.json"},
        {"id": "predict", "run": "echo '李明在北京大学读书，明年去上海的华为公司工作。' | kerasbert ner predict --model runs/people -"},
        {"id": "export", "run": "kerasbert ner export --model runs/people --output exports/people"},
    ],
    "triples-from-json": [
        {"id": "casrel", "run": f"head -n 3 {TRIPLES}/train.json"},
        {"id": "duie", "run": f"head -n 2 {TRIPLES}/duie.jsonl"},
        {"id": "train", "run": f"kerasbert triples train --checkpoint starter --train {TRIPLES}/train.json "
                               f"--dev {TRIPLES}/dev.json --output runs/triples --epochs 8"},
        {"id": "tune", "run": f"kerasbert triples tune --model runs/triples --data {TRIPLES}/dev.json"},
        {"id": "evaluate", "run": f"kerasbert triples evaluate --model runs/triples --data {TRIPLES}/test.json "
                                  "--output runs/triples/test_scores.json"},
        {"id": "predict", "run": "echo 'Anna Weber, the founder of Lumen Labs, was born in Vienna.' "
                                 "| kerasbert triples predict --model runs/triples -"},
        {"id": "duie-train", "run": f"kerasbert triples train --checkpoint {MODELS}/keras_bert_test_checkpoint "
                                    f"--train {TRIPLES}/duie.jsonl --dev {TRIPLES}/duie.jsonl "
                                    "--output runs/duie --epochs 1 --max-length 16"},
    ],
}


# --- the data ---------------------------------------------------------------------------------


def _words(text):
    """``[(start, end)]`` of the words of ``text``: runs of letters and digits, and each other
    non-space character alone (CoNLL-2003's tokenization, roughly)."""
    return [m.span() for m in re.finditer(r"[\w'-]+|[^\w\s]", text)]


def conll_lines(example):
    """One ``word TAG`` line per word (IOB2 tags), then a blank line."""
    lines = []
    for start, end in _words(example["text"]):
        tag = "O"
        for entity in example["entities"]:
            if entity["start"] <= start and end <= entity["end"]:
                tag = ("B-" if start == entity["start"] else "I-") + entity["type"]
        lines.append(f"{example['text'][start:end]} {tag}")
    return lines + [""]


#: The Chinese tutorial's sentences: (text, [(start, end, type)]); written for kerasbert.
CHINESE = [
    ("李明在北京大学读书。", [(0, 2, "PER"), (3, 7, "ORG")]),
    ("王芳去年搬到了上海。", [(0, 2, "PER"), (7, 9, "LOC")]),
    ("华为公司总部位于深圳。", [(0, 4, "ORG"), (8, 10, "LOC")]),
    ("张伟和刘洋在杭州见面。", [(0, 2, "PER"), (3, 5, "PER"), (6, 8, "LOC")]),
    ("清华大学的学生参观了故宫。", [(0, 4, "ORG"), (10, 12, "LOC")]),
    ("陈静在阿里巴巴工作了三年。", [(0, 2, "PER"), (3, 7, "ORG")]),
    ("明天我们从广州出发去成都。", [(5, 7, "LOC"), (10, 12, "LOC")]),
    ("赵磊加入了中国银行。", [(0, 2, "PER"), (5, 9, "ORG")]),
]


def char_lines(text, entities, scheme):
    """One ``character TAG`` line per character (BIO or BMES; a space-free Chinese sentence),
    then a blank line."""
    tags = ["O"] * len(text)
    for start, end, kind in entities:
        for i in range(start, end):
            if scheme == "BIO":
                tags[i] = ("B-" if i == start else "I-") + kind
            elif end - start == 1:
                tags[i] = "S-" + kind
            else:
                tags[i] = ("B-" if i == start else "E-" if i == end - 1 else "M-") + kind
    return [f"{char} {tag}" for char, tag in zip(text, tags)] + [""]


def write_data(root=DATA):
    """Write the tutorials' data files under ``root`` from the shipped samples (and
    :data:`CHINESE`); returns ``{relative path: text}`` of what it wrote."""
    sys.path.insert(0, str(ROOT))
    from kerasbert_apps import samples

    files = {}
    for split in ("train", "dev", "test"):
        lines = []
        for line in samples.path("ner", split).read_text(encoding="utf-8").splitlines():
            if line.strip():
                lines += conll_lines(json.loads(line))
        files[f"conll/{split}.conll"] = "\n".join(lines)
    for scheme, suffix in (("BIO", "bio"), ("BMES", "bmes")):
        train = [line for text, ents in CHINESE[:6] for line in char_lines(text, ents, scheme)]
        dev = [line for text, ents in CHINESE[6:] for line in char_lines(text, ents, scheme)]
        files[f"chinese/train.{suffix}"] = "\n".join(train)
        files[f"chinese/dev.{suffix}"] = "\n".join(dev)
    # plain text, one sentence per line (the sample's test sentences): a pool to select from,
    # texts to predict, text to pre-train on
    files["text/sentences.txt"] = "".join(json.loads(line)["text"] + "\n" for line in
                                          samples.path("ner", "test").read_text(encoding="utf-8").splitlines()
                                          if line.strip())
    files["triples/train.json"] = samples.path("triples", "train").read_text(encoding="utf-8")
    # the sample's dev split, halved: dev (model selection, thresholds) and test (the scores)
    held_out = json.loads(samples.path("triples", "dev").read_text(encoding="utf-8"))
    half = len(held_out) // 2
    for split, examples in (("dev", held_out[:half]), ("test", held_out[half:])):
        files[f"triples/{split}.json"] = "[\n" + ",\n".join(json.dumps(e, ensure_ascii=False) for e in examples) + "\n]\n"
    files["triples/duie.jsonl"] = "\n".join(json.dumps(record, ensure_ascii=False) for record in DUIE) + "\n"
    for name, text in files.items():
        path = Path(root) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return files


#: A few DuIE-style records (``spo_list``), written for kerasbert: the DuIE layout the triples
#: reader takes, for the tutorial's last step.
DUIE = [
    {"text": "《红楼梦》的作者是曹雪芹。", "spo_list": [
        {"subject": "红楼梦", "subject_type": "图书作品", "predicate": "作者", "object": "曹雪芹", "object_type": "人物"}]},
    {"text": "周杰伦出生于台湾。", "spo_list": [
        {"subject": "周杰伦", "subject_type": "人物", "predicate": "出生地", "object": "台湾", "object_type": "地点"}]},
    {"text": "李娜的妻子是王丽。", "spo_list": [
        {"subject": "李娜", "subject_type": "人物", "predicate": "妻子", "object": "王丽", "object_type": "人物"}]},
]


def shared_dir():
    """The project's copies of the checkpoints the pages name under ``checkpoints/``:
    ``$KERASBERT_SHARED``, else ``../shared`` beside the repository (the tests' rule)."""
    return Path(os.environ.get("KERASBERT_SHARED") or ROOT.parent / "shared").absolute()


def linked_folders():
    """``[(the folder a page names, the project's copy)]``: :data:`CHECKPOINTS` under
    ``checkpoints/``, :data:`CORPORA` under ``corpora/``."""
    data = shared_dir() / "data"
    return ([(f"{MODELS}/{name}", data / "models" / copy) for name, copy in CHECKPOINTS.items()]
            + [(f"corpora/{name}", data / copy) for name, copy in CORPORA.items()])


def link_checkpoints(workdir):
    """``workdir/checkpoints/NAME`` and ``workdir/corpora/NAME``: each checkpoint of
    :data:`CHECKPOINTS` and corpus of :data:`CORPORA`, linked to the project's copy (a missing
    copy fails with its path)."""
    for shown, source in linked_folders():
        if not source.is_dir():
            raise SystemExit(f"{source}: missing (the copy of {shown} the tutorials run on)")
        (Path(workdir) / shown).parent.mkdir(exist_ok=True)
        (Path(workdir) / shown).symlink_to(source, target_is_directory=True)


def ran():
    """When and on what the tutorials ran, with the versions that make their outputs."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "platform": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores", "versions": versions}


# --- running -----------------------------------------------------------------------------------

#: TensorFlow's C++ start-up lines (written to stderr before its log level is read): not the
#: command's output.
_NOISE = re.compile(r"^(?:WARNING: All log messages before absl::InitializeLog\(\)|[IWE]\d{4} [\d:.]+ +\d+ \S+\.cc:\d+\])")
#: Run-time figures, masked in what the pages show: durations and timestamps.
_RUN_TIME = [
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|us|µs)(/step|/sample)?\b"), lambda m: "…s" if not m.group(1) else "…"),
    (re.compile(r"\b\d+:\d\d(?::\d\d)?\b"), "…"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?\b"), "…"),
    (re.compile(r"(tokens_per_s: )\d[\d.e+-]*"), r"\1…"),
]


def mask(text, workdir):
    """``text`` as a page shows it: the run's folder as ``$PWD``, run-time figures as ``…``,
    Keras's progress bars reduced to their last state."""
    text = text.replace(str(workdir), WORKDIR_SHOWN)
    text = text.replace(os.path.expanduser("~") + "/", "~/")  # the reader's home, not ours
    for shown, source in linked_folders():  # a linked checkpoint or corpus by the name the page gives it
        for folder in {str(source), os.path.realpath(source)}:
            text = text.replace(folder, f"{WORKDIR_SHOWN}/{shown}")
    lines = []
    for line in text.replace("\r\n", "\n").split("\n"):
        line = line.split("\r")[-1].rstrip()  # a progress bar redrawn in place: its last state
        line = re.sub("\x1b\\[[0-9;]*m", "", line)
        if _NOISE.match(line):
            continue
        for pattern, replacement in _RUN_TIME:
            line = pattern.sub(replacement, line)
        lines.append(line)
    return "\n".join(lines).strip("\n")


NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")


#: A row of a score-bin table (``[0.8, 0.9)  45  0.8407  0.9333``): a table shows only the bins
#: that hold a score, so which rows it has follows the scores, not the code.
SCORE_BIN = re.compile(r"^\[\d\.\d, \d(?:\.\d)?[)\]]\s")


def shape(text):
    """``text`` with every number masked and score-bin rows left out: what must stay the same for
    an output to be current."""
    return NUMBER.sub("#", unbinned(text))


#: An epoch's line of a training run: whether it is the best so far (``(best, saved to ...)``) or not
#: (``(best 0.28 at epoch 4)``) follows the scores when two epochs score within a hair of each other.
EPOCH_VERDICT = re.compile(r"^(epoch \d+: dev f1 \S+) \(best.*\)$")


def unbinned(text):
    """``text`` without its score-bin rows (:data:`SCORE_BIN`) and its epochs' best-so-far verdicts
    (:data:`EPOCH_VERDICT`): the parts of an output whose text follows the scores."""
    return "\n".join(EPOCH_VERDICT.sub(r"\1", line) for line in text.split("\n") if not SCORE_BIN.match(line))


def numbers(text):
    """The numbers of ``text``, in order, as written."""
    return NUMBER.findall(text)


def close(recorded, now):
    """Whether the number ``now`` is within the tolerance of the ``recorded`` one (both as written):
    :data:`TOLERANCE` for a score written as a fraction, :data:`RELATIVE_TOLERANCE` otherwise."""
    if recorded == now:
        return True
    try:
        a, b = float(recorded.replace(",", "")), float(now.replace(",", ""))
    except ValueError:
        return False
    if "." in recorded and 0 <= a <= 1:
        return abs(a - b) <= TOLERANCE + 1e-9
    return abs(a - b) <= max(RELATIVE_TOLERANCE * abs(a), 1)


def differences(recorded, steps):
    """What makes ``recorded`` (a record's steps) stale against ``steps`` (a run's): a step added,
    removed or changed, an output whose text (numbers aside) differs, or a number out of
    tolerance (:func:`close`); ``[]`` when the record is current."""
    found = []
    if [s["id"] for s in recorded] != [s["id"] for s in steps]:
        found.append(f"steps recorded {[s['id'] for s in recorded]}, now {[s['id'] for s in steps]}")
    for old, new in zip(recorded, steps):
        where = f"{old['id']}"
        if old["command"] != new["command"]:
            found.append(f"{where}: command recorded {old['command']!r}, now {new['command']!r}")
        elif shape(old["output"]) != shape(new["output"]):
            found.append(f"{where}: output\n--- recorded\n{old['output']}\n--- now\n{new['output']}")
        else:
            moved = [f"{a} -> {b}" for a, b in zip(numbers(unbinned(old["output"])), numbers(unbinned(new["output"])))
                     if not close(a, b)]
            if moved:
                found.append(f"{where}: numbers out of tolerance ({TOLERANCE} for a score, "
                             f"{RELATIVE_TOLERANCE:.0%} otherwise): {', '.join(moved)}")
    return found


def tf_serving_reply(workdir, export, instances):
    """The body TF Serving's REST API returns for ``{"instances": instances}`` on the
    SavedModel ``export``'s ``serving_default`` signature: row format, so
    ``{"predictions": [row, ...]}`` with one dict per instance (one entry per output, the
    instance's slice of it), bytes as UTF-8 strings."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the TF-Text ops the graph tokenizer uses; TF Serving links them)

    model = tf.saved_model.load(str(Path(workdir) / export))
    function = model.signatures["serving_default"]
    inputs = {key: tf.constant([row[key] for row in instances]) for key in instances[0]}
    outputs = {key: value.numpy() for key, value in function(**inputs).items()}

    def plain(value):
        if isinstance(value, np.ndarray):
            return [plain(v) for v in value]
        if isinstance(value, bytes):
            return value.decode("utf-8")
        if isinstance(value, np.floating):
            return float(str(value))  # float32 written with the digits it has, not float64's
        return value.item() if hasattr(value, "item") else value

    rows = [{key: plain(value[i]) for key, value in sorted(outputs.items())} for i in range(len(instances))]
    return reply_text({"predictions": rows})


def reply_text(reply):
    """A REST reply as JSON, one output per line (TF Serving indents every list item; the
    values are the same)."""
    rows = []
    for row in reply["predictions"]:
        items = [f'            "{key}": {json.dumps(value, ensure_ascii=False)}' for key, value in row.items()]
        rows.append("        {\n" + ",\n".join(items) + "\n        }")
    return '{\n    "predictions": [\n' + ",\n".join(rows) + "\n    ]\n}"


REPLIES = {"tf_serving_reply": tf_serving_reply}


def run_tutorial(name, echo=True):
    """Run tutorial ``name`` in a fresh folder; returns its steps with their outputs."""
    steps = []
    with tempfile.TemporaryDirectory(prefix="kerasbert-tutorial-") as tmp:
        workdir = Path(tmp)
        shutil.copytree(DATA, workdir / "docs" / "tutorials" / "data")
        if any(f"{MODELS}/" in (step.get("run") or step.get("python") or "")
               or "corpora/" in (step.get("run") or "") for step in TUTORIALS[name]):
            link_checkpoints(workdir)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="100", PYTHONUNBUFFERED="1",
                   PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
        env.pop("KERASBERT_SHARED", None)
        # Training's --precision auto chooses float32 on every machine here, as in the suite that
        # re-checks these records (tests/conftest.py): the records do not depend on bfloat16 units.
        env.setdefault("KERASBERT_CPU_FLAGS", "avx2")
        env.pop("KERASBERT_SERVING_CACHE", None)  # the commands as a user runs them, the serving cache on
        for step in TUTORIALS[name]:
            began = time.perf_counter()
            if "run" in step or "python" in step:
                command = step["run"] if "run" in step else "python - <<'EOF'\n" + step["python"] + "EOF"
                done = subprocess.run(["bash", "-c", command], cwd=workdir, env=env, capture_output=True,
                                      text=True, timeout=900)
                output = mask(done.stdout + done.stderr, workdir)
                if done.returncode != step.get("exit", 0):
                    raise SystemExit(f"{name}: step {step['id']} exited {done.returncode}, not "
                                     f"{step.get('exit', 0)}:\n{output}")
                shown = step.get("run") or step["python"]
            else:
                shown = step["show"]
                output = ""
                if "reply" in step:
                    function, *arguments = step["reply"]
                    output = REPLIES[function](workdir, *arguments)
            steps.append({"id": step["id"], "command": shown, "output": output,
                          "kind": "python" if "python" in step else "run" if "run" in step else "show"})
            if echo:
                print(f"{name}/{step['id']}: {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
    return steps


def record_path(name):
    return PAGES / f"{name}.json"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"tutorials (default: all: {', '.join(TUTORIALS)})")
    parser.add_argument("--check", action="store_true", help="exit 1 if a recorded output is stale; write nothing")
    args = parser.parse_args(argv)
    names = args.names or list(TUTORIALS)
    stale = []
    if not args.check:
        write_data()
    for name in names:
        steps = run_tutorial(name)
        if args.check:
            recorded = json.loads(record_path(name).read_text(encoding="utf-8"))["steps"]
            stale += [f"{name}/{line}" for line in differences(recorded, steps)]
        else:
            record = {"tutorial": name, "ran": ran(), "steps": steps}
            record_path(name).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            print(f"written: {record_path(name).relative_to(ROOT)}")
    if stale:
        print("stale tutorial outputs (python docs/gen_tutorials.py rewrites them):\n" + "\n".join(stale),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
