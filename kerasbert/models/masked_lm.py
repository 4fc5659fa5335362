"""Masked-LM head on a :class:`~kerasbert.models.encoder.BertEncoder`, and fill-mask.

Official checkpoints usually carry ``cls/predictions/*`` (the pre-training
head: dense + LayerNorm + output bias, decoding through the tied word
embeddings). :func:`kerasbert.load_masked_lm` loads it when present; nothing
else requires it.
"""

import keras
import numpy as np
from keras_hub.layers import MaskedLMHead

from kerasbert.layers.activations import CompiledActivationsTraining
from kerasbert.models.encoder import ACTIVATIONS
from kerasbert.models.encoder import BertEncoder


@keras.saving.register_keras_serializable(package="kerasbert")
class BertMaskedLM(CompiledActivationsTraining, keras.Model):
    """Encoder + masked-LM head.

    Inputs: the encoder's three inputs plus ``mask_positions`` ([batch, n]
    int32 token positions to predict). Output: logits [batch, n, vocab].
    """

    def __init__(self, encoder, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.masked_lm_head = MaskedLMHead(
            vocabulary_size=encoder.vocabulary_size,
            token_embedding=encoder.token_embedding,
            intermediate_activation=ACTIVATIONS[encoder.hidden_act],
            layer_norm_epsilon=encoder.layer_norm_epsilon,
            dtype=encoder.dtype_policy,
            name="masked_lm_head",
        )
        # === Functional Model ===
        inputs = dict(encoder.input)
        inputs["mask_positions"] = keras.Input(shape=(None,), dtype="int32", name="mask_positions")
        sequence = encoder(
            {k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")}
        )["sequence_output"]
        logits = self.masked_lm_head(sequence, mask_positions=inputs["mask_positions"])
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

    def get_config(self):
        return {"encoder": keras.saving.serialize_keras_object(self.encoder), "name": self.name}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)


def fill_mask(model, tokenizer, text, top_k=5, mask_token="[MASK]"):
    """Predict the tokens hidden at each ``mask_token`` in ``text``.

    The tokenizer treats a literal ``"[MASK]"`` as plain text, so this function
    splits ``text`` at ``mask_token`` itself and puts the mask id between the
    pieces. Returns one list per mask of ``(token, probability)``, best first.
    """
    if tokenizer.mask_id is None:
        raise ValueError("the vocabulary has no [MASK] token")
    pieces = text.split(mask_token)
    if len(pieces) < 2:
        raise ValueError(f"no {mask_token} in the text")
    ids, positions = [tokenizer.cls_id], []
    for i, piece in enumerate(pieces):
        ids.extend(tokenizer.encode_pieces(piece)[0])
        if i < len(pieces) - 1:
            positions.append(len(ids))
            ids.append(tokenizer.mask_id)
    ids.append(tokenizer.sep_id)
    ids = np.asarray([ids], dtype=np.int32)
    logits = model.predict(
        {
            "token_ids": ids,
            "segment_ids": np.zeros_like(ids),
            "padding_mask": np.ones_like(ids),
            "mask_positions": np.asarray([positions], dtype=np.int32),
        },
        verbose=0,
    )[0]
    logits = logits.astype(np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    results = []
    for row in probs:
        best = np.argsort(-row)[:top_k]
        results.append([(tokenizer.id_to_token(int(i)), float(row[i])) for i in best])
    return results


__all__ = ["BertMaskedLM", "BertEncoder", "fill_mask"]
