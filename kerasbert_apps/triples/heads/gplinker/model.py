"""The GPLinker triple network (``--head gplinker``): three Efficient GlobalPointers on a BERT encoder.

::

    token_ids, segment_ids, padding_mask ─> encoder ─> dropout ─> h [batch, len, H]
        h ─> GlobalPointer(2, RoPE, end >= start) ─> entities [batch, len, len, 2]
        h ─> GlobalPointer(P, no RoPE, no mask)   ─> heads    [batch, len, len, P]
        h ─> GlobalPointer(P, no RoPE, no mask)   ─> tails    [batch, len, len, P]

(Su Jianlin's GPLinker, bert4keras.) ``entities[b, i, j, 0]`` scores the span
from token ``i`` to token ``j`` (inclusive) as a subject, ``[..., 1]`` as an
object; ``heads[b, i, k, p]`` links a subject starting at token ``i`` to an
object starting at token ``k`` through predicate ``p``; ``tails[b, j, l, p]``
links a subject ending at ``j`` to an object ending at ``l``. Every output is
a float32 LOGIT; a span or link holds where its logit is above 0. Unlike the
CasRel head (:mod:`kerasbert_apps.triples.heads.casrel.model`), nothing is conditioned on one
subject: all subjects, objects and links of a sequence are scored in one
pass, so entities may nest and overlap, and one subject may have several
objects (SEO) and one pair several predicates (EPO). Padding is masked (and
``end < start`` for the entities) with :data:`kerasbert.layers.global_pointer.MASKED_LOGIT`.

Loss (:func:`sparse_global_pointer_crossentropy`): the multilabel categorical
cross-entropy per (sequence, channel) -- a channel is an entity type or a
predicate of the heads or of the tails -- summed over the channels and
averaged over the sequences, for each of the three outputs; the three are
added with equal weights (as bert4keras). The gold labels come sparse, as
codes per row position (:meth:`kerasbert_apps.triples.heads.gplinker.pipeline.GPLinkerExtractor.window_labels`):
``entity_codes[b, i, :]`` holds ``j * 2 + type + 1`` for each span starting
at ``i``, ``head_codes[b, i, :]`` holds ``k * P + p + 1`` for each link from
``i``, ``tail_codes`` likewise, 0 pads; the loss gathers the positive logits
through them (bert4keras's sparse form), so no dense ``[batch, len, len, P]``
target is ever built.

All head layers are named ``triples_head_*`` (their own learning rate).
"""

import keras
from keras import ops

from kerasbert_apps.base.model import TaskModel
from kerasbert_apps.base.model import encoder_inputs
from kerasbert.layers.global_pointer import EfficientGlobalPointer
from kerasbert.layers.global_pointer import global_pointer_crossentropy

HEAD_PREFIX = "triples_head_"
#: The model's outputs, and the name of each one's label codes.
OUTPUTS = ("entities", "heads", "tails")
CODES = {"entities": "entity_codes", "heads": "head_codes", "tails": "tail_codes"}
#: Entity channels of ``entities``.
ENTITY_TYPES = ("subject", "object")


def sparse_global_pointer_crossentropy(codes, logits):
    """The GPLinker loss of one output: the multilabel categorical
    cross-entropy of ``logits`` ``[batch, m, n, C]`` against the positives
    ``codes`` int ``[batch, m, K]`` (``n_index * C + channel + 1``, 0 pads),
    per (sequence, channel), summed over the channels and averaged over the
    sequences (:func:`kerasbert.layers.global_pointer.global_pointer_crossentropy`,
    sparse)."""
    return global_pointer_crossentropy(codes, logits, sparse=True, channels="sum")


@keras.saving.register_keras_serializable(package="kerasbert_triples")
class GPLinkerModel(TaskModel):
    """BERT -> three Efficient GlobalPointers (see the module docstring).

    Args:
        encoder: an encoder from :mod:`kerasbert.models.encoder`.
        num_predicates: number of predicates ``P``.
        head_size: query/key size of each GlobalPointer.
        dropout: dropout on the encoder output.
        layer_mix: feed the head a learned mix of all the encoder's hidden
            states (``--freeze-encoder``) instead of its last layer.
    """

    def __init__(self, encoder, num_predicates, head_size=64, dropout=0.1, layer_mix=False, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.freeze_pooler(encoder)
        self.make_layer_mix(encoder, layer_mix, HEAD_PREFIX)
        self.head_dropout = keras.layers.Dropout(dropout, name=HEAD_PREFIX + "dropout")
        self.entity_pointer = EfficientGlobalPointer(len(ENTITY_TYPES), head_size=head_size, dtype="float32",
                                                     name=HEAD_PREFIX + "entities")
        self.head_pointer = EfficientGlobalPointer(num_predicates, head_size=head_size, rope=False, tril_mask=False,
                                                   dtype="float32", name=HEAD_PREFIX + "heads")
        self.tail_pointer = EfficientGlobalPointer(num_predicates, head_size=head_size, rope=False, tril_mask=False,
                                                   dtype="float32", name=HEAD_PREFIX + "tails")

        # === Functional Model ===
        inputs = encoder_inputs()
        x = ops.cast(self.head_dropout(self.encoded(encoder(inputs))), "float32")
        mask = inputs["padding_mask"]
        outputs = {"entities": self.entity_pointer(x, mask=mask), "heads": self.head_pointer(x, mask=mask),
                   "tails": self.tail_pointer(x, mask=mask)}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.num_predicates = int(num_predicates)
        self.head_size = int(head_size)
        self.dropout = dropout

    def task_loss(self, x, y, y_pred):
        return sum(sparse_global_pointer_crossentropy(y[CODES[name]], y_pred[name]) for name in OUTPUTS)

    def head_config(self):
        return {"num_predicates": self.num_predicates, "head_size": self.head_size, "dropout": self.dropout,
                "layer_mix": self.layer_mix}
