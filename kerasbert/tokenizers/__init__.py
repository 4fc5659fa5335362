"""Tokenizers: WordPiece with character offsets into the original text.

``tokenizer`` runs on the host (Python, HF ``tokenizers``); ``graph_tokenizer``
runs the same rules inside a TensorFlow graph, for SavedModels that take raw text.
"""
