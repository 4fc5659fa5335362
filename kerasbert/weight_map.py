"""The one name map between Keras weights and checkpoint variables.

:func:`bert_weight_map` returns a dict, Keras variable path -> (official
checkpoint name, official shape). It is the whole mapping; both directions use
it:

* :func:`load_weights` reads each official name from a
  :class:`~kerasbert.checkpoint.CheckpointFolder` and assigns it (reshaped) to the
  Keras variable;
* :func:`collect_variables` reads each Keras variable and reshapes it back to
  the official shape, for :func:`kerasbert.checkpoint.write_official_checkpoint`.

The only transformation is a reshape (keras-hub splits attention kernels per
head: ``[hidden, heads, head_size]``), which is exact both ways, so official ->
Keras -> official round-trips every value bit for bit.
"""

import numpy as np

from kerasbert.checkpoint import is_training_state
from kerasbert.errors import CheckpointError


def bert_weight_map(config, masked_lm_head=False):
    """Keras variable path -> (official name, official shape) for a BERT encoder
    (and its masked-LM head when ``masked_lm_head``)."""
    V, H, I = config.vocab_size, config.hidden_size, config.intermediate_size
    P, S = config.max_position_embeddings, config.type_vocab_size
    m = {
        "token_embedding/embeddings": ("bert/embeddings/word_embeddings", (V, H)),
        "position_embedding/embeddings": ("bert/embeddings/position_embeddings", (P, H)),
        "segment_embedding/embeddings": ("bert/embeddings/token_type_embeddings", (S, H)),
        "embeddings_layer_norm/gamma": ("bert/embeddings/LayerNorm/gamma", (H,)),
        "embeddings_layer_norm/beta": ("bert/embeddings/LayerNorm/beta", (H,)),
        "pooled_dense/kernel": ("bert/pooler/dense/kernel", (H, H)),
        "pooled_dense/bias": ("bert/pooler/dense/bias", (H,)),
    }
    for i in range(config.num_layers):
        k, c = f"transformer_layer_{i}/", f"bert/encoder/layer_{i}/"
        for part in ("query", "key", "value"):
            m[f"{k}self_attention_layer/{part}/kernel"] = (f"{c}attention/self/{part}/kernel", (H, H))
            m[f"{k}self_attention_layer/{part}/bias"] = (f"{c}attention/self/{part}/bias", (H,))
        m.update(
            {
                f"{k}self_attention_layer/attention_output/kernel": (f"{c}attention/output/dense/kernel", (H, H)),
                f"{k}self_attention_layer/attention_output/bias": (f"{c}attention/output/dense/bias", (H,)),
                f"{k}self_attention_layer_norm/gamma": (f"{c}attention/output/LayerNorm/gamma", (H,)),
                f"{k}self_attention_layer_norm/beta": (f"{c}attention/output/LayerNorm/beta", (H,)),
                f"{k}feedforward_intermediate_dense/kernel": (f"{c}intermediate/dense/kernel", (H, I)),
                f"{k}feedforward_intermediate_dense/bias": (f"{c}intermediate/dense/bias", (I,)),
                f"{k}feedforward_output_dense/kernel": (f"{c}output/dense/kernel", (I, H)),
                f"{k}feedforward_output_dense/bias": (f"{c}output/dense/bias", (H,)),
                f"{k}feedforward_layer_norm/gamma": (f"{c}output/LayerNorm/gamma", (H,)),
                f"{k}feedforward_layer_norm/beta": (f"{c}output/LayerNorm/beta", (H,)),
            }
        )
    if masked_lm_head:
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
    "cls/predictions/": "masked-LM head (used by load_masked_lm)",
    "cls/seq_relationship/": "next-sentence head (not used)",
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
                f"{folder.config_path.name} ({len(self.missing)} missing, "
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
