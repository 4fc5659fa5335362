"""The rooms of the house and the imports between them, read from the code.

Reads every import of every module of ``kerasbert/`` and ``kerasbert_apps/``
with :mod:`ast` (nothing is imported; a function's own imports included,
``if TYPE_CHECKING:`` blocks left out), and groups the modules into rooms:
the subpackages below each top-level package (``kerasbert.training``,
``kerasbert_apps.ner``); a module at the top (``kerasbert.errors``, a
package's own ``__init__``) is a room of its own.

Used twice: ``tests/test_imports.py`` holds the modules and the rooms to no
circle, and the architecture page draws the rooms (``<!-- kerasbert:rooms -->``,
docs/hooks.py): :func:`rooms_markdown`, :func:`rooms_png`.
"""

import ast
import io
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Top-level package name -> its folder in the repository.
PACKAGES = {"kerasbert": ROOT / "kerasbert", "kerasbert_apps": ROOT / "kerasbert_apps"}


def package_modules(packages):
    """``{module name: (path, is_package)}`` for every ``.py`` file under
    the folders of ``packages`` (``{top-level name: folder}``)."""
    modules = {}
    for top, root in packages.items():
        for path in sorted(Path(root).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if "__pycache__" in parts or any(not p.isidentifier() for p in parts):
                continue
            is_package = parts[-1] == "__init__"
            name = ".".join((top,) + (parts[:-1] if is_package else parts))
            modules[name] = (path, is_package)
    return modules


def _is_type_checking(test):
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_level_imports(tree, functions=False):
    """The ``Import`` and ``ImportFrom`` nodes that run when the module is
    imported (see the module docstring); with ``functions``, those inside
    function bodies too (every import but ``if TYPE_CHECKING:``)."""
    found = []

    def visit(nodes):
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not functions:
                continue
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse)
            else:
                visit(ast.iter_child_nodes(node))

    visit(tree.body)
    return found


def import_graph(modules, functions=True):
    """``{module: {imported module: line}}`` over ``modules`` (as from
    :func:`package_modules`): only edges between modules of the set; the
    imports inside functions included unless ``functions`` is false."""
    graph = {}
    for name, (path, is_package) in modules.items():
        edges = graph.setdefault(name, {})
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in module_level_imports(tree, functions=functions):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    package = name.split(".") if is_package else name.split(".")[:-1]
                    package = package[: len(package) - (node.level - 1)]
                    base = ".".join(package + ([node.module] if node.module else []))
                else:
                    base = node.module
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            for target in targets:
                while target and target not in modules:  # import a.b.c.name -> the module a.b.c
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.setdefault(target, node.lineno)
                elif target == name:
                    edges.setdefault(name, node.lineno)  # a module importing itself: a cycle of one
    return graph


def import_cycles(graph):
    """One cycle (a list of modules, the first repeated at the end) for each
    strongly connected component of ``graph`` that has one; [] when none."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def connect(start):  # Tarjan's algorithm, iteratively (no recursion limit)
        work = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(set(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    cycles = []
    for component in components:
        first = min(component)
        if len(component) == 1 and first not in graph.get(first, {}):
            continue
        # The shortest way back to `first` inside the component (breadth first).
        paths, seen, frontier = {first: [first]}, {first}, [first]
        cycle = None
        while frontier and cycle is None:
            following = []
            for node in frontier:
                for child in sorted(graph.get(node, {})):
                    if child == first:
                        cycle = paths[node] + [first]
                        break
                    if child in component and child not in seen:
                        seen.add(child)
                        paths[child] = paths[node] + [child]
                        following.append(child)
                if cycle:
                    break
            frontier = following
        cycles.append(cycle)
    return sorted(cycles)


def describe_cycle(cycle, graph, modules):
    """``a -> b -> a`` with the file and line of each import."""
    steps = []
    for here, there in zip(cycle, cycle[1:]):
        path = modules[here][0].relative_to(ROOT) if modules[here][0].is_relative_to(ROOT) else modules[here][0]
        steps.append(f"{here} -> {there} ({path}, line {graph[here][there]})")
    return "; ".join(steps)


def room_of(module, modules):
    """The room of ``module``: the subpackage it lives in below the top-level
    package (``kerasbert.training.fit`` -> ``kerasbert.training``); a module at
    the top (``kerasbert.errors``, the package's own ``__init__``) is a room of
    its own."""
    parts = module.split(".")
    if len(parts) >= 3 or (len(parts) == 2 and modules[module][1]):
        return ".".join(parts[:2])
    return module


def room_graph(graph, modules):
    """``{room: {room it imports: "module -> module" of the first such import}}``."""
    rooms = {}
    for here, edges in graph.items():
        for there in edges:
            a, b = room_of(here, modules), room_of(there, modules)
            if a != b:
                rooms.setdefault(a, {}).setdefault(b, f"{here} -> {there}")
    return rooms


def rooms():
    """``(modules, graph, rooms, info)``: every module, the module import
    graph, the room graph, and per room ``{"files", "lines", "about"}`` (the
    first line of its package docstring, or of its module's)."""
    modules = package_modules(PACKAGES)
    graph = import_graph(modules)
    info = {}
    for name, (path, _) in modules.items():
        room = room_of(name, modules)
        entry = info.setdefault(room, {"files": 0, "lines": 0, "about": ""})
        entry["files"] += 1
        entry["lines"] += len(path.read_text(encoding="utf-8").splitlines())
        if name == room:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            entry["about"] = doc.strip().split("\n")[0]
    return modules, graph, room_graph(graph, modules), info


def layers(rooms_imports, names):
    """Each room's floor: 0 for a room that imports no other room, else one
    above the highest room it imports (the room graph has no circle)."""
    cycles = import_cycles(rooms_imports)
    if cycles:
        raise ValueError("rooms that import each other cannot be drawn in floors: "
                         + "; ".join(" -> ".join(cycle) for cycle in cycles))
    floor = {}

    def of(room):
        if room not in floor:
            floor[room] = 1 + max((of(there) for there in rooms_imports.get(room, {})), default=-1)
        return floor[room]

    for room in names:
        of(room)
    return floor


def reduced(rooms_imports):
    """The room graph without the arrows that another way already implies
    (its transitive reduction): what the drawing shows."""
    def reach(start, skip):
        seen, todo = set(), [b for b in rooms_imports.get(start, {}) if b != skip]
        while todo:
            room = todo.pop()
            if room not in seen:
                seen.add(room)
                todo.extend(rooms_imports.get(room, {}))
        return seen

    return {a: sorted(b for b in edges if b not in reach(a, b)) for a, edges in rooms_imports.items()}


def _files(n):
    return f"{n} file" if n == 1 else f"{n} files"


def _short(room):
    return room.replace("kerasbert_apps.", "apps: ").replace("kerasbert.", "")


def rooms_png():
    """The drawing: one box a room (its files and lines), a floor a row,
    the arrows that no other way implies. PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, _, rooms_imports, info = rooms()
    floor = layers(rooms_imports, info)
    rows = {}
    for room in sorted(info, key=lambda r: (floor[r], r)):
        rows.setdefault(floor[room], []).append(room)
    width = max(len(r) for r in rows.values())
    figure, axes = plt.subplots(figsize=(1.9 * width + 1, 1.25 * len(rows) + 0.6))
    where = {}
    for level, members in rows.items():
        for i, room in enumerate(members):
            x = (i + 0.5) * width / len(members)
            where[room] = (x, level)
    for a, targets in reduced(rooms_imports).items():
        for b in targets:
            (x1, y1), (x2, y2) = where[a], where[b]
            axes.annotate("", xy=(x2, y2 + 0.22), xytext=(x1, y1 - 0.22),
                          arrowprops={"arrowstyle": "->", "color": "#888888", "lw": 0.8})
    for room, (x, y) in where.items():
        apps = room.startswith("kerasbert_apps")
        axes.text(x, y, f"{_short(room)}\n{_files(info[room]['files'])}, {info[room]['lines']:,} lines",
                  ha="center", va="center", fontsize=8,
                  bbox={"boxstyle": "round,pad=0.35", "fc": "#dbe8f5" if apps else "#f5e1e6", "ec": "#555555"})
    axes.set_xlim(-0.2, width + 0.2)
    axes.set_ylim(-0.6, len(rows) - 0.4)
    axes.axis("off")
    axes.set_title("Rooms and their imports (an arrow: imports; arrows another way implies left out)", fontsize=9)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()


def rooms_markdown(image):
    """The table of rooms under the drawing: what lives there, its size, the
    rooms it imports."""
    _, _, rooms_imports, info = rooms()
    floor = layers(rooms_imports, info)
    out = [f"![The rooms of kerasbert and kerasbert_apps, and their imports]({image})", "",
           "| room | what lives there | files | lines | imports |", "|---|---|---:|---:|---|"]
    for room in sorted(info, key=lambda r: (-floor[r], r)):
        imports = ", ".join(f"`{_short(b)}`" for b in sorted(rooms_imports.get(room, {}))) or "nothing of ours"
        out.append(f"| `{room}` | {info[room]['about']} | {info[room]['files']} | {info[room]['lines']:,} | {imports} |")
    return "\n".join(out) + "\n"
