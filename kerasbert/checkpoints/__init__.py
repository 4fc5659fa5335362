"""Checkpoints and model folders on disk.

Google's and Hugging Face's checkpoint layouts read into one config (``config``)
and one name map (``weight_map``), their variables read and written
(``checkpoint``), the public entry points that turn a folder into a Keras
encoder or tokenizer (``loader``), and the folders a trained pipeline is saved
to and loaded from (``saving``).
"""
