"""The CRF layer (its transition matrix, Viterbi decoding, the training loss) and the tag schemes' allowed transitions."""

import keras
import numpy as np
from keras import ops

from kerasbert.layers.crf.sequence import crf_decode
from kerasbert.layers.crf.sequence import crf_log_likelihood


def allowed_transitions(labels, scheme="BIO"):
    """Which tag transitions and first tags a tagging scheme permits.

    Args:
        labels: list of label strings, indexed by tag id: "O" or
            "<prefix>-<type>", e.g. "B-PER", "I-PER", "E-PER", "S-PER". The type
            may contain hyphens ("B-GEO-LOC" has type "GEO-LOC").
        scheme: "BIO" (alias "IOB2") or "BIOES" (alias "IOBES").

    Returns:
        `(allowed, allowed_start)`: numpy booleans `[num_tags, num_tags]` (row =
        tag at step t, column = tag at step t + 1) and `[num_tags]`.

        - BIO: "I-X" may only follow "B-X" or "I-X", and may not start a
          sequence.
        - BIOES: after "B-X" or "I-X" only "I-X" or "E-X" may come; after "O",
          "E-X" or "S-X" only "O", "B-*" or "S-*"; a sequence may not start
          with "I-X" or "E-X". (An unfinished "B-X"/"I-X" at the very end is not
          forbidden: there are no end scores.)

    Raises:
        ValueError: unknown scheme, or a label that does not fit it.
    """
    scheme_name = str(scheme).upper()
    prefixes = {
        "BIO": "BI",
        "IOB2": "BI",
        "BIOES": "BIES",
        "IOBES": "BIES",
    }
    if scheme_name not in prefixes:
        raise ValueError(
            f"Unknown tagging scheme {scheme!r}; expected 'BIO' (IOB2) or "
            "'BIOES'."
        )
    parsed = []
    for label in labels:
        if label == "O":
            parsed.append(("O", None))
            continue
        prefix, sep, entity = str(label).partition("-")
        if not sep or not entity or prefix not in prefixes[scheme_name]:
            raise ValueError(
                f"Label {label!r} does not fit the {scheme_name} scheme: "
                f"expected 'O' or one of "
                f"{', '.join(p + '-<type>' for p in prefixes[scheme_name])}."
            )
        parsed.append((prefix, entity))

    def ok(previous, current):
        (p_prefix, p_type), (c_prefix, c_type) = previous, current
        inside = p_prefix in ("B", "I")  # an entity is open and may continue
        if scheme_name in ("BIO", "IOB2"):
            if c_prefix == "I":
                return inside and p_type == c_type
            return True
        if c_prefix in ("I", "E"):
            return inside and p_type == c_type
        return not inside  # O, B-*, S-* need the previous entity closed

    num_tags = len(parsed)
    allowed = np.array(
        [[ok(parsed[i], parsed[j]) for j in range(num_tags)] for i in range(num_tags)],
        dtype=bool,
    ).reshape(num_tags, num_tags)
    allowed_start = np.array(
        [prefix not in ("I", "E") for prefix, _ in parsed], dtype=bool
    )
    return allowed, allowed_start


@keras.saving.register_keras_serializable(package="kerasbert")
class CRF(keras.layers.Layer):
    """Linear-chain CRF layer: owns the transition matrix, decodes with Viterbi.

    Calling the layer returns the Viterbi tags (int32 `[batch, time]`). Training
    uses `layer.loss(potentials, tag_indices, sequence_lengths)` (=
    `-mean(log_likelihood)`) or `layer.log_likelihood(...)`, e.g. from an
    overridden `Model.compute_loss`.

    All CRF math runs in float32 even under a mixed-precision policy: the
    `transitions` variable is float32 and never autocast, and potentials are
    cast to float32 at entry.

    Args:
        num_tags: number of tags.
        allowed: optional boolean `[num_tags, num_tags]` matrix of allowed
            transitions, used at decode time only (see `allowed_transitions`).
        allowed_start: optional boolean `[num_tags]` of allowed first tags,
            used at decode time only.
        transitions_initializer: initializer of the transition matrix.
        **kwargs: standard layer arguments (`name`, `dtype`, `trainable`).

    Call arguments:
        potentials: `[batch, time, num_tags]` unary scores.
        sequence_lengths: optional `[batch]` integer lengths.
        mask: optional `[batch, time]` boolean padding mask (right-padded), used
            when `sequence_lengths` is None. With neither, every sequence has
            the full length.
    """

    def __init__(
        self,
        num_tags,
        allowed=None,
        allowed_start=None,
        transitions_initializer="glorot_uniform",
        **kwargs,
    ):
        kwargs.pop("autocast", None)
        super().__init__(autocast=False, **kwargs)

        # === Config ===
        self.num_tags = int(num_tags)
        self.allowed = _bool_list(allowed, (self.num_tags, self.num_tags), "allowed")
        self.allowed_start = _bool_list(
            allowed_start, (self.num_tags,), "allowed_start"
        )
        self.transitions_initializer = keras.initializers.get(
            transitions_initializer
        )
        self.supports_masking = True

    def build(self, potentials_shape=None):
        if potentials_shape is not None and potentials_shape[-1] not in (
            None,
            self.num_tags,
        ):
            raise ValueError(
                f"CRF(num_tags={self.num_tags}) got potentials with last "
                f"dimension {potentials_shape[-1]}."
            )
        # === Layers ===
        self.transitions = self.add_weight(
            name="transitions",
            shape=(self.num_tags, self.num_tags),
            initializer=self.transitions_initializer,
            dtype="float32",
            autocast=False,
            trainable=True,
        )
        self.built = True

    def _lengths(self, potentials, sequence_lengths, mask):
        if sequence_lengths is not None:
            return ops.cast(sequence_lengths, "int32")
        if mask is not None:
            return ops.sum(ops.cast(mask, "int32"), axis=1)
        return ops.zeros_like(potentials[:, 0, 0], dtype="int32") + ops.shape(
            potentials
        )[1]

    def call(self, potentials, sequence_lengths=None, mask=None):
        potentials = ops.cast(potentials, "float32")
        tags, _ = crf_decode(
            potentials,
            self.transitions,
            self._lengths(potentials, sequence_lengths, mask),
            allowed=self.allowed,
            allowed_start=self.allowed_start,
        )
        return tags

    def log_likelihood(self, potentials, tag_indices, sequence_lengths):
        """`[batch]` float32 log-likelihoods of the gold tags."""
        if not self.built:
            self.build(tuple(potentials.shape))
        log_likelihood, _ = crf_log_likelihood(
            ops.cast(potentials, "float32"),
            tag_indices,
            sequence_lengths,
            self.transitions,
        )
        return log_likelihood

    def loss(self, potentials, tag_indices, sequence_lengths):
        """Scalar training loss: `-mean(log_likelihood)` over the batch."""
        return -ops.mean(
            self.log_likelihood(potentials, tag_indices, sequence_lengths)
        )

    def compute_output_spec(self, potentials, sequence_lengths=None, mask=None):
        return keras.KerasTensor(tuple(potentials.shape[:-1]), dtype="int32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_tags": self.num_tags,
                "allowed": self.allowed,
                "allowed_start": self.allowed_start,
                "transitions_initializer": keras.initializers.serialize(
                    self.transitions_initializer
                ),
            }
        )
        return config


def _bool_list(value, shape, name):
    """None, or a nested list of Python bools of the given shape (for configs)."""
    if value is None:
        return None
    array = np.asarray(value)
    if array.shape != shape:
        raise ValueError(f"`{name}` must have shape {shape}, got {array.shape}.")
    return array.astype(bool).tolist()
