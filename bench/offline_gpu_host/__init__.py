"""Our tooling for running the GPU benchmarks on a GPU host without network access or TensorFlow.

Not benchmarks: each tool wraps one (``gpu_training`` wraps ``bench.gpu_training``, ``conll`` the
``ours`` run of ``bench.ner_conll2003``, ``active_learning`` ``bench.active_learning``,
``triples_sweep`` ``bench.triples_webnlg``'s GPLinker runs). ``README.md`` says what the host lacks
and how each tool deals with it.
"""
