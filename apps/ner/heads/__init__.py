"""The NER heads, one folder each; importing a folder registers its head(s)
(:mod:`kerasbert_apps.base.heads`). A new head is a new folder here."""

#: The ``--head`` choices' order of the kit's NER head folders (the first
#: folder's first head, ``crf``, is the default); other folders follow by name.
ORDER = ("bio", "global_pointer", "biaffine")
