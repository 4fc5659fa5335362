"""bench/offline_gpu_host/active_learning.py on the CPU: the parts a GPU run relies on, checked without a GPU.

* the entities' segment arguments: the decoder's entity score
  (``crf_segment_log_probability`` at the positions :func:`entity_segments`
  gives) equals the probability, summed over every allowed labelling of a
  small lattice, that the labelling holds exactly that entity;
* the learning-rate schedule with its step counts as optimizer variables has
  the values of the library's ``WarmupLinearDecay``;
* ``ner select``'s choice (the best ``budget x 4``, then the diversity step),
  the seeded and nested random sets, random sampling's job order (the
  comparison at 900 sentences first), the mean table and the comparison
  the curves are for (``target``);
* bad input is a one-line error.
"""

import importlib
import itertools
import json
import os
import subprocess
import sys

import numpy as np

from conftest import REPO_ROOT

TOOL = "bench.offline_gpu_host.active_learning"
NAMES = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


def bench():
    return importlib.import_module(TOOL)


def test_entity_scores_are_the_exact_entity_probabilities():
    from keras import ops

    from kerasbert.layers.crf import allowed_transitions
    from kerasbert.layers.crf import crf_segment_log_probability

    al = bench()
    allowed, allowed_start = allowed_transitions(NAMES, "BIO")
    rng = np.random.default_rng(3)
    length, n_tags = 6, len(NAMES)
    potentials = rng.normal(size=(2, length, n_tags)).astype(np.float32) * 2
    potentials[:, [0, -1], 0] += 4  # [CLS] and [SEP]: O, as a trained model has them
    transitions = rng.normal(size=(n_tags, n_tags)).astype(np.float32)
    lengths = np.array([length, length - 1], np.int32)
    checked = 0
    for row in range(2):
        n = int(lengths[row])
        labellings = np.array([p for p in itertools.product(range(n_tags), repeat=n)
                               if allowed_start[p[0]] and all(allowed[a, b] for a, b in zip(p, p[1:]))])
        score = potentials[row, np.arange(n), labellings].sum(1) + transitions[labellings[:, :-1], labellings[:, 1:]].sum(1)
        probability = np.exp(score - np.logaddexp.reduce(score))
        chunks = [{(s, e - 1, kind) for s, e, kind in al.gpu.bio_entities(lab, NAMES)} for lab in labellings]
        for labelling in labellings[np.argsort(-score)[:12]]:  # the Viterbi path and the next likeliest
            for _, start, end, begin, inside in al.entity_segments(labelling[None], np.array([n]), NAMES):
                entity = (start, end, NAMES[begin][2:])
                exact = float(sum(p for p, found in zip(probability, chunks) if entity in found))
                got = crf_segment_log_probability(
                    potentials[row : row + 1, :n], np.array([n], np.int32), transitions, [0], [start], [end], [begin],
                    [inside], allowed=allowed.tolist(), allowed_start=allowed_start.tolist())
                assert abs(float(np.exp(ops.convert_to_numpy(got)[0])) - exact) < 1e-4, (labelling, entity)
                checked += 1
    assert checked > 8
    found = al.entity_segments(np.array([[0, 1, 2, 0, 3, 0], [0, 3, 4, 4, 0, 0]]), np.array([6, 5]), NAMES)
    assert found == [(0, 1, 2, 1, 2), (0, 4, 4, 3, 4), (1, 1, 3, 3, 4)]


def test_schedule_with_variable_steps_has_the_library_values():
    code = (
        "import numpy as np, keras; from bench.offline_gpu_host import active_learning as al\n"
        "from kerasbert.training.optimizer import make_optimizer\n"
        "opt = make_optimizer(157, 5e-5, 1e-3, 'head_'); opt.build([keras.Variable(np.zeros(3, np.float32))])\n"
        "old = opt._learning_rate; new = al.schedule_steps_as_variables(opt)\n"
        "a = [float(old(s)) for s in range(170)]; b = [float(new(s)) for s in range(170)]\n"
        "assert max(abs(x - y) for x, y in zip(a, b)) < 1e-12 and max(a) > 0, (a, b)\n"
        "new.total.assign(300.0); new.warmup.assign(30.0)\n"
        "from kerasbert.training.optimizer import WarmupLinearDecay\n"
        "ref = WarmupLinearDecay(5e-5, 300, 30)\n"
        "assert max(abs(float(ref(s)) - float(new(s))) for s in range(0, 320, 7)) < 1e-12\n"
        "assert [v.name for v in opt.variables][-2:] == ['schedule_total_steps', 'schedule_warmup_steps']\n"
        "print('OK')\n")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                         cwd=REPO_ROOT)
    assert run.returncode == 0 and run.stdout.strip().endswith("OK"), run.stdout[-2000:] + run.stderr[-3000:]


def test_choice_sets_and_jobs():
    al = bench()
    keys = np.array([0.1, 0.9, 0.8, 0.7, 0.85, 0.2])
    vectors = np.array([[1, 0], [1, 0], [1, 0.01], [0, 1], [0.99, 0.02], [0, 1]], float)
    # best first: 1 (0.9), 4 (0.85; cosine with 1 > 0.95: skipped), 2 (0.8; skipped), 3 (0.7)
    assert al.choose(keys, vectors, 2, seed=0) == [1, 3]
    assert al.choose(keys, vectors, 2, seed=0, diversity=1.0) == [1, 4]
    # only budget x pool factor candidates: 1, 4, 2, 3 with budget 1 x 4: the 4th kept, 5 not
    assert al.choose(keys, vectors, 3, seed=0, pool_factor=1) == [1]
    ties = al.choose(np.zeros(6), np.eye(6), 3, seed=5)
    assert ties == al.choose(np.zeros(6), np.eye(6), 3, seed=5) and len(set(ties)) == 3
    assert al.start_set(1, 1000, 100) == al.start_set(1, 1000, 100) != al.start_set(2, 1000, 100)
    assert len(set(al.start_set(0, 1000, 100))) == 100
    order = al.random_order(0, range(50, 90))
    assert sorted(order) == list(range(50, 90)) and order == al.random_order(0, range(50, 90))

    class Args:
        seeds, strategies, start, step, max_selected, max_random = "0,1", "least-confident,random", 100, 100, 600, 900

    jobs = al.jobs(Args)
    assert [(j["strategy"], j["seed"]) for j in jobs] == [("least-confident", 0), ("random", 0),
                                                          ("least-confident", 1), ("random", 1)]
    assert jobs[1]["sizes"][:2] == [900, 600] and sorted(jobs[1]["sizes"]) == list(range(100, 1000, 100))
    assert jobs[0]["max"] == 600 and "sizes" not in jobs[0]


def test_means_and_target():
    al = bench()
    rows = [{"strategy": s, "seed": seed, "labelled": n, "dev_f1": f1, "complete": True}
            for s, n, f1s in (("least-confident", 600, (0.80, 0.82, 0.84)), ("entropy", 600, (0.79, 0.79, 0.79)),
                              ("random", 900, (0.81, 0.81, 0.84)))
            for seed, f1 in enumerate(f1s)]
    rows.append({"strategy": "random", "seed": 3, "labelled": 900, "dev_f1": 0.1, "complete": False})
    means = al.mean_rows(rows)
    at = {(m["strategy"], m["labelled"]): m for m in means}
    assert at[("random", 900)]["seeds"] == 3 and at[("random", 900)]["min_f1"] == 0.81  # the cut row left out
    check = al.target(means)
    assert check["strategy"] == "least-confident" and check["holds"] and check["difference"] == 0.0
    assert al.target([m for m in means if m["strategy"] != "random"]) is None


def test_bad_input_is_one_line(tmp_path):
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run([sys.executable, "-m", TOOL, "run", "--bundle", str(tmp_path), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, env=env, timeout=120, cwd=REPO_ROOT)
    assert run.returncode == 2 and run.stderr.strip().splitlines()[-1].startswith(f"error: {tmp_path}: no al.npz")
    run = subprocess.run([sys.executable, "-m", TOOL, "collect", "--run", str(tmp_path)], capture_output=True,
                         text=True, env=env, timeout=120, cwd=REPO_ROOT)
    assert run.returncode == 2 and run.stderr.strip().splitlines()[-1] == f"error: {tmp_path}: no rows.jsonl (what `run --out` writes)"
    (tmp_path / "rows.jsonl").write_text(json.dumps({"kind": "setup"}) + "\n")
    run = subprocess.run([sys.executable, "-m", TOOL, "collect", "--run", str(tmp_path), "--dry-run"],
                         capture_output=True, text=True, env=env, timeout=120, cwd=REPO_ROOT)
    assert run.returncode == 2 and run.stderr.strip().splitlines()[-1].endswith("rows.jsonl: no training rows")
