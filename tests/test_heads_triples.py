"""The head contract (:mod:`kerasbert_apps.testing`) over the kit's own triples heads."""

from kerasbert_apps.testing import HeadContract
from kerasbert_apps.testing import kit_heads


class TestTriplesHeads(HeadContract):
    heads = kit_heads("triples")
