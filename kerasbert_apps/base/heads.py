"""The head registry: which heads each task offers, and which head a model folder holds.

A *head* is what a task trains on the encoder (``kerasbert heads`` lists
each task's: the NER task's BIO taggers and span heads, the triples task's
extractors). Each head lives in ONE folder, ``kerasbert_apps/<task>/heads/<name>/``,
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
        selection_measure="...",              # NER: what ner select's P(best labelling) is
        head_learning_rate=3e-3,              # what its training needs, read by the auto rule
        auto_steps=600,                       # (None: the defaults of kerasbert.training.settings)
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
  :func:`kerasbert.training.settings.setting`) become options of the task's ``train``
  (:func:`train_settings_class` adds them to the task's settings dataclass);
  ``Head.check(settings)`` is called on every training run of the task (the
  head checks its own options, and may refuse its options under another head);
* ``Head.head_learning_rate``, ``Head.auto_steps``, ``Head.auto_min_epochs``:
  what the head's training needs, read by the ``auto`` rule
  (:meth:`kerasbert.training.settings.RunSettings.resolve_auto`) where the run leaves
  ``--head-learning-rate``, ``--epochs`` and ``--batch-size`` at ``auto``
  (an option given always wins); the head's own settings (losses,
  thresholds) carry their defaults in its ``settings`` dataclass;
* ``Head.options``: ``(name, help)`` pairs of options the head reads at
  ``evaluate`` / ``predict`` / ``export`` time (the triples thresholds);
* ``Head.selection_measure`` (NER): what ``kerasbert ner select``'s
  P(best labelling) is for the head's outputs, in a few words (printed in
  its summary); the head's pipeline computes it (its ``selection_*``
  hooks, :mod:`kerasbert_apps.ner.select`). A head that declares none is
  refused by ``select`` in one line;
* a pipeline saves ``"head": <name>`` in its settings file;
  :func:`head_of` reads it back to load a folder. Folders written before the
  registry (no ``"head"``) are recognised by the settings file name only:
  the first head registered with that file (``legacy_sniffing``).

Built-in heads are found by importing every subpackage of
``kerasbert_apps.<task>.heads`` (:func:`discover`), so a new head is a new
folder; heads of other distributions register through the entry-point group
``kerasbert.heads`` (an entry point names a module; importing it registers).

Heads of other packages are first-class, and a broken one cannot break the
kit:

* an entry point whose import fails (or whose registration is refused) is
  left out with ONE warning line on stderr naming the distribution, the
  entry point and the error; every other head works (:func:`failed_plugins`
  lists them, and ``kerasbert heads`` prints them);
* :func:`package` says which distribution a head comes from (``kerasbert``
  for the kit's own); ``kerasbert heads`` and ``--head``'s help show it;
* the options of a task's heads share ONE namespace with the task's own
  ``train`` options (what a user types: ``--pointer-size``, ``--dropout``):
  a head whose option would take a flag that the task or another head of
  the task already has is refused at registration, in one line naming both
  (a head reads the task's options, ``settings.dropout``, without declaring
  them; two heads of one folder may share one settings dataclass);
* the ``--head`` choices are the kit's heads in the order their task's
  ``heads`` package lists them (``ORDER``, the default first), then other
  folders by name, then other packages' heads by distribution;
* a head left out (its plugin failed to load, or its registration was
  refused) that is asked for -- ``--head NAME``, a settings file's
  ``"head"``, a model folder's -- is named with the reason it was left out,
  in one line (:func:`left_out`, :func:`get`); ``--head`` lets such a name
  through argparse for that (:class:`HeadChoices`);
* ``KERASBERT_NO_PLUGINS=1`` loads no head of another package (the kit's
  own command-line reference, ``docs/gen_cli.py``, is written so).
"""

import dataclasses
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Callable, Optional

from kerasbert.errors import KerasbertError

#: The tasks whose heads live in ``kerasbert_apps.<task>.heads``.
TASKS = ("ner", "triples")
#: Entry-point group of heads from other packages.
ENTRY_POINT_GROUP = "kerasbert.heads"
#: Set (to anything but ``0`` or empty) to load no head of another package.
NO_PLUGINS = "KERASBERT_NO_PLUGINS"
#: What :func:`package` says of the kit's own heads.
KIT = "kerasbert"
#: Flags every ``train`` parser has besides its settings' (``--settings FILE``, ``--help``).
RESERVED_FLAGS = frozenset({"--settings", "--config", "--help", "-h", "--head", "--no-head"})


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
            ``kerasbert.training.settings.AUTO_HEAD_LEARNING_RATE``.
        auto_steps: the optimizer steps ``--epochs auto`` / ``--batch-size
            auto`` aim for on small data; None: ``kerasbert.training.settings.AUTO_STEPS``.
        auto_min_epochs: ``--epochs auto`` trains at least this many
            epochs; None: the task's (``auto_min_epochs`` of its settings).
        selection_measure: NER: what ``ner select``'s P(best labelling) is
            for the head's outputs (a short description, printed in its
            summary); empty: the head has none (``select`` refuses it).
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
    selection_measure: str = ""

    def training_defaults(self):
        """What this head declares its training needs, as
        :func:`kerasbert.training.fit.resolve_auto` takes it (``steps``,
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
_PLUGINS = {"loaded": False, "failed": [], "origin": {}}  # origin: (task, name) -> distribution
_TASK_FLAGS = {}  # task -> {flag: "the task's own option"}: the task's train options (train_settings_class)


def register(head):
    """Add ``head`` (a :class:`Head`) to the registry; returns it. Registering
    the same name twice for a task is an error unless it is the same head; so
    is a head whose options would take a flag the task or another head of the
    task already has (one line naming both: :func:`option_clash`)."""
    if head.task not in TASKS:
        raise KerasbertError(f"head {head.name!r}: unknown task {head.task!r}; known: {', '.join(TASKS)}")
    if ":" not in head.pipeline:
        raise KerasbertError(f"head {head.name!r}: pipeline must be 'module:Class', got {head.pipeline!r}")
    if not isinstance(head.selection_measure, str) or (head.selection_measure and head.task != "ner"):
        raise KerasbertError(f"head {head.name!r}: selection_measure is an NER head's description of what ner "
                             f"select measures (a string), got {head.selection_measure!r} for a {head.task} head")
    known = _REGISTRY.setdefault(head.task, {})
    if head.name in known:
        if known[head.name] != head:
            raise KerasbertError(f"a {head.task} head named {head.name!r} is already registered "
                                 f"(from {package(known[head.name])})")
        return known[head.name]
    clash = option_clash(head)
    if clash:
        _PLUGINS.setdefault("refused", {})[(head.task, head.name)] = clash
        raise KerasbertError(clash)
    known[head.name] = head
    return head


def _flags(field):
    """The command-line flags a settings field makes (:func:`kerasbert.training.settings.add_settings_options`)."""
    flag = "--" + field.name.replace("_", "-")
    return (flag, "--no-" + flag[2:]) if isinstance(field.default, bool) else (flag,)


def option_flags(head):
    """``{flag: field name}`` of the ``train`` options ``head`` adds."""
    fields = dataclasses.fields(head.settings) if head.settings else ()
    return {flag: f.name for f in fields for flag in _flags(f)}


def _declaration(head, name):
    """The dataclass field of ``head``'s settings named ``name``: the same
    object for every subclass of the dataclass that declares it."""
    return next(f for f in dataclasses.fields(head.settings) if f.name == name)


def option_clash(head):
    """A one-line refusal naming both, when an option of ``head`` would take
    a flag that its task's ``train`` has (``--dropout``) or that another head
    of the task adds (the GlobalPointer head's ``--pointer-size``), or when it
    reads an evaluate / predict / export option (:attr:`Head.options`) that
    another head reads; else None. An option declared once is shared: two
    heads with the same settings dataclass (one folder's heads), or whose
    settings subclass one that declares it (the span heads' threshold)."""
    who = f"the {head.task} head {head.name!r} (from {package(head)})"
    mine = option_flags(head)
    taken = dict.fromkeys(RESERVED_FLAGS, f"an option of every {head.task} train") | _TASK_FLAGS.get(head.task, {})
    for flag, name in mine.items():
        if flag in taken:
            return (f"{who} declares the option {name!r} ({flag}), which is already {taken[flag]}; "
                    f"name it after the head (e.g. {head.name.replace('-', '_')}_{name})")
    options = {o for o, _ in head.options}
    for other in _REGISTRY.get(head.task, {}).values():
        if other.name == head.name:
            continue
        theirs = option_flags(other)
        for flag in sorted(mine.keys() & theirs.keys()):
            if _declaration(head, mine[flag]) is not _declaration(other, theirs[flag]):
                return (f"{who} declares the option {mine[flag]!r} ({flag}), which the {other.name!r} head (from "
                        f"{package(other)}) already declares; name it after the head "
                        f"(e.g. {head.name.replace('-', '_')}_{mine[flag]})")
        for option in sorted(options & {o for o, _ in other.options}):
            return (f"{who} reads the option {option!r}, which the {other.name!r} head (from {package(other)}) "
                    "already reads; name it after the head")
    return None


def discover(task=None):
    """Import the kit's head folders (``kerasbert_apps.<task>.heads.*``, of
    every task: the options of other packages' heads are checked against all
    of them), then the ``kerasbert.heads`` entry points, once
    (:func:`load_plugins`). ``task`` is accepted for callers that name one."""
    import pkgutil

    for name in TASKS:
        if name in _DISCOVERED:
            continue
        _DISCOVERED.add(name)
        package_ = importlib.import_module(f"kerasbert_apps.{name}.heads")
        for info in pkgutil.iter_modules(package_.__path__):
            if info.ispkg:
                importlib.import_module(f"{package_.__name__}.{info.name}")
    load_plugins()


def load_plugins():
    """Import the modules the ``kerasbert.heads`` entry points name, once (none
    with ``KERASBERT_NO_PLUGINS`` set). One that fails -- an exception on
    import, a refused registration -- is left out, with the heads it had
    registered, and says so in ONE line on stderr naming its distribution,
    the entry point and the error (:func:`failed_plugins`)."""
    if _PLUGINS["loaded"] or os.environ.get(NO_PLUGINS, "") not in ("", "0"):
        return
    _PLUGINS["loaded"] = True
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        dist = point.dist.name if point.dist is not None else "an unknown distribution"
        before = {task: set(known) for task, known in _REGISTRY.items()}
        try:
            importlib.import_module(point.value.partition(":")[0].strip())
        except Exception as error:  # noqa: BLE001  (any failure of someone else's code: left out, said once)
            for task, known in _REGISTRY.items():
                for name in set(known) - before.get(task, set()):
                    del known[name]
            reason = " ".join(f"{type(error).__name__}: {error}".split())
            _PLUGINS["failed"].append((dist, point.name, point.value, reason))
            print(f"kerasbert: warning: head plugin {point.name} = {point.value} (from {dist}) is left out: "
                  f"{reason}", file=sys.stderr, flush=True)
            continue
        for task, known in _REGISTRY.items():
            for name in set(known) - before.get(task, set()):
                _PLUGINS["origin"][(task, name)] = dist


def failed_plugins():
    """``(distribution, entry point name, entry point value, error)`` of each
    ``kerasbert.heads`` entry point left out (:func:`load_plugins`)."""
    discover()
    return list(_PLUGINS["failed"])


def left_out(task):
    """``{name: why}`` of the heads of ``task`` that are not registered but
    were meant to be: a head whose registration was refused (its option
    clashes), and the name of each ``kerasbert.heads`` entry point that
    failed to load (the heads it would have registered are not known; an
    entry point is usually named after its head)."""
    discover()
    refused = _PLUGINS.get("refused", {})
    found = {}
    for dist, point, value, error in _PLUGINS["failed"]:
        if point not in {name for _, name in refused}:  # (a refused head is its own task's)
            found[point] = f"the head plugin {point} = {value} (from {dist}) failed to load: {error}"
    for (of, name), clash in refused.items():
        if of == task:
            found[name] = clash
    registered = _REGISTRY.get(task, {})
    return {name: why for name, why in found.items() if name not in registered}


class HeadChoices(tuple):
    """The ``--head`` choices: the names of the registered heads, which
    ``--help`` lists and argparse offers. A name of :func:`left_out` is in
    them too (``in``), so that argparse lets it through and the command's
    check names it with its reason in one line (:func:`get`), instead of
    argparse's usage and ``invalid choice``."""

    def __new__(cls, names, left_out=()):
        choices = super().__new__(cls, names)
        choices.left_out = frozenset(left_out)
        return choices

    def __contains__(self, name):
        return tuple.__contains__(self, name) or name in self.left_out


def package(head):
    """The distribution ``head`` comes from: ``"kerasbert"`` for the kit's
    own heads, the distribution of the ``kerasbert.heads`` entry point that
    registered it, or else the top-level package of its pipeline module."""
    origin = _PLUGINS["origin"].get((head.task, head.name))
    if origin:
        return origin
    top = head.pipeline.partition(":")[0].partition(".")[0]
    return KIT if top == "kerasbert_apps" else top


def is_builtin(head):
    """Whether ``head`` is one of the kit's own (a folder of ``kerasbert_apps.<task>.heads``)."""
    return _folder(head) is not None


def _order(task, head):
    """The sort key of ``head`` among ``task``'s heads: the kit's first, in
    the order of the ``ORDER`` of ``kerasbert_apps.<task>.heads`` (the first
    is the task's default head), then the kit's other folders by name; then
    the heads of other packages by distribution."""
    folder = _folder(head)
    if folder is None:
        return (1, 0, package(head))
    order = tuple(getattr(importlib.import_module(f"kerasbert_apps.{task}.heads"), "ORDER", ()))
    return (0, order.index(folder), "") if folder in order else (0, len(order), folder)


def heads(task):
    """The registered heads of ``task``: the kit's, the default first (see
    :func:`_order`), then those of other packages; a folder's (a package's)
    heads in registration order."""
    discover(task)
    registered = list(_REGISTRY.get(task, {}).values())
    return sorted(registered, key=lambda h: (_order(task, h), registered.index(h)))


def _folder(head):
    """The kit's head folder of ``head`` (its pipeline module's package under
    ``kerasbert_apps.<task>.heads``), or None for a head of another package."""
    module = head.pipeline.partition(":")[0]
    prefix = f"kerasbert_apps.{head.task}.heads."
    return module[len(prefix):].partition(".")[0] if module.startswith(prefix) else None


def names(task):
    """The ``--head`` choices of ``task``."""
    return tuple(h.name for h in heads(task))


def get(task, name):
    """The head ``name`` of ``task``; a head left out (:func:`left_out`) is
    a one-line error naming it and why, an unknown name one naming the choices."""
    discover(task)
    try:
        return _REGISTRY[task][name]
    except KeyError:
        pass
    why = left_out(task).get(name)
    if why:
        raise KerasbertError(f"the {task} head {name!r} was left out when the heads were loaded: {why}")
    failed = "".join(f"; left out: {point} (from {dist}), {error}" for dist, point, _, error in _PLUGINS["failed"])
    raise KerasbertError(f"unknown {task} head {name!r}; the heads are: {', '.join(names(task))}{failed}")


def settings_files(task):
    """The settings file names of ``task``'s heads (each once)."""
    return tuple(dict.fromkeys(h.settings_file for h in heads(task)))


def settings_path(task, directory):
    """The settings file of the model folder ``directory`` (or of a training
    run's output folder's ``model/``), or None when it holds none of ``task``'s."""
    from kerasbert.checkpoints.saving import MODEL_DIR

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
    _TASK_FLAGS[task] = {flag: f"an option of {task} train" for f in dataclasses.fields(base) for flag in _flags(f)}
    for head in heads(task):  # registered before the task's options were known
        clash = option_clash(head)
        if clash and is_builtin(head):
            raise KerasbertError(clash)
        if clash:
            del _REGISTRY[task][head.name]
            _PLUGINS["failed"].append((package(head), head.name, head.pipeline, clash))
            _PLUGINS.setdefault("refused", {})[(task, head.name)] = clash
            print(f"kerasbert: warning: {task} head {head.name} (from {package(head)}) is left out: {clash}",
                  file=sys.stderr, flush=True)
    registered = heads(task)
    choices = HeadChoices((h.name for h in registered), left_out(task))
    help = f"the {what}: " + "; ".join(
        f"{h.name}{'' if is_builtin(h) else f' (from {package(h)})'}: {h.help}" for h in registered if h.help)
    fields = [("head", str, dataclasses.field(default=choices[0], metadata={
        "help": help, "choices": choices, "type": None}))]
    seen = {"head"}
    for head in registered:
        for f in dataclasses.fields(head.settings) if head.settings else ():
            if f.name in seen:  # the same field of a settings dataclass two heads share
                continue
            seen.add(f.name)
            fields.append((f.name, f.type, dataclasses.field(default=f.default, metadata=f.metadata)))

    def check(self):
        get(task, self.head)  # first: a head left out is named with its reason
        base.check(self)
        for head in registered:
            if head.check:
                head.check(self)

    return dataclasses.make_dataclass(base.__name__, fields, bases=(base,),
                                      namespace={"check": check, "__module__": base.__module__,
                                                 "__doc__": base.__doc__})
