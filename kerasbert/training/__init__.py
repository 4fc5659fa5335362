"""Training: what a run of any app does from its settings to its saved model.

Settings (``settings``), the run's folder (``runs``), its per-epoch history
(``history``), the optimizer (``optimizer``), batches (``batching``), devices
(``distribution``), callbacks (``callbacks``), the run itself (``fit``), and the
encoder-level recipes: masked-LM pre-training (``pretraining``) and
distillation (``distill``).
"""
