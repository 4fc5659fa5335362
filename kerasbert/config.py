"""Encoder configuration: one dataclass read from either checkpoint layout.

The same key means different things in the two layouts, and getting it wrong
costs accuracy silently:

* ``"hidden_act": "gelu"`` in an **official** ``bert_config.json`` is the tanh
  approximation (google-research/bert ``modeling.py``);
* ``"hidden_act": "gelu"`` in a **Hugging Face** ``config.json`` is the exact
  (erf) GELU; ``"gelu_new"``, ``"gelu_pytorch_tanh"`` and ``"gelu_fast"`` are
  the tanh approximation.

:class:`EncoderConfig` stores the *meaning* (``"gelu_tanh"`` or ``"gelu_erf"``),
never the ambiguous name, and writes the right name back for each layout.
"""

import dataclasses
import json
from pathlib import Path

from kerasbert.errors import CheckpointError

# Activation names as each layout spells them -> what they mean.
OFFICIAL_ACTIVATIONS = {
    "gelu": "gelu_tanh",  # google-research/bert modeling.gelu is the tanh form
    "gelu_tanh": "gelu_tanh",
    "gelu_erf": "gelu_erf",  # bert4keras's spelling; not in Google's code
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
HF_ACTIVATIONS = {
    "gelu": "gelu_erf",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
# Meaning -> the name written back in each layout.
_OFFICIAL_NAMES = {"gelu_tanh": "gelu", "gelu_erf": "gelu_erf"}
_HF_NAMES = {"gelu_tanh": "gelu_new", "gelu_erf": "gelu"}

_REQUIRED = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_size",
}


@dataclasses.dataclass
class EncoderConfig:
    """Architecture of a BERT encoder.

    ``hidden_act`` is the meaning: ``"gelu_tanh"``, ``"gelu_erf"``, ``"relu"``,
    ``"tanh"`` or ``"linear"``.
    """

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    hidden_act: str = "gelu_tanh"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_epsilon: float = 1e-12

    def __post_init__(self):
        if self.hidden_size % self.num_heads:
            raise CheckpointError(
                f"hidden_size {self.hidden_size} is not divisible by "
                f"num_attention_heads {self.num_heads}"
            )

    @property
    def head_size(self):
        return self.hidden_size // self.num_heads

    # --- reading -------------------------------------------------------------
    @classmethod
    def from_json_file(cls, path, layout):
        """Read ``bert_config.json`` (layout ``"official"``) or ``config.json``
        (layout ``"huggingface"``)."""
        path = Path(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as e:
            raise CheckpointError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})")
        except json.JSONDecodeError as e:
            raise CheckpointError(f"{path}, line {e.lineno}: invalid JSON: {e.msg}")
        if not isinstance(raw, dict):
            raise CheckpointError(f"{path}: expected a JSON object")
        return cls.from_dict(raw, layout, source=str(path))

    @classmethod
    def from_dict(cls, raw, layout, source="config"):
        missing = [key for key in _REQUIRED if key not in raw]
        if missing:
            raise CheckpointError(f"{source}: missing key(s) {', '.join(missing)}")
        table = OFFICIAL_ACTIVATIONS if layout == "official" else HF_ACTIVATIONS
        act_name = raw.get("hidden_act", "gelu")
        if act_name not in table:
            raise CheckpointError(
                f"{source}: hidden_act {act_name!r} is not supported for the "
                f"{layout} layout (known: {', '.join(sorted(table))})"
            )
        kwargs = {ours: int(raw[key]) for key, ours in _REQUIRED.items()}
        return cls(
            **kwargs,
            hidden_act=table[act_name],
            max_position_embeddings=int(raw.get("max_position_embeddings", 512)),
            type_vocab_size=int(raw.get("type_vocab_size", 2)),
            hidden_dropout=float(raw.get("hidden_dropout_prob", 0.1)),
            attention_dropout=float(raw.get("attention_probs_dropout_prob", 0.1)),
            layer_norm_epsilon=float(raw.get("layer_norm_eps", 1e-12)),
        )

    # --- writing -------------------------------------------------------------
    def to_official_dict(self):
        """``bert_config.json`` contents, with official activation semantics."""
        return {
            "attention_probs_dropout_prob": self.attention_dropout,
            "hidden_act": _OFFICIAL_NAMES.get(self.hidden_act, self.hidden_act),
            "hidden_dropout_prob": self.hidden_dropout,
            "hidden_size": self.hidden_size,
            "initializer_range": 0.02,
            "intermediate_size": self.intermediate_size,
            "max_position_embeddings": self.max_position_embeddings,
            "num_attention_heads": self.num_heads,
            "num_hidden_layers": self.num_layers,
            "type_vocab_size": self.type_vocab_size,
            "vocab_size": self.vocab_size,
        }

    def to_hf_dict(self):
        """``config.json`` contents, with Hugging Face activation semantics."""
        return {
            "architectures": ["BertModel"],
            "model_type": "bert",
            "attention_probs_dropout_prob": self.attention_dropout,
            "hidden_act": _HF_NAMES.get(self.hidden_act, self.hidden_act),
            "hidden_dropout_prob": self.hidden_dropout,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "layer_norm_eps": self.layer_norm_epsilon,
            "max_position_embeddings": self.max_position_embeddings,
            "num_attention_heads": self.num_heads,
            "num_hidden_layers": self.num_layers,
            "type_vocab_size": self.type_vocab_size,
            "vocab_size": self.vocab_size,
        }

    def encoder_kwargs(self):
        """Constructor arguments of :class:`kerasbert.encoder.BertEncoder`."""
        return {
            "vocabulary_size": self.vocab_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_size,
            "intermediate_dim": self.intermediate_size,
            "hidden_act": self.hidden_act,
            "dropout": self.hidden_dropout,
            "max_sequence_length": self.max_position_embeddings,
            "num_segments": self.type_vocab_size,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        }

    @classmethod
    def from_encoder(cls, encoder):
        """The config of a built :class:`~kerasbert.encoder.BertEncoder`."""
        return cls(
            vocab_size=encoder.vocabulary_size,
            hidden_size=encoder.hidden_dim,
            num_layers=encoder.num_layers,
            num_heads=encoder.num_heads,
            intermediate_size=encoder.intermediate_dim,
            hidden_act=encoder.hidden_act,
            max_position_embeddings=encoder.max_sequence_length,
            type_vocab_size=encoder.num_segments,
            hidden_dropout=encoder.dropout,
            attention_dropout=encoder.dropout,
            layer_norm_epsilon=encoder.layer_norm_epsilon,
        )
