"""What every app's scoring shares: precision, recall and F1 from counts, and
the fields of a gold item or a prediction (an object or its dict)."""


def prf(correct, predicted, gold, counts=True):
    """``{"precision", "recall", "f1"}`` of ``correct`` out of ``predicted``
    predictions and ``gold`` gold items (0 where undefined); with ``counts``
    the three counts too."""
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    figures = {"precision": precision, "recall": recall, "f1": f1}
    if counts:
        figures.update(correct=correct, predicted=predicted, gold=gold)
    return figures


def field(item, key):
    """``item[key]`` for a dict (a prediction), ``item.key`` otherwise (an example's entity)."""
    return item[key] if isinstance(item, dict) else getattr(item, key)
