import logging

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import kerasbert
from kerasbert.training.batching import padded_length
from kerasbert.tokenizers.tokenizer import BertTokenizer
from kerasbert.tokenizers.tokenizer import guess_lowercase


@pytest.fixture(scope="module")
def reference(minilm_dir):
    return np.load(minilm_dir / "reference_outputs.npz")


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    return kerasbert.load_tokenizer(minilm_dir)


def test_matches_reference_ids_offsets_and_mask(tokenizer, reference):
    batch = tokenizer(list(reference["sentences"]))
    width = batch.token_ids.shape[1]
    assert batch.token_ids.dtype == np.int32 and batch.offsets.dtype == np.int32
    np.testing.assert_array_equal(batch.token_ids, reference["input_ids"][:, :width])
    np.testing.assert_array_equal(batch.offsets, reference["offsets"][:, :width])
    np.testing.assert_array_equal(batch.padding_mask, reference["attention_mask"][:, :width])
    np.testing.assert_array_equal(batch.segment_ids, reference["token_type_ids"][:, :width])
    # The reference pads with zeros past our width: nothing was lost.
    assert not reference["attention_mask"][:, width:].any()
    assert not batch.truncated.any()


def test_lowercase_is_decided_from_the_checkpoint(tokenizer, minilm_dir):
    assert tokenizer.lowercase is True  # "uncased" in the folder name
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "Hello", "hello"] + [f"W{i}" for i in range(50)]
    assert guess_lowercase(minilm_dir.parent / "some_model", vocab) is False  # many capitals
    assert guess_lowercase(minilm_dir.parent / "chinese_L-12_H-768_A-12", ["[PAD]", "的", "a"]) is True
    assert guess_lowercase(minilm_dir.parent / "cased_L-12_H-768_A-12", ["[PAD]", "a"]) is False


def test_lowercase_override_keeps_case_and_accents():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Café", "café", "cafe"]
    cased = BertTokenizer(vocab, lowercase=False)
    uncased = BertTokenizer(vocab, lowercase=True)
    assert cased.tokenize("Café") == ["Café"]
    assert uncased.tokenize("Café") == ["cafe"]


def test_literal_special_tokens_are_plain_text(tokenizer):
    batch = tokenizer(["[CLS] [SEP] [MASK]"])
    ids = batch.token_ids[0][batch.padding_mask[0].astype(bool)]
    assert list(ids).count(tokenizer.cls_id) == 1 and ids[0] == tokenizer.cls_id
    assert list(ids).count(tokenizer.sep_id) == 1 and ids[-1] == tokenizer.sep_id
    assert tokenizer.mask_id not in ids
    assert tokenizer.tokenize("[MASK]") == ["[", "mask", "]"]


def test_bert_semantics_control_cjk_punctuation_and_long_words(tokenizer):
    assert tokenizer.tokenize("a\x00b\x07c") == tokenizer.tokenize("abc")  # control chars dropped
    assert tokenizer.tokenize("北京") == ["北", "京"]  # one token per CJK character
    assert tokenizer.tokenize("hi!!") == ["hi", "!", "!"]
    # Google's layout: its tokenization.py splits words of up to 200 characters
    assert tokenizer.max_chars_per_word == 200
    assert tokenizer.tokenize("x" * 201) == ["[UNK]"]
    assert tokenizer.tokenize("x" * 200) != ["[UNK]"]


def test_special_tokens_and_padding_have_zero_offsets(tokenizer):
    batch = tokenizer(["a", "a much longer sentence here"])
    assert batch.offsets[0, 0].tolist() == [0, 0]  # [CLS]
    assert batch.offsets[0, 2].tolist() == [0, 0]  # [SEP]
    assert not batch.offsets[0, 3:].any()  # padding
    assert batch.offsets[0, 1].tolist() == [0, 1]


def test_truncation_is_flagged_and_logged(tokenizer, caplog):
    with caplog.at_level(logging.WARNING, logger="kerasbert"):
        batch = tokenizer(["one two three four five six", "one"], max_length=5)
    assert batch.truncated.tolist() == [True, False]
    assert batch.token_ids.shape == (2, 5)
    assert batch.token_ids[0, -1] == tokenizer.sep_id
    assert "1 of 2 inputs" in caplog.text
    # The cut applies to that call only.
    assert len(tokenizer.tokenize("one two three four five six")) == 6


def test_sentence_pairs_get_segment_ids_and_own_offsets(tokenizer):
    batch = tokenizer(["hello world"], pairs=["good day"])
    tokens = [tokenizer.id_to_token(i) for i in batch.token_ids[0]]
    assert tokens == ["[CLS]", "hello", "world", "[SEP]", "good", "day", "[SEP]"]
    assert batch.segment_ids[0].tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert batch.offsets[0, 4].tolist() == [0, 4]  # offsets into the second text


def test_pretokenized_words_map_tokens_to_words(tokenizer):
    batch = tokenizer([["Peter", "Blackburn", "!"], ["EU"]], is_split_into_words=True)
    row = batch.word_ids[0][batch.padding_mask[0].astype(bool)]
    assert row[0] == -1 and row[-1] == -1
    assert sorted(set(row[1:-1].tolist())) == [0, 1, 2]
    assert np.all(np.diff(row[1:-1]) >= 0)
    assert batch.word_ids[1].tolist()[:3] == [-1, 0, -1]


def test_padding_to_max_length(tokenizer):
    batch = tokenizer(["a"], max_length=16, padding="max_length")
    assert batch.token_ids.shape == (1, 16)
    assert batch.padding_mask.sum() == 3


def test_pieces_are_the_whole_texts_unpadded_without_specials(tokenizer):
    texts = ["Hello, World!", "", "naïve café " * 400]
    batch = tokenizer(texts, max_length=100000)
    pieces = tokenizer.pieces(texts)
    assert len(pieces) == 3
    for i, (ids, offsets) in enumerate(pieces):
        n = int(batch.padding_mask[i].sum())
        assert ids.dtype == np.int32 and offsets.dtype == np.int32 and offsets.shape == (len(ids), 2)
        np.testing.assert_array_equal(ids, batch.token_ids[i, 1 : n - 1])
        np.testing.assert_array_equal(offsets, batch.offsets[i, 1 : n - 1])
    assert len(pieces[1][0]) == 0 and len(pieces[2][0]) == 800  # nothing cut at max_length (512)


@pytest.mark.parametrize("n, cap, expected", [(1, None, 8), (8, None, 8), (9, None, 16), (9, 12, 12), (13, 12, 13), (120, 128, 120), (121, 128, 128)])
def test_padded_length_rounds_to_multiples_of_8_within_the_cap(n, cap, expected):
    assert padded_length(n, 8, cap) == expected


def _check_offsets(tokenizer, text):
    batch = tokenizer([text], max_length=100000)
    n = int(batch.padding_mask[0].sum())
    ids, offsets = batch.token_ids[0, :n], batch.offsets[0, :n]
    starts, ends = offsets[1:-1, 0], offsets[1:-1, 1]
    assert np.all(starts <= ends)
    assert np.all((starts >= 0) & (ends <= len(text)))
    assert np.all(np.diff(starts) >= 0) and np.all(np.diff(ends) >= 0)
    # Tokens that share one span came from the same original character(s):
    # their pieces, joined, are that span as the tokenizer normalizes it.
    groups = {}
    for token_id, (start, end) in zip(ids[1:-1], offsets[1:-1]):
        groups.setdefault((int(start), int(end)), []).append(tokenizer.id_to_token(int(token_id)))
    for (start, end), pieces in groups.items():
        if "[UNK]" in pieces:
            continue
        joined = "".join(p[2:] if p.startswith("##") else p for p in pieces)
        assert tokenizer.normalize(text[start:end]).strip() == joined, (text, start, end, pieces)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_offsets_property_random_unicode(tokenizer, text):
    _check_offsets(tokenizer, text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcÉéü北京 \t\n,.!-'😀\u0301\u200b\x00")), max_size=40))
def test_offsets_property_tricky_alphabet(tokenizer, text):
    _check_offsets(tokenizer, text)
