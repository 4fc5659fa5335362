"""Run the notebooks at their full settings and save them with their outputs.

The notebooks are committed with the outputs of such a run, so that a reader
sees the plots, highlighted entities and tables on GitHub before running
anything. After changing a notebook (or what it calls), run this again and
commit the result:

    python notebooks/execute.py                 # all three
    python notebooks/execute.py 02_triple_extraction

Each notebook runs top to bottom in a fresh ``python3`` kernel with
``notebooks/`` as its working directory, so its ``OUTPUT`` is
``notebooks/notebook-output/<name>/`` (git-ignored). A notebook that finds a
finished run there reuses it: delete the folder to train again. Notebook 03
exports the model notebook 01 trained (its ``KERASBERT_NER_MODEL``
parameter). A notebook is replaced only when every cell ran without error.
Paths of this machine in the outputs are shortened (:func:`tidy`): the
repository's own become relative, the installed packages' start with
``<site-packages>/``.

The tests (``tests/test_notebooks.py``) execute the notebooks in their small
mode in memory and never write them; they check that the committed copies
hold full-run outputs.
"""

import argparse
import os
import sys
import sysconfig
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NAMES = ("01_ner_custom_data", "02_triple_extraction", "03_serving")
CELL_TIMEOUT = 3600


def tidy(nb):
    """Shorten this machine's paths in the outputs of ``nb`` (in place)."""
    replacements = [(sysconfig.get_paths()["purelib"] + os.sep, "<site-packages>/"), (str(ROOT) + os.sep, "")]

    def shorten(text):
        for old, new in replacements:
            text = text.replace(old, new)
        return text

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if "text" in out:
                out.text = shorten(out.text)
            for mime, value in out.get("data", {}).items():
                if mime.startswith("text/") and isinstance(value, str):
                    out.data[mime] = shorten(value)
    return nb


def execute(name):
    import nbclient
    import nbformat

    from kerasbert.files.atomic import atomic_write_text

    path = HERE / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    env = {"KERASBERT_NOTEBOOK_SMALL": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}
    if name == "03_serving":
        env["KERASBERT_NER_MODEL"] = "notebook-output/01_ner_custom_data/run/model"
    saved = {k: os.environ.get(k) for k in (*env, "KERASBERT_CHECKPOINT")}
    os.environ.update(env)
    os.environ.pop("KERASBERT_CHECKPOINT", None)  # the starter encoder, as a reader's first run
    try:
        began = time.perf_counter()
        client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                         resources={"metadata": {"path": str(HERE)}})
        client.execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    nbformat.validate(tidy(nb))
    atomic_write_text(path, nbformat.writes(nb) + "\n")
    print(f"{path.relative_to(HERE.parent)}: executed in {time.perf_counter() - began:.0f} s and saved")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"notebooks to run (default: all): {', '.join(NAMES)}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(NAMES))
    if unknown:
        parser.error(f"unknown notebook(s): {', '.join(unknown)} (choose from {', '.join(NAMES)})")
    for name in args.names or NAMES:
        execute(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
