"""A LoRA model folder whose encoder checkpoint is gone: one line naming the folder and the
checkpoint that is missing, and nothing else (it used to list the files of the checkpoint's
parent folder, which have nothing to do with it, as "files here")."""

import shutil

import pytest

from conftest import require_shared
from kerasbert.cli import main


def test_a_lora_folder_whose_checkpoint_was_deleted_names_what_is_missing(tmp_path, capsys):
    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert.checkpoints.loader import load_tokenizer
    from kerasbert.errors import KerasbertError
    from kerasbert.layers.lora import enable_lora
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger

    toy = require_shared("data", "models", "keras_bert_test_checkpoint")
    checkpoint = tmp_path / "checkpoints" / "encoder"
    shutil.copytree(toy, checkpoint)
    (tmp_path / "checkpoints" / "notes.txt").write_text("unrelated\n", encoding="utf-8")  # the parent's own files
    tags = ["O", "B-PER", "I-PER"]
    model = NerModel(load_encoder(checkpoint), len(tags), lstm_units=4)
    enable_lora(model.encoder, 2)
    tagger = Tagger(model, load_tokenizer(checkpoint), tags, max_length=16)
    tagger.lora = {"rank": 2, "checkpoint": str(checkpoint.resolve())}
    tagger.save(tmp_path / "model")
    assert Tagger.load(tmp_path / "model").lora["rank"] == 2  # loads while its checkpoint is there

    shutil.rmtree(checkpoint)
    expected = (f"{tmp_path / 'model'}: cannot load the encoder checkpoint {str(checkpoint.resolve())!r} that the "
                "LoRA adapters go on: no such folder")
    with pytest.raises(KerasbertError) as error:
        Tagger.load(tmp_path / "model")
    assert str(error.value) == expected
    (tmp_path / "texts.txt").write_text("Peter lives in Paris.\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["ner", "predict", "--no-cache", "--model", str(tmp_path / "model"), str(tmp_path / "texts.txt")]) == 2
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("kerasbert:")] == [f"kerasbert: error: {expected}"]
    assert "notes.txt" not in err and "files here" not in err
