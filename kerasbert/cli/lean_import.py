"""Optional integrations of TensorFlow and Keras that the ``kerasbert`` command never uses, left unimported.

``import tensorflow`` (2.21) also imports Keras, and both try to import
packages they integrate with when those are installed: Keras's scikit-learn
wrappers import ``sklearn``, its image-gallery plot imports
``matplotlib.pyplot``, TF Lite's authoring tools and Keras's Orbax
checkpoint callback import ``jax``, TensorFlow's
legacy Keras imports ``scipy.sparse``. Each import is guarded (``try: import
sklearn`` / ``except ImportError``), and none of them is on any path of the
kit; but where the packages are installed (scikit-learn comes with seqeval,
JAX with the JAX extra) they add seconds to every command's start.

:func:`skip_optional_integrations` installs an import hook that refuses
exactly those imports, when they come from exactly those modules
(:data:`SKIPPED`): the guard takes the ``ImportError`` and the integration is
off in this process. The same package imported from anywhere else -- the
kit's scoring imports scikit-learn through seqeval, a plugin may import
anything, ``KERAS_BACKEND=jax`` imports JAX from Keras's backend -- imports
as usual. The CLI calls it first thing; a library user's process is left
alone.
"""

import importlib.abc
import sys

#: (package, the modules whose import of it is refused: name prefixes).
SKIPPED = (
    ("sklearn", ("keras.src.wrappers.",)),
    ("matplotlib", ("keras.src.visualization.",)),
    ("jax", ("tensorflow.lite.", "keras.src.callbacks.orbax_checkpoint")),
    ("scipy", ("tensorflow.python.keras.",)),
)


def _importer():
    """``__name__`` of the module whose code is importing (the first frame
    outside the import machinery and this module)."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename.startswith("<frozen")
                                 or frame.f_globals.get("__name__") in (__name__, "importlib")):
        frame = frame.f_back
    return frame.f_globals.get("__name__", "") if frame is not None else ""


class _SkipFinder(importlib.abc.MetaPathFinder):
    """Refuses the imports of :data:`SKIPPED`; finds nothing else (the other finders do)."""

    def find_spec(self, fullname, path, target=None):
        top = fullname.partition(".")[0]
        for package, importers in SKIPPED:
            if top == package and top not in sys.modules and _importer().startswith(importers):
                raise ModuleNotFoundError(f"{fullname}: an optional integration the kerasbert command does not use",
                                          name=fullname)
        return None


def skip_optional_integrations():
    """Install the hook (module docstring), once."""
    if not any(isinstance(finder, _SkipFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SkipFinder())
