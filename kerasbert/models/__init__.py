"""Encoders: BERT-family Keras models built from keras-hub layers.

``encoder`` holds the Keras 3 functional models (BERT, ALBERT, ELECTRA),
``fused_encoder`` the same encoder as TensorFlow ops that serving graphs run,
``masked_lm`` the masked-LM head used by pre-training and fill-mask.
"""
