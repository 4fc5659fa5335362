"""Layers the heads are built from, each in backend-agnostic ``keras.ops``.

The CRF (``crf``, held to tensorflow-addons' numbers), the heads' BiLSTM
(``bilstm``), GlobalPointer span scores (``global_pointer``), the scalar mix of
encoder layers (``layer_mix``), LoRA adapters (``lora``) and GELU
(``activations``). :mod:`kerasbert.testing` runs the same checks on each.
"""
