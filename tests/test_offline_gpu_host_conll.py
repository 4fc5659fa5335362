"""bench/offline_gpu_host/conll.py on the CPU: what a run on a GPU host without TensorFlow relies on.

* the weights' transport (``pack_weights`` / ``unpack_weights``: XOR with the
  starting values, byte planes, zlib, parts) gives back the same bits;
* the dev score's BIO chunking and the official -> Hugging Face names of
  ``prepare`` (the inverse of the loader's own mapping);
* bad input is a one-line error.
"""

import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from conftest import REPO_ROOT


def bench():
    return importlib.import_module("bench.offline_gpu_host.conll")


def test_weights_round_trip_bit_exact(tmp_path):
    gpu = bench()
    rng = np.random.default_rng(0)
    start = {name: rng.normal(size=(300, 64)).astype(np.float32) for name in ("encoder/a", "encoder/b")}
    trained = {name: value + rng.normal(scale=1e-3, size=value.shape).astype(np.float32)
               for name, value in start.items()}
    head = rng.normal(size=(64, 9)).astype(np.float32)
    counter = np.array([7, 3], np.int64)
    named = [*trained.items(), ("head/kernel", head), ("seed/state", counter)]
    # parts of 50 kB: each table (77 kB, about 46 kB packed) takes one
    size = gpu.pack_weights(named, start, tmp_path, part_bytes=2**16 + 50000, max_parts=8)
    assert len(list(tmp_path.glob("weights-*.npz"))) >= 2
    entries = {e["path"]: e for e in json.loads((tmp_path / "weights.json").read_text())}
    assert entries["encoder/a"]["xor"] and not entries["head/kernel"]["xor"]
    back = dict(gpu.unpack_weights(tmp_path, start))
    for path, value in named:
        assert back[path].dtype == value.dtype and back[path].shape == value.shape
        assert np.array_equal(back[path].view(np.uint8), value.view(np.uint8)), path
    # the XOR with close starting values cancels the high bits: smaller than the raw float32
    assert size < 0.8 * sum(v.nbytes for _, v in named)


def test_too_many_parts_refused(tmp_path):
    gpu = bench()
    rng = np.random.default_rng(1)
    noise = [(f"w{i}", rng.integers(0, 2**32, size=60000, dtype=np.uint32).view(np.float32)) for i in range(3)]
    try:  # three incompressible 240 kB weights: three parts of 300 kB
        gpu.pack_weights(noise, {}, tmp_path, part_bytes=2**16 + 300000, max_parts=2)
    except ValueError as error:
        assert "need 3 parts" in str(error) and "at most 2 come back" in str(error)
    else:
        raise AssertionError("720 kB of noise fitted two parts of 300 kB")


def test_bio_chunking_and_f1():
    gpu = bench()
    names = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert gpu.bio_entities([0, 1, 2, 0, 3, 4, 4], names) == {(1, 3, "LOC"), (4, 7, "PER")}
    assert gpu.bio_entities([0, 2, 2, 4, 1, 1], names) == {(1, 3, "LOC"), (3, 4, "PER"), (4, 5, "LOC"), (5, 6, "LOC")}
    scores = gpu.row_entity_f1([[0, 1, 2, 0], [3, 0, 0]], [[0, 1, 2, 0], [0, 3, 4]], names)
    assert scores["entities"] == 2 and scores["precision"] == 0.5 and scores["recall"] == 0.5


def test_hugging_face_names_invert_the_loader_mapping():
    from kerasbert.checkpoints.checkpoint import official_name_from_hf

    gpu = bench()
    for name in ("bert/embeddings/word_embeddings", "bert/embeddings/LayerNorm/gamma",
                 "bert/encoder/layer_11/attention/self/query/kernel", "bert/encoder/layer_0/output/LayerNorm/beta",
                 "bert/encoder/layer_3/intermediate/dense/bias", "bert/pooler/dense/kernel"):
        key, transpose = gpu.hf_name(name)
        assert official_name_from_hf(key, "bert")[:2] == (name, transpose), (name, key)


def test_bad_input_is_one_line():
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    out = str(Path(tempfile.gettempdir()) / "x")
    run = subprocess.run([sys.executable, "-m", "bench.offline_gpu_host.conll", "train", "--bundle", "/nonexistent/bundle",
                          "--out", out], capture_output=True, text=True, env=env, timeout=120, cwd=REPO_ROOT)
    assert run.returncode == 2 and run.stderr.strip().splitlines()[-1].startswith("error: /nonexistent/bundle: not a bundle")
