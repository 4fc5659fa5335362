"""The pointers head: the kit's head contract for it (kerasbert_apps.testing), the kit's layer
harness for its layer (kerasbert.testing), and its decoding rule."""

import numpy as np

from kerasbert.testing import run_layer_test
from kerasbert_apps.testing import HeadContract


class TestPointersHead(HeadContract):
    heads = [("ner", "pointers")]


def test_an_entity_runs_from_a_start_to_the_nearest_end_of_its_type():
    """span_logits against a brute-force reading of the rule, on random pointers."""
    from kerasbert_pointers.model import span_logits

    rng = np.random.default_rng(0)
    start, end = rng.normal(0, 1, (2, 3, 9, 2)).astype("float32")
    mask = np.ones((3, 9), "int32")
    mask[1, 6:] = 0
    logits = np.asarray(span_logits(start, end, mask))
    found = {tuple(x) for x in np.argwhere(logits > 0)}
    expected = set()
    for b, i, t in zip(*np.nonzero(start > 0)):
        later = [j for j in range(i, 9) if end[b, j, t] > 0 and mask[b, j]]
        if mask[b, i] and later:
            expected.add((b, i, later[0], t))
    assert found == expected and len(expected) > 5
    for b, i, j, t in expected:
        assert logits[b, i, j, t] == min(start[b, i, t], end[b, j, t])


def test_span_logits_layer_keeps_the_kit_layer_checks():
    """SpanLogits through the kit's layer harness: config, a .keras file, dtype policies (its
    logits are float32 under every policy, as documented), JAX."""
    from kerasbert_pointers.model import SpanLogits

    rng = np.random.default_rng(1)
    start, end = rng.normal(0, 1, (2, 2, 6, 3)).astype("float32")
    mask = (np.arange(6)[None] < np.array([[6], [4]])).astype("int32")
    run_layer_test(SpanLogits, {}, {"start": start, "end": end, "padding_mask": mask}, output_dtype="float32")
