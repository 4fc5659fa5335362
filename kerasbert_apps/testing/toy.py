"""The contract's toy world: a vocabulary of ten words, sentences and records of them, the texts
every check predicts, and a tiny random BERT checkpoint in Google's layout."""

import random
from pathlib import Path

import numpy as np

#: The toy vocabulary's words; the data and texts are made of them.
WORDS = "all work and no play makes jack a dull boy".split()
#: The tiny checkpoint's vocabulary.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
#: Tokens per window: every longer text goes through the window merge.
MAX_LENGTH = 16


def toy_sentences(n, seed):
    """``n`` random sentences (lists of words) of :data:`WORDS`, each with
    ``jack likes dull boy`` or ``dull jack`` in it."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 20))]
        at = rng.randrange(len(words))
        words[at:at] = ["jack", "likes", "dull", "boy"] if rng.random() < 0.6 else ["dull", "jack"]
        out.append(words)
    return out


def ner_record(words):
    """An NER record of ``words``: ``jack`` is a PER, ``dull X`` a THING
    (``dull jack`` nests a PER)."""
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]]).tolist()
    entities = []
    for i, word in enumerate(words):
        if word == "jack":
            entities.append({"start": starts[i], "end": starts[i] + 4, "type": "PER"})
        if word == "dull" and i + 1 < len(words):
            entities.append({"start": starts[i], "end": starts[i + 1] + len(words[i + 1]), "type": "THING"})
    return {"text": " ".join(words), "entities": entities}


def triples_record(words):
    """A triples record of ``words``: ``jack likes dull boy`` holds (jack,
    likes, dull boy); ``dull jack`` holds (jack, is, dull)."""
    text = " ".join(words)
    triples = []
    if "jack likes dull boy" in text:
        triples.append(["jack", "likes", "dull boy"])
    if "dull jack" in text:
        triples.append(["jack", "is", "dull"])
    return {"text": text, "triple_list": triples}


def toy_records(task, n, seed):
    """``n`` records of ``task`` (``"ner"`` or ``"triples"``, the kit's own
    JSON lines) of random toy sentences."""
    record = ner_record if task == "ner" else triples_record
    return [record(words) for words in toy_sentences(n, seed)]


#: The texts every check predicts: toy sentences, a long one (many
#: windows), empty and blank ones, emoji and characters the vocabulary lacks.
TEXTS = [" ".join(w) for w in toy_sentences(24, 9)] + [
    " ".join(random.Random(5).choice(WORDS) for _ in range(120)), "", "   ", "😀 jack 🎉", "李白 jack 在北京"]


def tiny_checkpoint(folder, seed=0):
    """Write a tiny random BERT (2 layers, hidden size 8, 16 positions, the
    15 tokens of :data:`VOCAB`) into ``folder`` in Google's layout
    (``bert_config.json``, ``bert_model.ckpt.*``, ``vocab.txt``), as every
    checkpoint loader of the kit reads it; returns ``folder``."""
    import keras

    from kerasbert.checkpoints.loader import save_encoder
    from kerasbert.models.encoder import BertEncoder

    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
                          max_sequence_length=MAX_LENGTH)
    save_encoder(encoder, folder, VOCAB)
    return Path(folder)
