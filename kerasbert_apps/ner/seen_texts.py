"""The texts ``ner select`` has seen, as 64-bit hashes: how it skips a text it met before
in a pool of millions without keeping the texts."""

import hashlib

import numpy as np


def text_hash(text):
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class SeenTexts:
    """The texts seen so far, as 64-bit hashes: a sorted ``uint64`` array
    (8 bytes per distinct text) and a small set of the latest ones, merged
    into the array every ``merge_every`` texts. ``add(text)`` says whether
    the text is new."""

    def __init__(self, merge_every=4096):
        self.sorted = np.zeros(0, np.uint64)
        self.recent = set()
        self.merge_every = int(merge_every)

    def add(self, text):
        digest = text_hash(text)
        if digest in self.recent:
            return False
        at = int(np.searchsorted(self.sorted, np.uint64(digest)))
        if at < len(self.sorted) and int(self.sorted[at]) == digest:
            return False
        self.recent.add(digest)
        if len(self.recent) >= self.merge_every:
            merged = np.concatenate([self.sorted, np.fromiter(self.recent, np.uint64, len(self.recent))])
            merged.sort()
            self.sorted = merged
            self.recent = set()
        return True

    def __len__(self):
        return len(self.sorted) + len(self.recent)
