"""Checkpoint folders on disk: find them, read their variables, write them.

Two layouts are recognised, for each encoder family (BERT, ALBERT, ELECTRA;
see :mod:`kerasbert.checkpoints.config`):

* **official** (google-research/bert, ymcui's Chinese BERT-wwm / RoBERTa-wwm-ext
  / RBT3 and Chinese-ELECTRA, Google's ALBERT and ELECTRA, brightmart's
  albert_zh): a config file (``bert_config.json``, ``albert_config*.json`` or
  ``*discriminator_config.json``; Google's ELECTRA ships none and its config is
  inferred from the shapes), ``vocab.txt`` and a TF name-based checkpoint
  ``<prefix>.index`` + ``<prefix>.data-*``. The prefix is whatever the
  ``checkpoint`` file names, or the single ``*.index`` in the folder. The
  family is read from the variable names (``electra/...``,
  ``.../embedding_hidden_mapping_in``, ``.../layer_shared``), never from the
  file name, since users rename configs.
* **huggingface**: ``config.json`` (its ``model_type`` gives the family),
  ``vocab.txt`` and ``model.safetensors`` (or a sharded
  ``model.safetensors.index.json``), names with or without the ``bert.`` /
  ``albert.`` / ``electra.`` prefix. A folder with only ``pytorch_model.bin``
  is refused: that file is a pickle, and loading a pickle runs arbitrary code.

Whatever the layout, variables are exposed under their **official names**
(``bert/encoder/layer_0/attention/self/query/kernel``), with Hugging Face
``Linear`` weights transposed to TF's ``[in, out]``. This module knows files;
which Keras weight each name feeds is :mod:`kerasbert.checkpoints.weight_map`.

Only WordPiece vocabularies (``vocab.txt``) are supported: Google's English
ALBERT and other SentencePiece models are refused with the reason.
"""

import json
import re
from pathlib import Path

import numpy as np

from kerasbert.checkpoints.config import EncoderConfig
from kerasbert.errors import CheckpointError
from kerasbert.errors import KerasbertError
from kerasbert.tokenizers.vocab import read_vocab

# Official config file names, as globs; the first family of names that matches wins.
OFFICIAL_CONFIG_NAMES = ("bert_config.json", "albert_config*.json", "*discriminator_config.json")
HF_CONFIG_NAME = "config.json"
VOCAB_NAME = "vocab.txt"

# Variables that training leaves in a checkpoint and a loader must not want.
_OPTIMIZER_SLOT = re.compile(
    r"(/adam_[mv]|/Adam(_\d+)?|/Momentum|/AdamWeightDecay.*|/ExponentialMovingAverage)$"
)
_TRAINING_STATE = {"global_step", "good_steps", "loss_scale", "current_loss_scale"}


def is_training_state(name):
    """True for optimizer slots and step counters, which loaders ignore."""
    return name in _TRAINING_STATE or bool(_OPTIMIZER_SLOT.search(name))


# =============================================================================
# Reading
# =============================================================================


class CheckpointFolder:
    """A checkpoint folder on disk, opened but not yet read.

    Attributes:
        directory: the folder.
        layout: ``"official"`` or ``"huggingface"``.
        config_path, vocab_path, weights_path: the files found (``weights_path``
            is the checkpoint prefix for the official layout; ``config_path``
            is None for a Google ELECTRA folder, whose config is inferred).
        config: the :class:`~kerasbert.checkpoints.config.EncoderConfig`.
        shapes: official variable name -> shape, for every model variable.
        ignored: names present in the files but not model variables (optimizer
            slots, ``global_step``, tied or buffer tensors of HF models), each
            with the reason.
    """

    def __init__(self, path):
        path = Path(path)
        if path.is_file() or (not path.exists() and path.parent.is_dir()):
            # A checkpoint prefix like ".../bert_model.ckpt" or a file in the folder.
            directory = path.parent
        else:
            directory = path
        if not directory.is_dir():
            raise CheckpointError(f"{path}: no such checkpoint folder")
        self.directory = directory
        self.ignored = {}
        self._hf_names = {}  # official name -> (hf name, transpose)
        if (directory / HF_CONFIG_NAME).exists() and not _official_config(directory):
            self.layout = "huggingface"
            self._open_hf(directory)
        else:
            self.layout = "official"
            self._open_official(directory, path)
        self.vocab_path = directory / VOCAB_NAME
        if not self.vocab_path.exists():
            sentencepiece = sorted(p.name for p in directory.glob("*.model"))
            if sentencepiece:
                raise CheckpointError(
                    f"{directory}: this model uses a SentencePiece vocabulary ({', '.join(sentencepiece)}) "
                    f"and has no {VOCAB_NAME}; kerasbert tokenizes with WordPiece only (host-side with "
                    f"offsets, and in-graph for TF Serving), so Google's English ALBERT and other "
                    f"SentencePiece models are not supported. ALBERT-zh (brightmart, vocab.txt) is."
                )
            raise CheckpointError(f"{self.vocab_path}: missing (the WordPiece vocabulary)")

    # --- official ------------------------------------------------------------
    def _open_official(self, directory, given):
        config_path = _official_config(directory)
        if config_path is None and not list(directory.glob("*.index")):
            raise CheckpointError(
                f"{directory}: no checkpoint found (expected bert_config.json / albert_config.json + "
                f"bert_model.ckpt.index/.data-*, or config.json + model.safetensors); "
                f"files here: {_listing(directory)}"
            )
        prefix = find_checkpoint_prefix(directory, given)
        self.weights_path = prefix
        import tensorflow as tf

        try:
            self._reader = tf.train.load_checkpoint(str(prefix))
            all_shapes = self._reader.get_variable_to_shape_map()
        except Exception as e:  # tf raises several error types for bad files
            index = Path(f"{prefix}.index")
            size = f"; {index.stat().st_size:,} bytes" if index.exists() else ""
            raise CheckpointError(f"{index}: damaged: not a readable checkpoint index ({_tf_message(e)}{size})")
        self.shapes = {}
        for name, shape in all_shapes.items():
            if is_training_state(name):
                self.ignored[name] = "optimizer slot or training step"
            else:
                self.shapes[name] = tuple(shape)
        self.data_files = sorted(directory.glob(prefix.name + ".data-*"))
        self._data_problem = self._check_data_files(prefix, all_shapes)
        family = official_family(self.shapes)
        self.config_path = config_path
        if config_path is not None:
            self.config = EncoderConfig.from_json_file(config_path, "official", family)
        elif family == "electra":
            self.config = EncoderConfig.infer_electra(self.shapes, f"{prefix}.index")
        else:
            raise CheckpointError(
                f"{directory}: a {family} checkpoint ({prefix.name}) but no config file "
                f"(expected one of {', '.join(OFFICIAL_CONFIG_NAMES)}); files here: {_listing(directory)}"
            )

    def _check_data_files(self, prefix, all_shapes):
        """A one-line problem when the ``.data-*`` shards are missing, or hold
        fewer bytes than the index's tensors need (a copy cut short); None
        when they look complete. Read lazily by :meth:`read`, so that
        ``inspect`` still shows the names and shapes."""
        if not self.data_files:
            return (f"{prefix}.data-00000-of-00001: missing (the .index file is here but no {prefix.name}.data-* "
                    f"file; only names and shapes can be read)")
        names = {f.name for f in self.data_files}
        match = re.fullmatch(re.escape(prefix.name) + r"\.data-\d+-of-(\d+)", self.data_files[0].name)
        if match:
            shards = int(match.group(1))
            absent = [f"{prefix.name}.data-{i:05d}-of-{shards:05d}" for i in range(shards)
                      if f"{prefix.name}.data-{i:05d}-of-{shards:05d}" not in names]
            if absent:
                return f"{self.directory / absent[0]}: missing ({len(absent)} of {shards} data shards missing)"
        try:
            dtypes = self._reader.get_variable_to_dtype_map()
            needed = sum(int(np.prod(shape, dtype=np.int64)) * dtypes[name].size for name, shape in all_shapes.items())
            if any(dtypes[name].size == 0 for name in all_shapes):  # strings: no fixed size
                return None
        except Exception:  # a reader without dtypes: no size check
            return None
        found = sum(f.stat().st_size for f in self.data_files)
        if found < needed:
            where = str(self.data_files[0]) if len(self.data_files) == 1 else f"{prefix}.data-*"
            return f"{where}: damaged: truncated ({found:,} of the {needed:,} bytes its index needs)"
        return None

    @property
    def config_source(self):
        """The config file, or how the config was obtained when there is none."""
        if self.config_path is None:
            return f"(no config file: inferred from the variable shapes in {self.weights_path}.index)"
        return str(self.config_path)

    # --- Hugging Face --------------------------------------------------------
    def _open_hf(self, directory):
        self.config_path = directory / HF_CONFIG_NAME
        self.config = EncoderConfig.from_json_file(self.config_path, "huggingface")
        family = self.config.family
        single = directory / "model.safetensors"
        index = directory / "model.safetensors.index.json"
        if single.exists():
            files = [single]
            self.weights_path = single
        elif index.exists():
            from kerasbert.files.atomic import read_json

            try:
                weight_map = read_json(index)["weight_map"]
            except (KeyError, TypeError) as e:
                raise CheckpointError(f"{index}: damaged: not a safetensors index (no weight_map: {e})")
            except CheckpointError:
                raise
            except KerasbertError as e:
                raise CheckpointError(str(e))
            files = sorted({directory / f for f in weight_map.values()})
            self.weights_path = index
        elif (directory / "pytorch_model.bin").exists():
            raise CheckpointError(
                f"{directory / 'pytorch_model.bin'}: refusing to load a PyTorch pickle "
                f"(unpickling runs arbitrary code). Convert it once, in an environment "
                f"you trust, to safetensors, e.g. with transformers: "
                f"AutoModel.from_pretrained(DIR).save_pretrained(DIR, safe_serialization=True), "
                f"then load the folder again."
            )
        else:
            raise CheckpointError(
                f"{directory}: config.json found but no model.safetensors; "
                f"files here: {_listing(directory)}"
            )
        from safetensors import safe_open

        self._hf_files = {}
        self.shapes = {}
        for file in files:
            if not file.exists():
                raise CheckpointError(f"{file}: listed in the safetensors index but missing")
            try:
                handle = safe_open(str(file), framework="numpy")
                keys = list(handle.keys())
            except Exception as e:
                raise CheckpointError(f"{file}: damaged: not a readable safetensors file ({e}; "
                                      f"{file.stat().st_size:,} bytes)")
            for key in keys:
                official, transpose, why = official_name_from_hf(key, family)
                if official is None:
                    self.ignored[key] = why
                    continue
                shape = tuple(handle.get_slice(key).get_shape())
                self.shapes[official] = shape[::-1] if transpose else shape
                self._hf_names[official] = (key, transpose)
                self._hf_files[official] = handle

    # --- values --------------------------------------------------------------
    def source_name(self, name):
        """The name under which ``name`` (official) is stored in the files."""
        return self._hf_names.get(name, (name, False))[0]

    def read(self, name):
        """The value of the model variable ``name`` (official name) as numpy."""
        if name not in self.shapes:
            raise CheckpointError(f"{self.weights_path}: no variable {name!r}")
        if self.layout == "huggingface":
            key, transpose = self._hf_names[name]
            try:
                value = self._hf_files[name].get_tensor(key)
            except Exception as e:
                raise CheckpointError(f"{self.weights_path}: cannot read {key!r}: {e}")
            return np.ascontiguousarray(value.T) if transpose else value
        if self._data_problem:
            raise CheckpointError(self._data_problem)
        try:
            return self._reader.get_tensor(name)
        except Exception as e:
            raise CheckpointError(
                f"{', '.join(str(f) for f in self.data_files)}: reading {name!r} failed; "
                f"the data file is truncated or corrupt ({_tf_message(e)})"
            )

    def read_vocab(self):
        return read_vocab(self.vocab_path)

    def __repr__(self):
        return f"CheckpointFolder({str(self.directory)!r}, layout={self.layout!r})"


def _official_config(directory):
    for pattern in OFFICIAL_CONFIG_NAMES:
        found = sorted(directory.glob(pattern))
        if len(found) > 1:
            raise CheckpointError(
                f"{directory}: several config files ({', '.join(p.name for p in found)}); "
                f"keep the one that belongs to this checkpoint"
            )
        if found:
            return found[0]
    return None


def official_family(names):
    """The encoder family of an official-layout checkpoint, from its variable names."""
    if any(name.startswith("electra/") for name in names):
        return "electra"
    if "bert/encoder/embedding_hidden_mapping_in/kernel" in names:
        return "albert"
    if "bert/embeddings/word_embeddings_2" in names or any(
        name.startswith("bert/encoder/layer_shared/") for name in names
    ):
        return "albert_brightmart"
    return "bert"


def _listing(directory, limit=12):
    names = sorted(p.name for p in directory.iterdir())
    more = f", ... ({len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more if names else "(empty)"


def _tf_message(error):
    message = getattr(error, "message", None) or str(error)
    return message.strip().splitlines()[0] if message.strip() else type(error).__name__


def find_checkpoint_prefix(directory, given=None):
    """The checkpoint prefix in ``directory`` (``.../bert_model.ckpt``).

    Order: a prefix the user named (``given``, if ``given.index`` exists), the
    ``checkpoint`` file's ``model_checkpoint_path`` (resolved inside
    ``directory`` when its recorded path is elsewhere, as after a download),
    else the only ``*.index`` file.
    """
    directory = Path(directory)
    if given is not None:
        given = Path(given)
        if given.suffix == ".index" and given.exists():
            return given.with_suffix("")
        if Path(str(given) + ".index").exists():
            return given
    state = directory / "checkpoint"
    if state.exists():
        match = re.search(
            r'^model_checkpoint_path:\s*"(.*)"', state.read_text(encoding="utf-8", errors="replace"), re.M
        )
        if match:
            recorded = Path(match.group(1))
            for candidate in (recorded, directory / recorded, directory / recorded.name):
                if Path(str(candidate) + ".index").exists():
                    return candidate
    indexes = sorted(directory.glob("*.index"))
    if len(indexes) == 1:
        return indexes[0].with_suffix("")
    data = sorted(directory.glob("*.data-*-of-*"))
    if not indexes and data:
        prefix = data[0].name[: data[0].name.index(".data-")]
        raise CheckpointError(f"{directory / prefix}.index: missing (the checkpoint's data file {data[0].name} is here, "
                              f"but not the index that says what it holds)")
    if not indexes:
        raise CheckpointError(
            f"{directory}: no checkpoint (*.index) file; files here: {_listing(directory)}"
        )
    raise CheckpointError(
        f"{directory}: several checkpoints ({', '.join(p.name for p in indexes)}) and no "
        f"'checkpoint' file saying which; pass the prefix, e.g. {indexes[-1].with_suffix('')}"
    )


# --- Hugging Face names -> official names ------------------------------------

_HF_IGNORED = {
    "embeddings.position_ids": "buffer (position ids), not a weight",
    "cls.predictions.decoder.weight": "tied to the word embeddings",
    "cls.predictions.decoder.bias": "same tensor as cls.predictions.bias",
}


_HF_FAMILY_IGNORED = {
    "albert": {
        "predictions.": "ALBERT masked-LM head (not used)",
        "sop_classifier.": "ALBERT sentence-order head (not used)",
    },
    "electra": {
        "discriminator_predictions.": "ELECTRA replaced-token head (not used)",
        "generator_predictions.": "ELECTRA generator head (not used)",
        "generator_lm_head.": "ELECTRA generator head (not used)",
    },
}
# Hugging Face AlbertLayer sub-module -> Google ALBERT name inside inner_group_N/.
_HF_ALBERT_LAYER = {
    "attention.query": "attention_1/self/query",
    "attention.key": "attention_1/self/key",
    "attention.value": "attention_1/self/value",
    "attention.dense": "attention_1/output/dense",
    "attention.LayerNorm": "LayerNorm",
    "ffn": "ffn_1/intermediate/dense",
    "ffn_output": "ffn_1/intermediate/output/dense",
    "full_layer_layer_norm": "LayerNorm_1",
}
_ALBERT_GROUP = re.compile(r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.(.+)\.(weight|bias)$")


def official_name_from_hf(key, family="bert"):
    """Map a Hugging Face tensor name to ``(official_name, transpose, why_ignored)``.

    ``family`` is ``"bert"``, ``"albert"`` or ``"electra"`` (the config's
    ``model_type``). ``official_name`` is None (and ``why_ignored`` says why)
    for tensors that are not encoder variables. ``transpose`` is True for
    ``Linear`` weights, which PyTorch stores ``[out, in]`` and TF ``[in, out]``.
    """
    scope = "electra" if family == "electra" else "bert"
    name = key
    for prefix in ("bert.", "albert.", "electra."):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    if name in _HF_IGNORED:
        return None, False, _HF_IGNORED[name]
    for prefix, why in _HF_FAMILY_IGNORED.get(family, {}).items():
        if name.startswith(prefix):
            return None, False, why
    if family == "albert":
        match = _ALBERT_GROUP.match(name)
        if match:
            group, inner, module, kind = match.groups()
            if module not in _HF_ALBERT_LAYER:
                return None, False, "not an ALBERT encoder tensor"
            target = _HF_ALBERT_LAYER[module]
            is_norm = target.startswith("LayerNorm")
            leaf = {"weight": "gamma" if is_norm else "kernel", "bias": "beta" if is_norm else "bias"}[kind]
            official = f"bert/encoder/transformer/group_{group}/inner_group_{inner}/{target}/{leaf}"
            return official, kind == "weight" and not is_norm, None
        if name in ("pooler.weight", "pooler.bias"):  # AlbertModel.pooler is a bare Linear
            leaf = "kernel" if name.endswith("weight") else "bias"
            return f"bert/pooler/dense/{leaf}", leaf == "kernel", None
    if name.startswith("cls.seq_relationship."):
        leaf = "output_weights" if name.endswith("weight") else "output_bias"
        return f"cls/seq_relationship/{leaf}", False, None
    if name == "cls.predictions.bias":
        return "cls/predictions/output_bias", False, None
    parts = name.split(".")
    known = ("embeddings", "encoder", "pooler", "cls") + (("embeddings_project",) if family == "electra" else ())
    if parts[0] not in known:
        return None, False, f"not a {family.upper()} encoder tensor"
    path = []
    i = 0
    while i < len(parts) - 1:
        if parts[i] == "layer" and parts[i + 1].isdigit():
            path.append(f"layer_{parts[i + 1]}")
            i += 2
        else:
            path.append(parts[i])
            i += 1
    leaf = parts[-1]
    transpose = False
    if path[-1] == "LayerNorm":
        leaf = {"weight": "gamma", "bias": "beta"}.get(leaf, leaf)
    elif path[0] == "embeddings" and leaf == "weight":
        leaf = None  # embedding tables keep their [vocab, hidden] layout
    elif leaf == "weight":
        leaf, transpose = "kernel", True
    prefix = [] if path[0] == "cls" else [scope]
    official = "/".join(prefix + path + ([leaf] if leaf else []))
    return official, transpose, None


# =============================================================================
# Writing
# =============================================================================

# The config file each family's official release names (matched by OFFICIAL_CONFIG_NAMES).
OFFICIAL_CONFIG_FILE = {
    "bert": "bert_config.json",
    "albert": "albert_config.json",
    "albert_brightmart": "albert_config.json",
    "electra": "discriminator_config.json",
}


def write_official_checkpoint(directory, variables, config, vocab, prefix_name="bert_model.ckpt"):
    """Write an official-layout folder: the family's config file
    (:data:`OFFICIAL_CONFIG_FILE`), ``vocab.txt``, ``checkpoint`` and
    ``<prefix_name>.index/.data-00000-of-00001``.

    ``variables`` maps official names to numpy arrays. Atomic
    (:func:`kerasbert.files.atomic.atomic_write_dir`, ``exists="merge"``): everything
    is written into a staging folder and then moved into place file by file,
    the ``.index`` (what readers open first) last, so an interrupted write
    never leaves a readable half-checkpoint.
    """
    import tensorflow as tf

    from kerasbert.files.atomic import atomic_write_dir

    def write(staging):
        names = sorted(variables)
        tf.raw_ops.SaveV2(
            prefix=str(staging / prefix_name),
            tensor_names=names,
            shape_and_slices=[""] * len(names),
            tensors=[tf.constant(variables[n]) for n in names],
        )
        (staging / OFFICIAL_CONFIG_FILE[config.family]).write_text(
            json.dumps(config.to_official_dict(), indent=2) + "\n", encoding="utf-8"
        )
        (staging / VOCAB_NAME).write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
        (staging / "checkpoint").write_text(
            f'model_checkpoint_path: "{prefix_name}"\n'
            f'all_model_checkpoint_paths: "{prefix_name}"\n',
            encoding="utf-8",
        )

    directory = Path(directory)
    atomic_write_dir(directory, write, exists="merge", last=(".index",))
    return directory / prefix_name
