"""LoRA fine-tuning with Keras 3's own low-rank adapters (``--lora-rank R``).

Nothing here computes LoRA: Keras's ``Dense`` and ``EinsumDense`` layers do
it (``layer.enable_lora(rank)`` adds ``lora_kernel_a`` [in, R] and
``lora_kernel_b`` [R, out], ``b`` starting at zero, and adds
``(alpha / R) * a @ b`` to the frozen kernel), and keras-hub's
``Backbone.enable_lora`` / ``save_lora_weights`` / ``load_lora_weights``
pick the layers by name, freeze the rest of the encoder and write the
adapters to a ``.lora.h5`` file. This module only says which layers
(:data:`LORA_LAYERS`), freezes what keras-hub leaves trainable (the biases of
the adapted layers), and merges adapters into plain kernels for an export
(:func:`merged_model`).

Two things about Keras's LoRA the callers must know:

* ``model.save`` / ``save_weights`` of a layer with LoRA writes the kernel
  **with the adapters merged in** (``Dense.save_own_variables``), and
  loading zeroes the adapters: a ``model.keras`` of a LoRA model is as large
  as a full one. A LoRA model folder therefore writes the adapters and the
  head itself (:mod:`kerasbert.checkpoints.saving`).
* a layer's LoRA is not in the encoder's config (the encoder's config holds
  only its constructor arguments), so a model rebuilt from its config is a
  plain one: :func:`merged_model` uses exactly that, plus Keras's merge on
  save.
"""

import tempfile
from pathlib import Path

#: The encoder sublayers that get adapters: in each keras-hub
#: ``TransformerEncoder``, the attention's ``EinsumDense`` projections
#: (``query``, ``key``, ``value``, ``attention_output``) and the feed-forward
#: ``Dense`` layers.
LORA_LAYERS = ("query", "key", "value", "attention_output",
               "feedforward_intermediate_dense", "feedforward_output_dense")
#: The adapters' file in a LoRA model folder (keras-hub's ``save_lora_weights``
#: wants the ``.lora.h5`` ending).
ADAPTERS_FILE = "encoder.lora.h5"


def enable_lora(encoder, rank):
    """Put Keras's LoRA adapters of rank ``rank`` on ``encoder``'s attention
    and feed-forward layers (:data:`LORA_LAYERS`) and freeze every original
    encoder weight: afterwards the encoder's trainable variables are the
    adapters only. Returns the adapted layers."""
    rank = int(rank)
    if rank < 1:
        raise ValueError(f"the LoRA rank must be at least 1, got {rank}")
    encoder.enable_lora(rank, target_layer_names=list(LORA_LAYERS))
    layers = lora_layers(encoder)
    if not layers:
        raise ValueError(f"{type(encoder).__name__} has none of the layers {', '.join(LORA_LAYERS)}")
    for layer in layers:
        # keras-hub leaves an adapted layer trainable, so its bias would train
        # too; the original weights stay as loaded.
        if getattr(layer, "bias", None) is not None:
            layer.bias.trainable = False
    return layers


def lora_layers(model):
    """The layers of ``model`` (nested ones included) that have LoRA enabled."""
    return [layer for layer in model._flatten_layers(include_self=False) if getattr(layer, "lora_enabled", False)]


def lora_rank(model):
    """The LoRA rank of ``model``'s adapters, or 0 without LoRA."""
    layers = lora_layers(model)
    return int(layers[0].lora_rank) if layers else 0


def merged_model(model):
    """A plain copy of ``model`` (no LoRA layers) whose kernels are the
    adapted ones, ``kernel + (alpha / rank) * a @ b``: what serving runs, at
    the cost of the original model. The merge is Keras's own: ``save_weights``
    of a LoRA layer writes the merged kernel, which the plain copy (rebuilt
    from the config, which has no LoRA in it) loads."""
    plain = type(model).from_config(model.get_config())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "merged.weights.h5"
        model.save_weights(path)
        plain.load_weights(path)
    if lora_layers(plain):
        raise AssertionError("the rebuilt model still has LoRA layers")
    return plain
