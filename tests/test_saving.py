"""kerasbert.checkpoints.saving: a pipeline folder written from a training model, saved again after each better epoch."""

import numpy as np

from conftest import require_shared


def test_saving_again_builds_no_second_model_and_writes_the_new_weights(tmp_path, monkeypatch):
    """The uncompiled model a save fills is built once per model (a training run saves after every
    better epoch); each save still writes the weights the model has then."""
    from kerasbert.checkpoints import saving
    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert.checkpoints.loader import load_tokenizer
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.tags import bio_tags

    checkpoint = require_shared("data", "models", "keras_bert_test_checkpoint")
    tags = bio_tags(["LOC", "PER"])
    model = NerModel(load_encoder(checkpoint), len(tags), lstm_units=4, use_crf=False)
    tagger = Tagger(model, load_tokenizer(checkpoint, max_length=16), tags, max_length=16)
    built = []
    from_config = NerModel.from_config.__func__
    monkeypatch.setattr(NerModel, "from_config", classmethod(lambda cls, config: built.append(1) or from_config(cls, config)))

    tagger.save(tmp_path / "first")
    model.set_weights([w + 1.0 for w in model.get_weights()])
    tagger.save(tmp_path / "second")
    assert len(built) == 1

    monkeypatch.undo()
    for folder, shift in (("first", 1.0), ("second", 0.0)):
        back = Tagger.load(tmp_path / folder).model
        assert len(back.get_weights()) == len(model.get_weights())
        for saved, now in zip(back.get_weights(), model.get_weights()):
            np.testing.assert_allclose(saved + shift, now, atol=1e-5)
    assert saving._inference_twin(model) is saving._inference_twin(model)
