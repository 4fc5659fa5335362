"""Counted reports: nothing is dropped, repaired or skipped without a count.

Every reader and every feature builder returns a report next to its result,
and callers print ``report.summary()``. A report is a dataclass of counts
(ints, or dicts of ints by reason / type / key, lists of locations) that
declares how each count reads in :attr:`Report.LINES`; :meth:`Report.summary`
prints a headline and one line per count that is set, in that order. So a
new counter is one field and one line of text, and every report prints the
same way.
"""

import dataclasses

#: How many ``file:line`` locations a report keeps per kind of problem.
MAX_LOCATIONS = 5


class _Field:
    """A report value in a template: ``{report.x:items}`` joins a dict as
    ``"A 3, B 1"`` (sorted) or a list with ``", "``; otherwise it formats
    as the value itself (``!r`` included)."""

    def __init__(self, value):
        self.value = value

    def __format__(self, spec):
        if spec == "items":
            if isinstance(self.value, dict):
                return ", ".join(f"{k} {n}" for k, n in sorted(self.value.items()))
            return ", ".join(map(str, self.value))
        return format(self.value, spec)

    def __str__(self):
        return str(self.value)

    def __repr__(self):
        return repr(self.value)


class _Fields:
    def __init__(self, report):
        self._report = report

    def __getattr__(self, name):
        return _Field(getattr(self._report, name))


def _is_set(value):
    if value is None or value is False:
        return False
    if isinstance(value, (dict, list, tuple)):
        return bool(value)
    if isinstance(value, (int, float)):
        return value != 0
    return True  # strings, even "", are set


@dataclasses.dataclass
class Report:
    """Base class of the readers' and feature builders' reports.

    Subclasses are dataclasses; they write :meth:`headline` and list
    ``(attribute, template)`` pairs in ``LINES``. A line is printed when its
    attribute is set (not None, 0, False or empty; an empty string is set).
    A template is formatted with ``report`` (the report's fields, see
    ``{report.x:items}`` above) and ``n`` (the attribute's value); for a dict
    attribute whose template has ``{key}``, once per key (sorted) with
    ``key`` and ``n`` its count; for a list attribute whose template has
    ``{key}``, once per item.
    """

    LINES = ()

    def headline(self):
        raise NotImplementedError

    def summary(self):
        """Multi-line human-readable account, meant to be printed by callers."""
        fields = _Fields(self)
        lines = [self.headline()]
        for name, template in self.LINES:
            value = getattr(self, name)
            if not _is_set(value):
                continue
            if isinstance(value, dict) and "{key" in template:
                lines += [template.format(key=key, n=n, report=fields) for key, n in sorted(value.items())]
            elif isinstance(value, list) and "{key" in template:
                lines += [template.format(key=item, n=1, report=fields) for item in value]
            else:
                lines.append(template.format(n=_Field(value), report=fields))
        return "\n".join(lines)

    def count(self, name, key=None, n=1):
        """Add ``n`` to count ``name`` (to its entry ``key`` for a dict count)."""
        if key is None:
            setattr(self, name, getattr(self, name) + n)
        else:
            counts = getattr(self, name)
            counts[key] = counts.get(key, 0) + n

    def locate(self, name, location):
        """Remember ``location`` in list ``name`` (at most :data:`MAX_LOCATIONS`)."""
        locations = getattr(self, name)
        if len(locations) < MAX_LOCATIONS:
            locations.append(location)


@dataclasses.dataclass
class FeatureReport(Report):
    """What turning examples into training rows did; apps add their counts.
    Every app's report also counts the text's tokens and those the
    checkpoint's vocabulary knows only as ``[UNK]``; from
    :attr:`UNKNOWN_SHARE` of them, its summary ends with a line saying the
    vocabulary does not cover the text, and what to use instead."""

    examples: int = 0
    windows: int = 0
    tokens: int = 0
    unknown_tokens: int = 0

    #: The share of ``[UNK]`` tokens from which the summary says the vocabulary does not cover the text.
    UNKNOWN_SHARE = 0.05

    def summary(self):
        text = super().summary()
        if self.tokens and self.unknown_tokens >= self.UNKNOWN_SHARE * self.tokens:
            text += (f"\n  {self.unknown_tokens} of {self.tokens} tokens ({self.unknown_tokens / self.tokens:.0%}) are "
                     "[UNK]: the checkpoint's vocabulary does not cover this text (as the English starter's does not "
                     "cover Chinese); use a checkpoint of the text's language (for Chinese: Chinese BERT-wwm, "
                     "RoBERTa-wwm-ext), or pretrain one on your text (kerasbert pretrain --from-scratch)")
        return text
