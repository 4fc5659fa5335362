"""Encoder configuration: one dataclass read from either checkpoint layout,
for every encoder family kerasbert loads.

Families (``EncoderConfig.family``):

* ``"bert"`` -- BERT, and ymcui's Chinese BERT-wwm / RoBERTa-wwm-ext / RBT3
  (a BERT despite the name: same variables, same config);
* ``"albert"`` -- ALBERT in Google's layout (factorized embeddings projected
  after the embedding LayerNorm, layers shared within groups); also brightmart's
  ``albert_*_zh_google`` releases and Hugging Face ``AlbertModel``;
* ``"albert_brightmart"`` -- brightmart's own albert_zh layout
  (``word_embeddings_2``, ``layer_shared``): only the *token* embeddings are
  factorized, positions and segments are full width, one shared layer;
* ``"electra"`` -- an ELECTRA discriminator (Google / ymcui names under
  ``electra/``, or Hugging Face ``ElectraModel``): a BERT whose embeddings may
  be narrower than the hidden size (``embeddings_project``) and with no pooler.

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


FAMILIES = ("bert", "albert", "albert_brightmart", "electra")
# Hugging Face ``model_type`` -> family. RoBERTa proper (byte-level BPE,
# positions offset by 2) is a different model; ymcui's Chinese RoBERTa-wwm-ext
# is published as ``model_type: bert`` and loads as BERT.
HF_MODEL_TYPES = {"bert": "bert", "albert": "albert", "electra": "electra"}


@dataclasses.dataclass
class EncoderConfig:
    """Architecture of a BERT-family encoder.

    ``hidden_act`` is the meaning: ``"gelu_tanh"``, ``"gelu_erf"``, ``"relu"``,
    ``"tanh"`` or ``"linear"``. ``family`` is one of :data:`FAMILIES`;
    ``embedding_size`` is the factorized embedding width (ALBERT, ELECTRA;
    equal to ``hidden_size`` when not factorized); ``num_hidden_groups`` and
    ``inner_group_num`` are ALBERT's layer sharing (1 and 1 for every released
    ALBERT: one layer shared by all ``num_layers`` calls).
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
    family: str = "bert"
    embedding_size: int = None
    num_hidden_groups: int = 1
    inner_group_num: int = 1

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise CheckpointError(f"unknown encoder family {self.family!r} (known: {', '.join(FAMILIES)})")
        if self.embedding_size is None:
            self.embedding_size = self.hidden_size
        if self.hidden_size % self.num_heads:
            raise CheckpointError(
                f"hidden_size {self.hidden_size} is not divisible by "
                f"num_attention_heads {self.num_heads}"
            )
        if self.family == "bert" and self.embedding_size != self.hidden_size:
            raise CheckpointError(
                f"embedding_size {self.embedding_size} differs from hidden_size {self.hidden_size}, "
                f"which BERT does not support (ALBERT and ELECTRA do)"
            )
        if self.num_layers % self.num_hidden_groups:
            raise CheckpointError(
                f"num_hidden_layers {self.num_layers} is not divisible by "
                f"num_hidden_groups {self.num_hidden_groups}"
            )

    @property
    def head_size(self):
        return self.hidden_size // self.num_heads

    # --- reading -------------------------------------------------------------
    @classmethod
    def from_json_file(cls, path, layout, family=None):
        """Read ``bert_config.json`` / ``albert_config*.json`` /
        ``*discriminator_config.json`` (layout ``"official"``) or ``config.json``
        (layout ``"huggingface"``). ``family`` comes from the variable names
        for the official layout; for Hugging Face it is read from ``model_type``."""
        from kerasbert.errors import KerasbertError
        from kerasbert.files.atomic import read_json

        path = Path(path)
        try:
            raw = read_json(path)
        except CheckpointError:
            raise
        except KerasbertError as e:  # missing, empty, not UTF-8, not JSON: one line naming the file (and line)
            raise CheckpointError(str(e)) from None
        if not isinstance(raw, dict):
            raise CheckpointError(f"{path}: expected a JSON object")
        return cls.from_dict(raw, layout, source=str(path), family=family)

    @classmethod
    def from_dict(cls, raw, layout, source="config", family=None):
        if layout == "huggingface":
            model_type = raw.get("model_type", "bert")
            if model_type not in HF_MODEL_TYPES:
                hint = (
                    " (RoBERTa proper uses byte-level BPE and offset positions; ymcui's "
                    "Chinese RoBERTa-wwm-ext is model_type 'bert' and loads)"
                    if model_type in ("roberta", "xlm-roberta")
                    else ""
                )
                raise CheckpointError(
                    f"{source}: model_type {model_type!r} is not supported{hint}; "
                    f"kerasbert loads {', '.join(sorted(HF_MODEL_TYPES))}"
                )
            family = HF_MODEL_TYPES[model_type]
        family = family or "bert"
        if raw.get("ln_type", "postln") != "postln":
            raise CheckpointError(
                f"{source}: ln_type {raw['ln_type']!r} (pre-LayerNorm) is not supported; "
                f"only post-LayerNorm encoders (BERT, ALBERT, ELECTRA) are"
            )
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
            family=family,
            embedding_size=int(raw["embedding_size"]) if family != "bert" and "embedding_size" in raw else None,
            num_hidden_groups=int(raw.get("num_hidden_groups", 1)) if family == "albert" else 1,
            inner_group_num=int(raw.get("inner_group_num", 1)) if family == "albert" else 1,
        )

    # --- writing -------------------------------------------------------------
    def _family_keys(self):
        keys = {}
        if self.family != "bert":
            keys["embedding_size"] = self.embedding_size
        if self.family == "albert":
            keys["num_hidden_groups"] = self.num_hidden_groups
            keys["inner_group_num"] = self.inner_group_num
        return keys

    def to_official_dict(self):
        """The official config file's contents (``bert_config.json``,
        ``albert_config.json`` or ``discriminator_config.json``), with official
        activation semantics."""
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
            **self._family_keys(),
        }

    def to_hf_dict(self):
        """``config.json`` contents, with Hugging Face activation semantics.

        brightmart's albert_zh layout has no Hugging Face model class."""
        if self.family == "albert_brightmart":
            raise CheckpointError(
                "brightmart's albert_zh layout has no Hugging Face model class "
                "(its albert_*_zh_google releases, in Google's layout, do: AlbertModel)"
            )
        model_type = self.family
        return {
            "architectures": [{"bert": "BertModel", "albert": "AlbertModel", "electra": "ElectraModel"}[model_type]],
            "model_type": model_type,
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
            **self._family_keys(),
        }

    def encoder_class(self):
        """The Keras class for this family (:mod:`kerasbert.models.encoder`)."""
        from kerasbert.models import encoder

        return {
            "bert": encoder.BertEncoder,
            "albert": encoder.AlbertEncoder,
            "albert_brightmart": encoder.AlbertEncoder,
            "electra": encoder.ElectraEncoder,
        }[self.family]

    def encoder_kwargs(self):
        """Constructor arguments of :meth:`encoder_class`."""
        kwargs = {
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
        if self.family != "bert":
            kwargs["embedding_dim"] = self.embedding_size
        if self.family.startswith("albert"):
            kwargs["num_groups"] = self.num_hidden_groups
            kwargs["num_inner_repetitions"] = self.inner_group_num
            kwargs["factorization"] = "tokens" if self.family == "albert_brightmart" else "embeddings"
        return kwargs

    @classmethod
    def from_encoder(cls, encoder):
        """The config of a built encoder (:mod:`kerasbert.models.encoder`)."""
        family = encoder.family
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
            family=family,
            embedding_size=getattr(encoder, "embedding_dim", None),
            num_hidden_groups=getattr(encoder, "num_groups", 1),
            inner_group_num=getattr(encoder, "num_inner_repetitions", 1),
        )

    @classmethod
    def infer_electra(cls, shapes, source):
        """An ELECTRA discriminator config from variable shapes alone.

        Google's ELECTRA release ships no config file (the sizes live in its
        ``configure_pretraining.py``). Everything but the number of heads is in
        the shapes; the heads are ``hidden_size // 64``, true of every Google
        ELECTRA (small 256/4, base 768/12, large 1024/16). Put a
        ``discriminator_config.json`` beside the checkpoint to override."""
        try:
            V, E = shapes["electra/embeddings/word_embeddings"]
            P = shapes["electra/embeddings/position_embeddings"][0]
            S = shapes["electra/embeddings/token_type_embeddings"][0]
            H, I = shapes["electra/encoder/layer_0/intermediate/dense/kernel"]
        except KeyError as e:
            raise CheckpointError(f"{source}: no config file and no variable {e.args[0]} to infer one from")
        layers = 1 + max(
            int(name.split("/")[2][len("layer_"):])
            for name in shapes
            if name.startswith("electra/encoder/layer_")
        )
        if H % 64:
            raise CheckpointError(
                f"{source}: no config file, and hidden size {H} is not a multiple of 64, so the "
                f"number of attention heads cannot be inferred; add a discriminator_config.json"
            )
        return cls(
            vocab_size=V, hidden_size=H, num_layers=layers, num_heads=H // 64,
            intermediate_size=I, hidden_act="gelu_tanh", max_position_embeddings=P,
            type_vocab_size=S, family="electra", embedding_size=E,
        )
