"""The one name map between Keras weights and checkpoint variables.

:func:`weight_map` returns a dict, Keras variable path -> (official checkpoint
name, official shape), for any encoder family. It is the whole mapping; both
directions use it:

* :func:`load_weights` reads each official name from a
  :class:`~kerasbert.checkpoints.checkpoint.CheckpointFolder` and assigns it (reshaped) to the
  Keras variable;
* :func:`collect_variables` reads each Keras variable and reshapes it back to
  the official shape, for :func:`kerasbert.checkpoints.checkpoint.write_official_checkpoint`.

"Official" names are the TF1 names of each family's original release: Google
BERT (``bert/encoder/layer_0/...``), Google ALBERT
(``bert/encoder/transformer/group_0/inner_group_0/attention_1/...``),
brightmart albert_zh (``bert/encoder/layer_shared/...``) and Google ELECTRA
(``electra/encoder/layer_0/...``). Hugging Face names are translated to these
by :mod:`kerasbert.checkpoints.checkpoint`.

The only transformation is a reshape (keras-hub splits attention kernels per
head: ``[hidden, heads, head_size]``), which is exact both ways, so official ->
Keras -> official round-trips every value bit for bit.
"""

import numpy as np

from kerasbert.checkpoints.checkpoint import is_training_state
from kerasbert.errors import CheckpointError

# One transformer layer: Keras path inside a keras-hub TransformerEncoder ->
# (name suffix in BERT / ELECTRA / brightmart checkpoints, name suffix in
# Google ALBERT checkpoints, shape).
TRANSFORMER_LAYER = {
    "self_attention_layer/query/kernel": ("attention/self/query/kernel", "attention_1/self/query/kernel", "HH"),
    "self_attention_layer/query/bias": ("attention/self/query/bias", "attention_1/self/query/bias", "H"),
    "self_attention_layer/key/kernel": ("attention/self/key/kernel", "attention_1/self/key/kernel", "HH"),
    "self_attention_layer/key/bias": ("attention/self/key/bias", "attention_1/self/key/bias", "H"),
    "self_attention_layer/value/kernel": ("attention/self/value/kernel", "attention_1/self/value/kernel", "HH"),
    "self_attention_layer/value/bias": ("attention/self/value/bias", "attention_1/self/value/bias", "H"),
    "self_attention_layer/attention_output/kernel": ("attention/output/dense/kernel", "attention_1/output/dense/kernel", "HH"),
    "self_attention_layer/attention_output/bias": ("attention/output/dense/bias", "attention_1/output/dense/bias", "H"),
    "self_attention_layer_norm/gamma": ("attention/output/LayerNorm/gamma", "LayerNorm/gamma", "H"),
    "self_attention_layer_norm/beta": ("attention/output/LayerNorm/beta", "LayerNorm/beta", "H"),
    "feedforward_intermediate_dense/kernel": ("intermediate/dense/kernel", "ffn_1/intermediate/dense/kernel", "HI"),
    "feedforward_intermediate_dense/bias": ("intermediate/dense/bias", "ffn_1/intermediate/dense/bias", "I"),
    "feedforward_output_dense/kernel": ("output/dense/kernel", "ffn_1/intermediate/output/dense/kernel", "IH"),
    "feedforward_output_dense/bias": ("output/dense/bias", "ffn_1/intermediate/output/dense/bias", "H"),
    "feedforward_layer_norm/gamma": ("output/LayerNorm/gamma", "LayerNorm_1/gamma", "H"),
    "feedforward_layer_norm/beta": ("output/LayerNorm/beta", "LayerNorm_1/beta", "H"),
}


def weight_map(config, masked_lm_head=False):
    """Keras variable path -> (official name, official shape) for the encoder
    of ``config.family`` (and, for BERT, its masked-LM head when
    ``masked_lm_head``)."""
    V, H, I, E = config.vocab_size, config.hidden_size, config.intermediate_size, config.embedding_size
    P, S = config.max_position_embeddings, config.type_vocab_size
    family = config.family
    scope = "electra" if family == "electra" else "bert"
    # Width of position/segment embeddings and their LayerNorm.
    W = H if family in ("bert", "albert_brightmart") else E
    e = f"{scope}/embeddings/"
    m = {
        "token_embedding/embeddings": (e + "word_embeddings", (V, E)),
        "position_embedding/embeddings": (e + "position_embeddings", (P, W)),
        "segment_embedding/embeddings": (e + "token_type_embeddings", (S, W)),
        "embeddings_layer_norm/gamma": (e + "LayerNorm/gamma", (W,)),
        "embeddings_layer_norm/beta": (e + "LayerNorm/beta", (W,)),
    }
    if family == "albert":
        m["embedding_projection/kernel"] = ("bert/encoder/embedding_hidden_mapping_in/kernel", (E, H))
        m["embedding_projection/bias"] = ("bert/encoder/embedding_hidden_mapping_in/bias", (H,))
    elif family == "albert_brightmart":
        m["embedding_projection/kernel"] = ("bert/embeddings/word_embeddings_2", (E, H))
    elif family == "electra" and E != H:
        m["embedding_projection/kernel"] = ("electra/embeddings_project/kernel", (E, H))
        m["embedding_projection/bias"] = ("electra/embeddings_project/bias", (H,))
    if family != "electra":
        m["pooled_dense/kernel"] = ("bert/pooler/dense/kernel", (H, H))
        m["pooled_dense/bias"] = ("bert/pooler/dense/bias", (H,))

    # Keras layer name -> official name prefix, and which suffix column.
    if family == "albert":
        layers = {
            f"group_{g}_inner_layer_{j}": f"bert/encoder/transformer/group_{g}/inner_group_{j}/"
            for g in range(config.num_hidden_groups)
            for j in range(config.inner_group_num)
        }
    elif family == "albert_brightmart":
        layers = {"group_0_inner_layer_0": "bert/encoder/layer_shared/"}
    else:
        layers = {f"transformer_layer_{i}": f"{scope}/encoder/layer_{i}/" for i in range(config.num_layers)}
    column = 1 if family == "albert" else 0
    dims = {"H": H, "I": I}
    for keras_name, prefix in layers.items():
        for path, row in TRANSFORMER_LAYER.items():
            m[f"{keras_name}/{path}"] = (prefix + row[column], tuple(dims[d] for d in row[2]))

    if masked_lm_head:
        if family != "bert":
            raise CheckpointError(f"the masked-LM head is supported for BERT checkpoints only, not {family}")
        m.update(
            {
                "masked_lm_head/intermediate_dense/kernel": ("cls/predictions/transform/dense/kernel", (H, H)),
                "masked_lm_head/intermediate_dense/bias": ("cls/predictions/transform/dense/bias", (H,)),
                "masked_lm_head/intermediate_layer_norm/gamma": ("cls/predictions/transform/LayerNorm/gamma", (H,)),
                "masked_lm_head/intermediate_layer_norm/beta": ("cls/predictions/transform/LayerNorm/beta", (H,)),
                "masked_lm_head/output_bias": ("cls/predictions/output_bias", (V,)),
            }
        )
    return m


# Names a checkpoint may hold that the encoder does not use (reported, never an error).
OPTIONAL_HEADS = {
    "cls/predictions/": "masked-LM head (used by load_masked_lm, BERT only)",
    "cls/seq_relationship/": "next-sentence / sentence-order head (not used)",
    "generator/": "ELECTRA generator (not used; the discriminator is the encoder)",
    "generator_predictions/": "ELECTRA generator head (not used)",
    "discriminator_predictions/": "ELECTRA replaced-token head (not used)",
}


def optional_head(name):
    for prefix, why in OPTIONAL_HEADS.items():
        if name.startswith(prefix):
            return why
    return None


class MappingReport:
    """Which checkpoint variable goes where, and what did not fit.

    Attributes:
        assigned: list of (keras path, official name, stored name, shape).
        ignored: dict name -> reason (optimizer slots, optional heads, ...).
        missing: official names the model needs that the checkpoint lacks.
        unexpected: checkpoint names that are neither used nor known extras.
        mismatched: list of (official name, expected shape, found shape).
    """

    def __init__(self):
        self.assigned, self.missing, self.unexpected, self.mismatched = [], [], [], []
        self.ignored = {}

    @property
    def ok(self):
        return not (self.missing or self.unexpected or self.mismatched)

    def problems(self):
        lines = []
        for name, shape in self.missing:
            lines.append(f"  missing variable: {name} {list(shape)}")
        for name, shape in self.unexpected:
            lines.append(f"  unexpected variable: {name} {list(shape)}")
        for name, expected, found in self.mismatched:
            lines.append(f"  shape mismatch: {name}: model expects {list(expected)}, checkpoint has {list(found)}")
        return lines

    def raise_if_bad(self, folder):
        if not self.ok:
            raise CheckpointError(
                f"{folder.weights_path}: the checkpoint does not fit the model built from "
                f"{folder.config_source} ({len(self.missing)} missing, "
                f"{len(self.unexpected)} unexpected, {len(self.mismatched)} shape mismatches):\n"
                + "\n".join(self.problems())
            )


def check_mapping(folder, weight_map):
    """Compare a checkpoint's names and shapes with a weight map, reading no values."""
    report = MappingReport()
    report.ignored.update(folder.ignored)
    wanted = {name: shape for name, shape in weight_map.values()}
    paths = {name: path for path, (name, _) in weight_map.items()}
    for name, shape in sorted(wanted.items()):
        found = folder.shapes.get(name)
        if found is None:
            report.missing.append((name, shape))
        elif tuple(found) != tuple(shape):
            report.mismatched.append((name, shape, found))
        else:
            report.assigned.append((paths[name], name, folder.source_name(name), tuple(shape)))
    for name, shape in sorted(folder.shapes.items()):
        if name in wanted or is_training_state(name):
            continue
        why = optional_head(name)
        if why:
            report.ignored[name] = why
        else:
            report.unexpected.append((name, shape))
    return report


def _variables_by_path(model):
    variables = {}
    for v in model.weights:
        variables.setdefault(v.path, v)
    return variables


def load_weights(model, folder, weight_map):
    """Assign every mapped checkpoint variable to ``model``; returns the report.

    All problems (missing, unexpected, mis-shaped variables, unreadable data)
    are raised together in one :class:`CheckpointError`.
    """
    report = check_mapping(folder, weight_map)
    report.raise_if_bad(folder)
    variables = _variables_by_path(model)
    absent = [path for path in weight_map if path not in variables]
    if absent:
        raise CheckpointError(
            "the Keras model has no weight(s) " + ", ".join(absent) + " (a kerasbert bug: the weight map does not fit the model)"
        )
    for path, (name, _) in weight_map.items():
        variable = variables[path]
        value = folder.read(name)
        variable.assign(np.reshape(value, variable.shape).astype(variable.dtype))
    return report


def collect_variables(model, weight_map):
    """Official name -> numpy value (official shape) for every mapped weight."""
    variables = _variables_by_path(model)
    out = {}
    for path, (name, shape) in weight_map.items():
        value = np.asarray(variables[path].numpy())
        out[name] = np.reshape(value, shape)
    return out
