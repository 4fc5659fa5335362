"""The apps of kerasbert: what the ``kerasbert`` command's ``ner``, ``triples`` and ``heads`` subcommands run.

``base`` is what every app shares (the pipeline, the task, the head registry),
``ner`` and ``triples`` are the two tasks with one folder per head under their
``heads/``, ``samples`` the corpora the demo and the notebooks train on, and
``testing`` the head contract every head keeps. The library (``kerasbert``)
never imports this package.
"""
