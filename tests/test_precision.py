"""``--precision auto``: the choice from the CPU's flags (and the GPU), the line an explicit
choice gets where it is slower, and the resolved precision a training run writes and trains in."""

import json

import keras
import pytest

from conftest import require_shared
from conftest import seen_precision
from kerasbert.training.precision import FLAGS_VARIABLE
from kerasbert.training.precision import choose_serving_precision
from kerasbert.training.precision import choose_training_precision
from kerasbert.training.precision import cpu_flags

#: Flags of each CPU class, as /proc/cpuinfo lists them (abridged).
AVX2_ONLY = {"sse4_2", "avx", "avx2", "fma"}
AVX512 = AVX2_ONLY | {"avx512f", "avx512bw", "avx512_vnni"}
AVX512_BF16 = AVX512 | {"avx512_bf16"}
AMX = AVX512_BF16 | {"amx_tile", "amx_bf16", "amx_int8"}


@pytest.mark.parametrize("flags, training, serving", [
    (AVX2_ONLY, "float32", "float32"),
    (AVX512, "float32", "float32"),
    (AVX512_BF16, "float32", "bfloat16"),  # a bfloat16 training step is slower there; a served model is faster
    (AMX, "mixed_bfloat16", "bfloat16"),
    (set(), "float32", "float32"),  # flags unknown (not Linux): the safe choice
])
def test_auto_chooses_bfloat16_only_where_the_cpu_runs_it_faster(flags, training, serving):
    chosen, line = choose_training_precision("auto", flags=flags, gpu=None)
    assert chosen == training
    # bfloat16 is said in one line; float32 (what every earlier release trained in) goes without a word
    assert line == (f"--precision auto: {training} (this CPU has amx_bf16)" if training != "float32" else None)
    chosen, line = choose_serving_precision("auto", flags=flags)
    assert chosen == serving and (line is None) == (serving == "float32")


@pytest.mark.parametrize("gpu, chosen", [(("NVIDIA H100", 9), "mixed_bfloat16"), (("NVIDIA A100", 8), "mixed_bfloat16"),
                                         (("Tesla T4", 7), "float32"), (("some GPU", None), "mixed_bfloat16")])
def test_auto_on_a_gpu_follows_its_compute_capability_not_the_cpu(gpu, chosen):
    assert choose_training_precision("auto", flags=AVX2_ONLY, gpu=gpu)[0] == chosen


def test_auto_keeps_float32_for_an_xla_compiled_step_on_a_cpu():
    """JAX on a CPU, or --jit-compile: XLA's CPU backend does not reach the bfloat16 units."""
    assert choose_training_precision("auto", flags=AMX, gpu=None, xla=True) == ("float32", None)
    assert choose_training_precision("auto", flags=AVX2_ONLY, gpu=("NVIDIA H100", 9), xla=True)[0] == "mixed_bfloat16"
    precision, line = choose_training_precision("mixed_bfloat16", flags=AMX, gpu=None, xla=True)
    assert precision == "mixed_bfloat16" and "XLA" in line


def test_an_explicit_choice_is_kept_with_one_line_where_it_is_slower():
    precision, line = choose_training_precision("mixed_bfloat16", flags=AVX2_ONLY, gpu=None)
    assert precision == "mixed_bfloat16" and "slower than in float32" in line and "\n" not in line
    assert choose_training_precision("mixed_bfloat16", flags=AMX, gpu=None) == ("mixed_bfloat16", None)
    assert choose_training_precision("float32", flags=AMX, gpu=None) == ("float32", None)
    assert "no amx_bf16" in choose_training_precision("mixed_bfloat16", flags=AVX512_BF16, gpu=None)[1]
    assert "float16 units" in choose_training_precision("mixed_float16", flags=AMX, gpu=None)[1]
    assert choose_training_precision("mixed_float16", flags=AVX2_ONLY, gpu=("NVIDIA A100", 8)) == ("mixed_float16", None)
    assert "below 8" in choose_training_precision("mixed_bfloat16", flags=AMX, gpu=("Tesla T4", 7))[1]
    precision, line = choose_serving_precision("bfloat16", flags=AVX2_ONLY)
    assert precision == "bfloat16" and "slower than in float32" in line
    assert choose_serving_precision("bfloat16", flags=AVX512_BF16) == ("bfloat16", None)


def test_the_flags_come_from_cpuinfo_unless_the_environment_names_them(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\nbugs\t\t: spectre\n")
    monkeypatch.delenv(FLAGS_VARIABLE, raising=False)
    assert cpu_flags(cpuinfo) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags(tmp_path / "absent") == set()
    monkeypatch.setenv(FLAGS_VARIABLE, "avx2 amx_bf16")
    assert cpu_flags(cpuinfo) == {"avx2", "amx_bf16"}


@pytest.fixture(scope="module")
def conll(tmp_path_factory):
    from conftest import conll_slice

    tmp = tmp_path_factory.mktemp("precision_data")
    return conll_slice(tmp, "train.conll", 0, 40), conll_slice(tmp, "dev.conll", 40, 16)


@pytest.mark.parametrize("flags, policy", [("avx2", "float32"), ("avx2 avx512_bf16 amx_bf16", "mixed_bfloat16")])
def test_a_run_on_auto_trains_in_writes_and_predicts_in_the_chosen_precision(tmp_path, conll, monkeypatch, capsys,
                                                                             flags, policy):
    from kerasbert.cli import main
    from kerasbert_apps.ner.train import NerTrainSettings
    from kerasbert_apps.ner.train import train

    monkeypatch.setenv(FLAGS_VARIABLE, flags)
    toy = require_shared("data", "models", "keras_bert_test_checkpoint")
    settings = NerTrainSettings(checkpoint=str(toy), train=str(conll[0]), dev=str(conll[1]), output=str(tmp_path / "run"),
                                epochs=1, batch_size=8, max_length=16, lstm_units=8, seed=7, calibrate=False)
    assert settings.precision == "auto"  # the default
    seen = seen_precision()
    try:
        train(settings, callbacks=[seen])
        # the run's policy is put back when it ends: what the process loads next is float32
        assert keras.mixed_precision.global_policy().name == "float32"
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert ("--precision auto: mixed_bfloat16 (this CPU has amx_bf16)" in capsys.readouterr().out) == (
        policy == "mixed_bfloat16")
    assert json.loads((tmp_path / "run" / "settings.json").read_text())["precision"] == policy
    assert ("bfloat16" in seen.compute_dtypes) == (policy == "mixed_bfloat16"), vars(seen)

    texts = tmp_path / "texts.txt"
    texts.write_text("EU rejects German call .\n", encoding="utf-8")
    status = main(["ner", "predict", "--model", str(tmp_path / "run" / "model"), "--precision", "auto",
                   "--no-cache", str(texts)])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert ("--precision auto: bfloat16 (this CPU has amx_bf16)" in err) == (policy == "mixed_bfloat16")
    assert "--precision" not in out
    assert json.loads(out.splitlines()[0])["text"] == "EU rejects German call ."
