"""What the apps' notebook display helpers (``kerasbert_apps/*/display.py``) share."""


class HTML(str):
    """A string of HTML that Jupyter displays as HTML (``_repr_html_``)."""

    def _repr_html_(self):
        return str(self)


def field(item, key, default=None):
    """``item[key]`` for a dict, ``item.key`` for an object (predictions are
    dicts, gold examples dataclasses)."""
    if isinstance(item, dict):
        return item.get(key, default)
    return getattr(item, key, default)
