"""The package layout is a layering: lower layers never import higher ones or the CLI, and
no two subpackages import each other (docs/design.md, "Package layout"). The code around
the package (the workflow's Snakefile and rules, bench/, scripts/, examples/) may import any
public name of it but no private one (a module or name starting with `_`), and every name
it imports exists.

Every module's imports are read with `ast` (module level and inside functions alike, since
a lazy import is still a dependency), so the test needs nothing importable and sees every
edge. Each check is also run against a deliberately bad synthetic edge, so a checker that
silently stopped finding violations would fail here too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "minisandbox"

#: Top-level modules that are contracts (data formats and small shared helpers).
CONTRACTS = {
    "__init__",
    "errors",
    "fsutil",
    "tools",
    "paths",
    "records",
    "catalog",
    "manifest",
    "index",
    "status",
    "progress",
    "syspkgs",
    "logformats",
    "workflowconfig",
}

#: layer -> the layers it may import (itself included).
ALLOWED = {
    "contracts": {"contracts"},
    "sandbox": {"contracts", "sandbox"},
    "node": {"contracts", "sandbox", "node"},
    "pipeline": {"contracts", "sandbox", "node", "pipeline"},
    "grading": {"contracts", "sandbox", "node", "grading"},
    "task": {"contracts", "sandbox", "node", "pipeline", "grading", "task"},
    # the workflow's jobs that compose building and grading (beside `task`, not above it)
    "workflowjobs": {"contracts", "sandbox", "node", "pipeline", "grading", "workflowjobs"},
    # integrations reach the node, the sandbox and grading only through the `task` facade
    "integrations": {"contracts", "task", "integrations"},
    "cli": {"contracts", "sandbox", "node", "pipeline", "grading", "task", "workflowjobs", "integrations", "cli"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "contracts"
    if len(parts) == 2 and (parts[1] in CONTRACTS):
        return "contracts"
    if parts[1] in ALLOWED:
        return parts[1]
    raise AssertionError(
        f"{module}: not in any layer; add it to CONTRACTS or a subpackage (tests/test_architecture.py)"
    )


def _is_package(module: str) -> bool:
    return (PKG.parent / module.replace(".", "/") / "__init__.py").exists()


def _exists(module: str) -> bool:
    base = PKG.parent / module.replace(".", "/")
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def imports_of(path: Path) -> set[str]:
    """The minisandbox modules `path` imports, resolved to module names."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "minisandbox")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "minisandbox":
                continue
            for alias in node.names:  # `from pkg import module` imports the module
                sub = f"{target}.{alias.name}"
                out.add(sub if _is_package(target) and _exists(sub) else target)
    out.discard(me)
    return out


def module_edges() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted(PKG.rglob("*.py"))}


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for src, targets in edges.items():
        for dst in sorted(targets):
            if layer_of(dst) not in ALLOWED[layer_of(src)]:
                bad.append(f"{src} ({layer_of(src)}) imports {dst} ({layer_of(dst)})")
    return bad


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path (first node repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def subpackage_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for src, targets in edges.items():
        for dst in targets:
            a, b = layer_of(src), layer_of(dst)
            if a != b:
                graph.setdefault(a, set()).add(b)
    return graph


def test_every_module_is_in_a_layer() -> None:
    for module in module_edges():
        layer_of(module)


def test_lower_layers_never_import_higher_ones_or_the_cli() -> None:
    assert layer_violations(module_edges()) == []


def test_the_check_catches_a_bad_edge() -> None:
    edges = module_edges()
    edges["minisandbox.sandbox.sandbox"] = edges["minisandbox.sandbox.sandbox"] | {"minisandbox.node.store"}
    edges["minisandbox.index"] = edges["minisandbox.index"] | {"minisandbox.cli"}
    bad = layer_violations(edges)
    assert "minisandbox.sandbox.sandbox (sandbox) imports minisandbox.node.store (node)" in bad
    assert "minisandbox.index (contracts) imports minisandbox.cli (cli)" in bad
    assert len(bad) == 2


def test_no_import_cycles_between_subpackages_or_modules() -> None:
    edges = module_edges()
    assert find_cycle(subpackage_graph(edges)) is None
    assert find_cycle(edges) is None


def test_the_cycle_check_catches_a_cycle() -> None:
    edges = module_edges()
    edges["minisandbox.sandbox.sandbox"] = edges["minisandbox.sandbox.sandbox"] | {"minisandbox.sandbox.shell"}
    assert find_cycle(edges) == [
        "minisandbox.sandbox.sandbox",
        "minisandbox.sandbox.shell",
        "minisandbox.sandbox.sandbox",
    ]
    assert find_cycle(
        subpackage_graph(
            {
                "minisandbox.node.store": {"minisandbox.grading.grading"},
                "minisandbox.grading.evaluate": {"minisandbox.node.cache"},
            }
        )
    ) == ["grading", "node", "grading"]


def test_imports_are_resolved_from_the_source() -> None:
    """The walker sees lazy and `from pkg import module` imports (what the checks rely on)."""
    edges = module_edges()
    assert (
        "minisandbox.sandbox.rootfs" in edges["minisandbox.sandbox.sandbox"]
    )  # from minisandbox.sandbox import rootfs
    assert "minisandbox.grading.validate" in edges["minisandbox.cli.pipeline"]  # inside a function
    assert "minisandbox.sandbox.sandbox" in edges["minisandbox.sandbox.shell"]


def test_init_program_stays_stdlib_only() -> None:
    """init_program runs as `python -I -S init_program.py` (the fork server, each sandbox's
    init and helpers): its project imports are the error class and the seccomp filter (itself
    stdlib-only), each guarded by a fallback. The controller side (rootfs) starts it and
    imports nothing else of the project."""
    edges = module_edges()
    assert edges["minisandbox.sandbox.init_program"] == {"minisandbox.errors", "minisandbox.sandbox.seccomp"}
    assert edges["minisandbox.sandbox.seccomp"] == set()
    assert edges["minisandbox.sandbox.rootfs"] == {"minisandbox.sandbox.init_program"}
    src = (PKG / "sandbox" / "init_program.py").read_text()
    assert src.count("except ImportError:") == 2


@pytest.mark.parametrize("sub", ["sandbox", "node", "pipeline", "grading", "cli", "integrations"])
def test_each_subpackage_says_what_it_owns_and_may_import(sub: str) -> None:
    doc = ast.get_docstring(ast.parse((PKG / sub / "__init__.py").read_text()))
    assert doc and "import" in doc.lower(), f"src/minisandbox/{sub}/__init__.py: docstring must say what it may import"


# -- the code around the package: workflow, bench, scripts, examples -----------------------


#: Files outside the package that import it (Snakemake files are not Python: their import
#: statements are read one by one).
def outside_files() -> list[Path]:
    files = [ROOT / "workflow" / "Snakefile", *sorted((ROOT / "workflow").rglob("*.smk"))]
    for folder in ("bench", "scripts", "examples"):
        files += sorted((ROOT / folder).rglob("*.py"))
    return [f for f in files if f.is_file()]


_IMPORT_LINE = re.compile(r"^\s*(from\s+minisandbox[\w.]*\s+import\b|import\s+minisandbox\b)")


def _import_statements(path: Path) -> list[ast.stmt]:
    """Every import statement of `path`, at any depth."""
    text = path.read_text()
    if path.suffix == ".py":
        tree = ast.parse(text, str(path))
        return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    out: list[ast.stmt] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not _IMPORT_LINE.match(lines[i]):
            i += 1
            continue
        start, stmt = i, lines[i].strip()
        while stmt.count("(") > stmt.count(")") or stmt.endswith("\\"):
            i += 1
            stmt = stmt.removesuffix("\\") + " " + lines[i].strip()
        node = ast.parse(stmt).body[0]
        ast.increment_lineno(node, start)
        out.append(node)
        i += 1
    return out


def outside_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, imported name or None) for each use of the package in `path`."""
    out = []
    for node in _import_statements(path):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "minisandbox"]
        elif not node.level and (node.module or "").split(".")[0] == "minisandbox":
            out += [(node.lineno, node.module, a.name) for a in node.names]
    return out


def _module_file(module: str) -> Path | None:
    base = PKG.parent / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _top_level_names(path: Path) -> set[str] | None:
    """Names `path` defines at module level; None if it answers any name (`__getattr__`)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    names.update((a.asname or a.name).split(".")[0] for a in sub.names)
                elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                    names.add(sub.name)
                elif isinstance(sub, ast.Assign):
                    names.update(n.id for t in sub.targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def outside_violations(files: list[Path]) -> list[str]:
    bad = []
    for path in files:
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        for line, module, name in outside_imports(path):
            private = [p for p in module.split(".") if p.startswith("_") and p != "__main__"]
            if name is not None and name.startswith("_") and name != "__version__":
                private.append(name)
            if private:
                bad.append(f"{where}:{line}: imports private {'.'.join([module] + ([name] if name else []))}")
                continue
            src = _module_file(module)
            if src is None:
                bad.append(f"{where}:{line}: imports {module}, which does not exist")
            elif name is not None and _module_file(f"{module}.{name}") is None:
                defined = _top_level_names(src)
                if defined is not None and name not in defined:
                    bad.append(f"{where}:{line}: imports {name} from {module}, which has no such name")
    return bad


def outside_edges() -> dict[str, set[str]]:
    """File (relative to the checkout) -> the package modules it imports."""
    edges = {}
    for path in outside_files():
        mods = set()
        for _, module, name in outside_imports(path):
            sub = f"{module}.{name}" if name else None
            mods.add(sub if sub and _module_file(sub) else module)
        edges[str(path.relative_to(ROOT))] = mods
    return edges


def test_workflow_bench_scripts_import_only_public_names_that_exist() -> None:
    assert outside_violations(outside_files()) == []


def test_the_outside_check_sees_snakemake_files_and_catches_private_and_missing_names(tmp_path: Path) -> None:
    edges = outside_edges()
    assert "minisandbox.node.signing" in edges["workflow/Snakefile"]
    assert "minisandbox.pipeline.plan" in edges["workflow/rules/common.smk"]  # a parenthesised import
    assert any(edges[f] for f in edges if f.startswith("bench/")) and any(
        edges[f] for f in edges if f.startswith("scripts/")
    )
    rules = tmp_path / "bad.smk"
    rules.write_text(
        "rule x:\n    run:\n        from minisandbox.node.cache import (\n            Cache,\n"
        "            _private,\n        )\n        import minisandbox.logparsers\n"
        "from minisandbox.catalog import NoSuchName\n"
    )
    assert outside_violations([rules]) == [
        f"{rules}:3: imports private minisandbox.node.cache._private",
        f"{rules}:7: imports minisandbox.logparsers, which does not exist",
        f"{rules}:8: imports NoSuchName from minisandbox.catalog, which has no such name",
    ]


# -- the module map of docs/design.md and the subpackage docstrings --------------------------

_MAP_ENTRY = re.compile(r"^(  |    )([\w]+\.py|[\w]+/)(?:\s|$)")


def design_map() -> dict[str, set[str]]:
    """docs/design.md's "Package layout" block: directory ("" for the package root) -> the
    module files it lists (a subpackage's line stands for its __init__.py)."""
    text = (ROOT / "docs" / "design.md").read_text()
    block = text.split("## Package layout", 1)[1].split("```\n", 2)[1]
    out: dict[str, set[str]] = {"": set()}
    current = ""
    for line in block.splitlines():
        m = _MAP_ENTRY.match(line)
        if not m:
            continue
        indent, name = m.groups()
        if len(indent) == 2:
            current = ""
            if name.endswith("/"):
                current = name[:-1]
                out.setdefault(current, set())
                continue
        if not (current and name == "__init__.py"):  # a subpackage's own line stands for it
            out.setdefault(current, set()).add(name)
    return out


def package_tree() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        folder = "/".join(rel.parts[:-1])
        if folder and rel.name == "__init__.py":
            out.setdefault(folder, set())
            continue
        out.setdefault(folder, set()).add(rel.name)
    return out


def test_the_design_module_map_lists_every_module_and_nothing_else() -> None:
    """docs/design.md's map against the tree: whoever adds, renames or splits a module
    updates the map."""
    listed, tree = design_map(), package_tree()
    missing = sorted(f"{d}/{m}".lstrip("/") for d in tree for m in tree[d] - listed.get(d, set()))
    stale = sorted(f"{d}/{m}".lstrip("/") for d in listed for m in listed[d] - tree.get(d, set()))
    assert (missing, stale) == ([], []), "docs/design.md 'Package layout': add the missing, drop the stale"


@pytest.mark.parametrize("sub", ["sandbox", "node", "pipeline", "grading", "cli", "integrations"])
def test_each_subpackage_docstring_names_each_of_its_modules(sub: str) -> None:
    doc = ast.get_docstring(ast.parse((PKG / sub / "__init__.py").read_text())) or ""
    words = set(re.findall(r"[\w]+", doc))
    unnamed = sorted(p.stem for p in (PKG / sub).glob("*.py") if p.name != "__init__.py" and p.stem not in words)
    assert unnamed == [], f"src/minisandbox/{sub}/__init__.py: its docstring should say what {unnamed} are"


def test_integrations_use_only_the_public_api_of_task() -> None:
    """What an integration imports from `minisandbox.task` is in its `__all__` (the facade's
    public API; the layer table keeps them off node, sandbox, pipeline and grading)."""
    task_all = next(
        ast.literal_eval(n.value)
        for n in ast.parse((PKG / "task.py").read_text()).body
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets)
    )
    used = {}
    for path in sorted((PKG / "integrations").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "minisandbox.task":
                used.update({a.name: path.name for a in node.names})
    assert used and {n: f for n, f in used.items() if n not in task_all} == {}
    assert layer_violations({"minisandbox.integrations.x": {"minisandbox.node.cache"}}) == [
        "minisandbox.integrations.x (integrations) imports minisandbox.node.cache (node)"
    ]


# -- names that say what they are: unique across the distribution ----------------------------


def _import_fallbacks(tree: ast.AST) -> set[int]:
    """ids of the classes defined in an `except ImportError:` block: stand-ins for an imported
    class when a module runs as a script without the package (init_program's SandboxError)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and isinstance(node.type, ast.Name) and node.type.id == "ImportError":
            out.update(id(n) for n in ast.walk(node) if isinstance(n, ast.ClassDef))
    return out


def duplicate_names(paths: list[Path], base: Path = PKG.parent) -> dict[str, list[str]]:
    """Module file names and class names defined in more than one place."""
    seen: dict[str, list[str]] = {}
    for path in paths:
        rel = str(path.relative_to(base))
        if path.name not in ("__init__.py", "__main__.py"):
            seen.setdefault(f"module {path.name}", []).append(rel)
        tree = ast.parse(path.read_text())
        fallbacks = _import_fallbacks(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and id(node) not in fallbacks:
                seen.setdefault(f"class {node.name}", []).append(f"{rel}:{node.lineno}")
    return {name: where for name, where in seen.items() if len(where) > 1}


def test_no_two_modules_or_classes_share_a_name() -> None:
    """Names say what they are: no two modules of the distribution share a file name, no two
    classes a name (a class defined as the fallback of a failed import does not count)."""
    assert duplicate_names(sorted(PKG.rglob("*.py"))) == {}


def test_the_name_check_catches_a_duplicate(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "cache.py").write_text("class Artifact:\n    pass\n")
    (tmp_path / "b" / "cache.py").write_text(
        "try:\n    from x import Artifact\nexcept ImportError:\n"
        "    class Artifact:\n        pass\nclass Artifact:\n    pass\n"
    )
    assert duplicate_names(sorted(tmp_path.rglob("*.py")), tmp_path) == {
        "module cache.py": ["a/cache.py", "b/cache.py"],
        "class Artifact": ["a/cache.py:1", "b/cache.py:6"],
    }
