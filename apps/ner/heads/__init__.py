"""The NER heads, one folder each; importing a folder registers its head(s)
(:mod:`kerasbert_apps.base.heads`). A new head is a new folder here."""
