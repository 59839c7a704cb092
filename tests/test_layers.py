"""isocal in layers: the import graph of its modules is a DAG, read from the ground up.

Every module of `isocal/` (but `__init__.py`, the hand-written PEP 562 table of the public names, and nbdev's
`_modidx.py`) has its layer declared once, in `LAYERS` below. The guard parses every module with `ast` and collects
its imports of isocal modules wherever they are, at module level or inside a function or class:
`from .x import a`, `from . import x`, `from isocal.x import a`, `from isocal import x`, `import isocal.x`. A name
imported from the package itself (`from isocal import fit_staircase`) counts as an import of the module that defines
it, by the package's `_HOME` table; `from isocal import __version__` imports no module. It fails on

* an import of a module in a higher layer;
* an import circle, within a layer or across layers;
* a module present in `isocal/` but not declared (or declared but absent, or an import of a module that does not exist).

The last tests plant each fault in a small synthetic package under `tmp_path` and check that the guard reports it.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / 'isocal'
NOT_MODULES = {'__init__', '_modidx'}     # the PEP 562 table (the one exception to the layers) and nbdev's index

# The layer of every module: one line a module, so that adding a module is adding a line.
LAYERS = {
    # 1. validation, exact arithmetic, files
    'core': 1,
    'portable': 1,
    # 2. algorithms: each imports core and the algorithms it truly builds on
    'pava': 2,
    'derivatives': 2,
    'decomposition': 2,
    'convex': 2,
    'quantile': 2,
    'online': 2,
    'venn_abers': 2,
    'forward': 2,
    'online_to_batch': 2,
    'thresholds': 2,
    'aum': 2,
    'aum_kernel': 2,
    'metrics': 2,
    'metrics_multiclass': 2,
    # 3. the fit layer: choosing between the algorithms
    'fit': 3,
    # distributed is here, below the estimators, not above them: IsotonicCalibrator accepts Dask collections and must
    # call fit_isotonic_dask, and keeping that behaviour requires distributed below the estimators.
    'distributed': 3,
    'distributed_convex': 3,
    # 4. estimators and diagnostics
    'isotonic': 4,
    'calibration': 4,
    'labeler': 4,
    'multiclass': 4,
    'diagnostics': 4,
    # 5. the command line
    'cli': 5,
    'cli_read': 5,
    'cli_write': 5,
    'cli_demo': 5,
    'cli_calibrate': 5,
    'cli_warmup': 5,
}


# ---------------------------------------------------------------- the guard

def read_package(path: Path) -> tuple[dict, dict]:
    """({module name: source} of the modules in the package directory `path`, the `_HOME` table of its `__init__.py`
    (name -> module; {} if none))."""
    sources = {p.stem: p.read_text(encoding='utf-8') for p in sorted(path.glob('*.py')) if p.stem not in NOT_MODULES}
    home, init = {}, path / '__init__.py'
    if init.exists():
        for node in ast.walk(ast.parse(init.read_text(encoding='utf-8'))):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == '_HOME' for t in node.targets):
                home = ast.literal_eval(node.value)
    return sources, home


def imports_of(source: str, home: dict, package: str = 'isocal') -> list[tuple[str, int]]:
    """(imported isocal module, line) for every import in `source`, at any depth. A name from the package itself is
    the module `home` says defines it, or no module (`__version__`); a subpackage path counts as its first part."""
    found = []

    def from_package(name, line):
        if name in home: found.append((home[name], line))
        elif not name.startswith('__'): found.append((name, line))       # `from . import x`: the module x

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split('.')
                if parts[0] == package and len(parts) > 1: found.append((parts[1], node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level > 1: raise ValueError(f'line {node.lineno}: a relative import above the package')
            parts = (node.module or '').split('.') if node.module else []
            if node.level == 1 or (parts and parts[0] == package):
                inner = parts if node.level == 1 else parts[1:]
                if inner: found.append((inner[0], node.lineno))
                else:
                    for alias in node.names: from_package(alias.name, node.lineno)
    return found


def layer_problems(sources: dict, layers: dict, home: dict) -> list[str]:
    "Everything wrong with the package's layering, one line each (empty: a layered DAG)."
    problems = [f'isocal.{m} is not declared in LAYERS' for m in sources if m not in layers]
    problems += [f'isocal.{m} is declared in LAYERS but is not a module of the package' for m in layers
                 if m not in sources]
    graph = {m: set() for m in sources}
    for m, src in sources.items():
        for target, line in imports_of(src, home):
            if target == m: continue
            if target not in sources:
                problems.append(f'isocal.{m}, line {line}: imports isocal.{target}, which is not a module of the package')
                continue
            graph[m].add(target)
            if m in layers and target in layers and layers[target] > layers[m]:
                problems.append(f'isocal.{m} (layer {layers[m]}), line {line}: imports isocal.{target}, '
                                f'of the higher layer {layers[target]}')
    problems += [f"import circle: {' -> '.join(f'isocal.{m}' for m in cycle)}" for cycle in circles(graph)]
    return problems


def circles(graph: dict) -> list[list[str]]:
    """One circle through each strongly connected component of more than one module (Tarjan), written as a path that
    returns to its start: a -> b -> a."""
    index, low, stack, on_stack, components, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v: break
            if len(component) > 1: components.append(set(component))

    for v in sorted(graph):
        if v not in index: visit(v)
    out = []
    for component in components:                    # a shortest way back to the start, inside the component
        start = min(component)
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop(0)
            nxt = sorted(w for w in graph[path[-1]] if w in component)
            if start in nxt:
                out.append(path + [start])
                break
            for w in nxt:
                if w not in seen:
                    seen.add(w)
                    paths.append(path + [w])
    return sorted(out)


# ---------------------------------------------------------------- isocal itself

def test_isocal_is_a_layered_dag():
    sources, home = read_package(PACKAGE)
    assert home, 'the _HOME table of isocal/__init__.py was not found'
    problems = layer_problems(sources, LAYERS, home)
    assert problems == [], 'the layers of isocal are broken:\n' + '\n'.join(problems)


def test_the_public_table_names_declared_modules():
    "Every top-level name's home (`_HOME` of isocal/__init__.py, the one exception to the layers) is a declared module."
    _, home = read_package(PACKAGE)
    assert sorted(set(home.values()) - set(LAYERS)) == []


# ---------------------------------------------------------------- the guard catches what it should

def plant(tmp_path, modules: dict, home=None) -> Path:
    "A synthetic package `isocal` under `tmp_path` with these module sources (and a `_HOME` table)."
    pkg = tmp_path / 'isocal'
    pkg.mkdir(parents=True)
    (pkg / '__init__.py').write_text(f'_HOME = {home or {}!r}\n')
    for name, src in modules.items():
        (pkg / f'{name}.py').write_text(src)
    return pkg


def test_every_import_form_is_read(tmp_path):
    src = '''
from __future__ import annotations
import numpy as np
import isocal
from .a import x
from . import b
from isocal.c import y
import isocal.d
import isocal.e as e
from isocal import f, g_name, __version__
from isocal.h.sub import z
if TYPE_CHECKING:
    from .i import w
try:
    from .j import v
except ImportError:
    pass

def later():
    from .k import u
    import isocal.l

class Lazy:
    def method(self):
        from isocal import m
'''
    got = imports_of(src, home={'g_name': 'g'})
    assert sorted({m for m, _ in got}) == list('abcdefghijklm')
    assert ('k', 20) in got and ('m', 25) in got      # imports inside a function and a method, with their lines


def test_catches_a_planted_circle(tmp_path):
    pkg = plant(tmp_path, {'low': 'import numpy\n',
                           'a': 'from .low import x\nfrom .b import f\n',
                           'b': 'def f():\n    from isocal.c import g    # inside a function\n    return g\n',
                           'c': 'class C:\n    def m(self):\n        import isocal.a\n'})
    problems = layer_problems(read_package(pkg)[0], {'low': 1, 'a': 2, 'b': 2, 'c': 2}, {})
    assert problems == ['import circle: isocal.a -> isocal.b -> isocal.c -> isocal.a']


def test_catches_a_circle_across_layers_and_through_the_public_table(tmp_path):
    pkg = plant(tmp_path, {'algo': 'def f():\n    from isocal import Estimator   # a re-export, upwards\n',
                           'est': 'from .algo import f\nclass Estimator: pass\n'}, home={'Estimator': 'est'})
    sources, home = read_package(pkg)
    problems = layer_problems(sources, {'algo': 2, 'est': 4}, home)
    assert problems == ['isocal.algo (layer 2), line 2: imports isocal.est, of the higher layer 4',
                        'import circle: isocal.algo -> isocal.est -> isocal.algo']


def test_catches_a_planted_upward_import(tmp_path):
    pkg = plant(tmp_path, {'core': 'def check(x):\n    import isocal.fit   # upwards, inside a function\n',
                           'fit': 'from . import core\n'})
    problems = layer_problems(read_package(pkg)[0], {'core': 1, 'fit': 3}, {})
    assert problems[0] == 'isocal.core (layer 1), line 2: imports isocal.fit, of the higher layer 3'
    assert problems[1:] == ['import circle: isocal.core -> isocal.fit -> isocal.core']
    pkg2 = plant(tmp_path / 'one', {'core': 'def check(x):\n    from isocal.fit import f\n', 'fit': 'f = 1\n'})
    assert layer_problems(read_package(pkg2)[0], {'core': 1, 'fit': 3}, {}) == \
        ['isocal.core (layer 1), line 2: imports isocal.fit, of the higher layer 3']


def test_catches_undeclared_and_missing_modules(tmp_path):
    pkg = plant(tmp_path, {'core': 'x = 1\n', 'newcomer': 'from .core import x\nfrom .nowhere import y\n'})
    problems = layer_problems(read_package(pkg)[0], {'core': 1, 'gone': 2}, {})
    assert problems == ['isocal.newcomer is not declared in LAYERS',
                        'isocal.gone is declared in LAYERS but is not a module of the package',
                        'isocal.newcomer, line 2: imports isocal.nowhere, which is not a module of the package']


def test_same_layer_imports_without_a_circle_pass(tmp_path):
    pkg = plant(tmp_path, {'core': 'x = 1\n', 'a': 'from .core import x\n', 'b': 'from .a import x\nfrom . import core\n',
                           'c': 'from isocal import __version__\nfrom isocal import b\n'})
    assert layer_problems(read_package(pkg)[0], {'core': 1, 'a': 2, 'b': 2, 'c': 5}, {}) == []
