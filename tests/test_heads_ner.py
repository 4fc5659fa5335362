"""The head contract (:mod:`kerasbert_apps.testing`, the module every head's tests use) over the
kit's own NER heads, and the registry's rules for names."""

import dataclasses

import pytest

from kerasbert.errors import KerasbertError
from kerasbert_apps.base import heads
from kerasbert_apps.testing import HeadContract
from kerasbert_apps.testing import kit_heads


class TestNerHeads(HeadContract):
    heads = kit_heads("ner")


def test_the_registry_names_the_choices_and_registers_a_name_once():
    """The default head first; an unknown head is a one-line error naming the choices; a name is
    registered once per task (the same head again is a no-op). That listing the heads imports no
    model code is the contract's check."""
    assert heads.names("ner")[:4] == ("crf", "softmax", "global-pointer", "biaffine")  # the default first
    assert heads.names("triples")[:2] == ("casrel", "gplinker")
    with pytest.raises(KerasbertError, match=r"^unknown ner head 'nope'; the heads are: crf, softmax, global-pointer"):
        heads.get("ner", "nope")
    with pytest.raises(KerasbertError, match="already registered"):
        heads.register(dataclasses.replace(heads.get("ner", "crf"), help="another"))
    assert heads.register(heads.get("ner", "crf")) is heads.get("ner", "crf")  # the same head again: a no-op
