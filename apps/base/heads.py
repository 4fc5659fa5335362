"""The head registry: which heads each task offers, and which head a model folder holds.

A *head* is what a task trains on the encoder (the NER task's ``crf``,
``softmax`` and ``global-pointer``; the triples task's ``casrel`` and
``gplinker``). Each head lives in ONE folder, ``apps/<task>/heads/<name>/``,
whose ``__init__.py`` registers it::

    from kerasbert_apps.base.heads import Head, register

    register(Head(
        name="my-head",                       # the --head choice
        task="ner",                           # "ner" or "triples"
        pipeline="kerasbert_apps.ner.heads.my_head.pipeline:MyTagger",
        settings_file="my_head.json",         # the model folder's settings file
        help="what --head my-head does (one clause, for --head's help)",
        settings=MyHeadSettings,              # dataclass of the options it adds (or None)
        check=check_my_head,                  # check(settings) for every run of the task
        keep_overlaps=True,                   # NER readers keep nested/overlapping spans
        scorer="exact spans",                 # which of the task's scorers scores it
        head_learning_rate=3e-3,              # what its training needs, read by the auto rule
        auto_steps=600,                       # (None: the defaults of kerasbert.settings)
    ))

That is the whole contract; nothing outside the head's folder names it:

* :func:`heads` lists the registered heads of a task (the ``--head`` choices,
  in registration order), :func:`get` returns one by name (an unknown name is
  a one-line :class:`~kerasbert.errors.KerasbertError` naming the choices);
* ``Head.pipeline`` is a ``"module:Class"`` string imported on first use
  (:meth:`Head.pipeline_class`), so listing heads (the CLI's ``--help``)
  imports no TensorFlow model code; the class is a
  :class:`~kerasbert_apps.base.pipeline.Pipeline` subclass whose
  ``build_model``, ``training_labels``, ``batches``, ... are the head's
  model builder and training hooks;
* ``Head.settings`` is a dataclass whose fields (made with
  :func:`kerasbert.settings.setting`) become options of the task's ``train``
  (:func:`train_settings_class` adds them to the task's settings dataclass);
  ``Head.check(settings)`` is called on every training run of the task (the
  head checks its own options, and may refuse its options under another head);
* ``Head.head_learning_rate``, ``Head.auto_steps``, ``Head.auto_min_epochs``:
  what the head's training needs, read by the ``auto`` rule
  (:meth:`kerasbert.settings.RunSettings.resolve_auto`) where the run leaves
  ``--head-learning-rate``, ``--epochs`` and ``--batch-size`` at ``auto``
  (an option given always wins); the head's own settings (losses,
  thresholds) carry their defaults in its ``settings`` dataclass;
* ``Head.options``: ``(name, help)`` pairs of options the head reads at
  ``evaluate`` / ``predict`` / ``export`` time (the triples thresholds);
* a pipeline saves ``"head": <name>`` in its settings file;
  :func:`head_of` reads it back to load a folder. Folders written before the
  registry (no ``"head"``) are recognised by the settings file name only:
  the first head registered with that file (``legacy_sniffing``).

Built-in heads are found by importing every subpackage of
``kerasbert_apps.<task>.heads`` (:func:`discover`), so a new head is a new
folder; heads of other distributions register through the entry-point group
``kerasbert.heads`` (an entry point names a module; importing it registers).
"""

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Callable, Optional

from kerasbert.errors import KerasbertError

#: The tasks whose heads live in ``kerasbert_apps.<task>.heads``.
TASKS = ("ner", "triples")
#: Entry-point group of heads from other packages.
ENTRY_POINT_GROUP = "kerasbert.heads"


@dataclasses.dataclass(frozen=True)
class Head:
    """One registered head (see the module docstring).

    Attributes:
        name: the ``--head`` choice (``"global-pointer"``).
        task: ``"ner"`` or ``"triples"``.
        pipeline: ``"module:Class"`` of its
            :class:`~kerasbert_apps.base.pipeline.Pipeline` subclass.
        settings_file: the settings file of its model folders.
        help: a clause describing it, for ``--head``'s help.
        settings: a dataclass of the training options it adds, or None.
        check: ``check(settings)``, called for every training run of the task.
        keep_overlaps: NER: the readers keep nested and overlapping entities.
        scorer: the name of the task's scorer (NER: ``"seqeval BIO"`` or
            ``"exact spans"``); None: the task's only one.
        options: ``(name, help)`` of options read at evaluate / predict /
            export time (the triples ``--threshold-NAME``).
        head_learning_rate: the head's peak learning rate with
            ``--head-learning-rate auto`` (the default); None:
            ``kerasbert.settings.AUTO_HEAD_LEARNING_RATE``.
        auto_steps: the optimizer steps ``--epochs auto`` / ``--batch-size
            auto`` aim for on small data; None: ``kerasbert.settings.AUTO_STEPS``.
        auto_min_epochs: ``--epochs auto`` trains at least this many
            epochs; None: the task's (``auto_min_epochs`` of its settings).
    """

    name: str
    task: str
    pipeline: str
    settings_file: str
    help: str = ""
    settings: Optional[type] = None
    check: Optional[Callable] = None
    keep_overlaps: bool = False
    scorer: Optional[str] = None
    options: tuple = ()
    head_learning_rate: Optional[float] = None
    auto_steps: Optional[int] = None
    auto_min_epochs: Optional[int] = None

    def training_defaults(self):
        """What this head declares its training needs, as
        :func:`kerasbert.fit.resolve_auto` takes it (``steps``,
        ``min_epochs``, ``head_learning_rate``; None where the head
        declares nothing)."""
        return {"steps": self.auto_steps, "min_epochs": self.auto_min_epochs,
                "head_learning_rate": self.head_learning_rate}

    def pipeline_class(self):
        """The pipeline class (imported now)."""
        module, _, attr = self.pipeline.partition(":")
        return getattr(importlib.import_module(module), attr)


_REGISTRY = {}  # task -> {name: Head}
_DISCOVERED = set()


def register(head):
    """Add ``head`` (a :class:`Head`) to the registry; returns it. Registering
    the same name twice for a task is an error unless it is the same head."""
    if head.task not in TASKS:
        raise KerasbertError(f"head {head.name!r}: unknown task {head.task!r}; known: {', '.join(TASKS)}")
    if ":" not in head.pipeline:
        raise KerasbertError(f"head {head.name!r}: pipeline must be 'module:Class', got {head.pipeline!r}")
    known = _REGISTRY.setdefault(head.task, {})
    if head.name in known and known[head.name] != head:
        raise KerasbertError(f"a {head.task} head named {head.name!r} is already registered")
    known[head.name] = head
    return head


def discover(task):
    """Import the head folders of ``task`` (``kerasbert_apps.<task>.heads.*``)
    and the ``kerasbert.heads`` entry points, once."""
    if task in _DISCOVERED:
        return
    _DISCOVERED.add(task)
    import pkgutil

    package = importlib.import_module(f"kerasbert_apps.{task}.heads")
    for info in pkgutil.iter_modules(package.__path__):
        if info.ispkg:
            importlib.import_module(f"{package.__name__}.{info.name}")
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        importlib.import_module(point.value.partition(":")[0])


def _builtin_order(task, folder):
    """Built-in heads first, in the order of their ``--head`` choices (the
    first is the task's default), then the others by folder name."""
    order = {"ner": ("bio", "global_pointer"), "triples": ("casrel", "gplinker")}[task]
    return (order.index(folder), "") if folder in order else (len(order), folder)


def heads(task):
    """The registered heads of ``task``: the built-in ones in the order of
    their ``--head`` choices (the first is the default), then the others by
    folder; a folder's heads in registration order."""
    discover(task)
    registered = list(_REGISTRY.get(task, {}).values())
    return sorted(registered, key=lambda h: (_builtin_order(task, _folder(h)), registered.index(h)))


def _folder(head):
    """The head folder of ``head`` (its pipeline module's package under
    ``kerasbert_apps.<task>.heads``), or its pipeline module's name."""
    module = head.pipeline.partition(":")[0]
    prefix = f"kerasbert_apps.{head.task}.heads."
    return module[len(prefix):].partition(".")[0] if module.startswith(prefix) else module


def names(task):
    """The ``--head`` choices of ``task``."""
    return tuple(h.name for h in heads(task))


def get(task, name):
    """The head ``name`` of ``task``; an unknown name is a one-line error naming the choices."""
    discover(task)
    try:
        return _REGISTRY[task][name]
    except KeyError:
        raise KerasbertError(f"unknown {task} head {name!r}; the heads are: {', '.join(names(task))}") from None


def settings_files(task):
    """The settings file names of ``task``'s heads (each once)."""
    return tuple(dict.fromkeys(h.settings_file for h in heads(task)))


def settings_path(task, directory):
    """The settings file of the model folder ``directory`` (or of a training
    run's output folder's ``model/``), or None when it holds none of ``task``'s."""
    from kerasbert.saving import MODEL_DIR

    directory = Path(directory)
    for folder in (directory, directory / MODEL_DIR):
        for name in settings_files(task):
            if (folder / name).exists():
                return folder / name
    return None


def head_of(task, directory):
    """The :class:`Head` of the model folder ``directory`` (or of a training
    run's output folder): the ``"head"`` its settings file records; for a
    folder written before heads were recorded, :func:`legacy_sniffing`. A
    folder with no known settings file gets the task's first head (whose
    ``load`` then says what is missing)."""
    path = settings_path(task, directory)
    if path is None:
        return heads(task)[0]
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("head")
    except (OSError, ValueError, AttributeError):  # damaged: the pipeline's load reports it
        recorded = None
    if isinstance(recorded, str):
        try:
            return get(task, recorded)
        except KerasbertError as e:
            raise KerasbertError(f"{path}: \"head\": {e}") from None
    return legacy_sniffing(task, path.name)


def legacy_sniffing(task, settings_name):
    """The head of a folder written before ``"head"`` was recorded, told by
    its settings file's name alone: the first head registered with it
    (``tagger.json``: crf, which loads softmax taggers alike)."""
    for head in heads(task):
        if head.settings_file == settings_name:
            return head
    raise KerasbertError(f"no {task} head writes {settings_name}")


def train_settings_class(task, base, what="head"):
    """The training settings dataclass of ``task`` (named as ``base``):
    ``base``'s fields, then ``head`` (choices: the registered heads; default:
    the first; its help says ``what`` a head is and each head's ``help``),
    then the fields of every head's ``settings`` dataclass; ``check`` also
    runs every head's ``check``."""
    registered = heads(task)
    choices = tuple(h.name for h in registered)
    help = f"the {what}: " + "; ".join(f"{h.name}: {h.help}" for h in registered if h.help)
    fields = [("head", str, dataclasses.field(default=choices[0], metadata={
        "help": help, "choices": choices, "type": None}))]
    seen = {f.name for f in dataclasses.fields(base)} | {"head"}
    for head in registered:
        for f in dataclasses.fields(head.settings) if head.settings else ():
            if f.name in seen:
                continue
            seen.add(f.name)
            fields.append((f.name, f.type, dataclasses.field(default=f.default, metadata=f.metadata)))

    def check(self):
        base.check(self)
        for head in registered:
            if head.check:
                head.check(self)
        get(task, self.head)

    return dataclasses.make_dataclass(base.__name__, fields, bases=(base,),
                                      namespace={"check": check, "__module__": base.__module__,
                                                 "__doc__": base.__doc__})
