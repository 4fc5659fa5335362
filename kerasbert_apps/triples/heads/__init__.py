"""The triple heads, one folder each; importing a folder registers its head
(:mod:`kerasbert_apps.base.heads`). A new head is a new folder here.

:func:`check_thresholds` is the rule every head's thresholds follow: set only
under that head, each ``auto`` (tuned on dev at the end of training:
:meth:`kerasbert_apps.triples.pipeline.TriplePipeline.after_training`) or a
probability in its range; :func:`auto_or_probability` is their settings type."""

import dataclasses

from kerasbert.errors import KerasbertError
from kerasbert.training.settings import auto_or

#: The ``--head`` choices' order of the kit's triple head folders (the first,
#: ``casrel``, is the default); other folders follow by name.
ORDER = ("casrel", "gplinker")


#: A settings ``type``: ``"auto"`` or a number (a probability; its range is
#: the head's, :func:`check_thresholds`).
auto_or_probability = auto_or(float, "a probability")


def check_thresholds(settings, head, low_open):
    """Check ``head``'s ``threshold_<option>`` settings: each ``auto`` or in
    ``[0, 1)`` (``(0, 1)`` with ``low_open``), and left at its default
    unless ``head`` is the run's head (the error names the run's head's own
    options)."""
    from kerasbert_apps.base.heads import get

    keys = [f"threshold_{name}" for name, _ in head.options]
    defaults = {f.name: f.default for f in dataclasses.fields(head.settings)}
    for key in keys:
        value = getattr(settings, key)
        if value != "auto" and not (0.0 < value < 1.0 if low_open else 0.0 <= value < 1.0):
            raise KerasbertError(f"{key} must be auto or in {'(0, 1)' if low_open else '[0, 1)'}, got {value}")
    if settings.head != head.name and any(getattr(settings, key) != defaults[key] for key in keys):
        own = get(head.task, settings.head).options
        theirs = "/".join(f"--threshold-{name}" for name, _ in own) if own else "none"
        raise KerasbertError(f"{'/'.join('--' + k.replace('_', '-') for k in keys)} are the {head.name} head's; "
                             f"the {settings.head} head's are {theirs}")
