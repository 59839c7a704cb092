#!/usr/bin/env python
"""Build the isocal documentation site offline into `_docs/`, without Quarto (with Quarto, `nbdev_docs` still works).

The site is built from the notebooks' SAVED OUTPUTS: nothing is executed (`python .ci/notebooks.py run` executes
and saves them). `--nbs DIR` builds from another folder of executed notebooks (e.g. executed copies in a scratch
directory). Pages: the notebooks listed in nbs/sidebar.yml (index first), then any other notebook not starting
with `_`. Each page goes through three steps, in a process of its own (one per CPU at a time; on Linux forked from
the builder after it has imported what the pages import, `preload`, which saves most of a page's time):

1. nbdev processing: `nbdev.processors.FilterDefaults`, the processor list `nbdev_docs` uses (frontmatter,
   add_show_docs + exec_show_docs for the API docs, rm_export/hide_ for export and hide cells, add_links, add_fold,
   clean_show_doc, ...). Changes: exec_show_docs (which re-runs import/export cells in-process) skips the cells
   nbdev_test skips; `add_constant_docs` gives the public constants of exported cells an entry too; and show_doc
   renders with `SiteRenderer` (real class signatures, own docstrings only, numpydoc sections as lists of prose,
   properties and classmethods marked, every member `api_members` names, no private names; see its docstring for
   why nbdev's falls short). Each API entry is one `<div class="api-entry">` (a <section> in the HTML).
2. Adapt what nbdev leaves for Quarto (`to_markdown`): the frontmatter raw cell becomes the page title/subtitle; the
   leading `#| key: value` cell options are applied then removed (include/echo/output: false, output: asis,
   code-fold -> <details>, fig-alt/fig-cap); Quarto callouts become blockquotes, other `:::` fenced divs lose their
   fences; `[txt](url){target=...}` attributes are dropped; links to notebooks or to the doc host point to the
   local pages. Figures get alt text: `fig-alt`/`fig-cap`, else the titles the cell's code sets, else the first
   sentence of the markdown cell before it.
3. Render: nbconvert's MarkdownExporter (figures into `figures/<page>/`), then pandoc from pypandoc-binary with
   `.ci/docs_site.css`, a sidebar in nbs/sidebar.yml's sections (site name, version, source link, search box), a
   table of contents (right-hand column on wide screens), previous/next links and a link to the page's source.

Then the whole site: links to anchors that do not exist point at their page, or, on a private name, are removed;
KaTeX goes to `katex/`; Pagefind indexes the pages into `pagefind/`.

Mathematics: KaTeX, rendered in the browser from `katex/` (pandoc's `--katex`). pandoc's MathML is cramped in
Chromium (big operators not enlarged, accents misplaced); KaTeX typesets like JupyterLab's MathJax, is one script
plus woff2 fonts (no network), and is fast. It comes from npm (`npm pack katex@KATEX`, once, cached in
~/.cache/isocal-docs or $ISOCAL_DOCS_CACHE), because no maintained PyPI package ships KaTeX's dist and node is
needed for nothing else. Search: Pagefind (`pagefind[extended]` from PyPI, whose wheel carries the binary) builds
a static index; its UI needs the site served over http (`python -m http.server -d _docs`), and says so from file://.

`--readme` writes README.md from nbs/index.ipynb through steps 1-2 (markdown, not executed; the saved show_doc
outputs and printed outputs kept, nbdev's own show_doc) so it is byte-for-byte reproducible; `--check-readme` exits 1 with a diff when
README.md is stale.

Add a page: create nbs/NN_name.ipynb whose first markdown cell is `# Title` (optionally `> description`), and list
it in a section of nbs/sidebar.yml. It becomes _docs/NN_name.html.
"""
import argparse, ast, difflib, importlib, inspect, io, json, os, re, shutil, subprocess, sys, tarfile, tempfile, time
import pkgutil, tokenize, typing, warnings
from multiprocessing import get_context
from multiprocessing.connection import wait as mp_wait
from pathlib import Path

import nbformat, pypandoc, yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbconvert import MarkdownExporter
from jinja2 import DictLoader
from traitlets.config import Config
from execnb.nbio import dict2nb, mk_cell
from fastcore.docments import docments
from nbdev.config import get_config
from nbdev.doclinks import NbdevLookup
import nbdev.showdoc
from nbdev.doclinks import _nbpath2html
from nbdev.frontmatter import _md2dict
from nbdev.process import Processor, extract_directives
from nbdev.processors import FilterDefaults, add_show_docs, exec_show_docs

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
CFG = get_config(path=ROOT)
FLAGS = set(CFG.get('tst_flags', '').split())
DOC_URL = CFG.doc_host.rstrip('/') + CFG.doc_baseurl.rstrip('/')  # where nbdev's doc links point
PKG = CFG.lib_name
NBS_REL = Path(CFG.nbs_path).resolve().relative_to(ROOT).as_posix()  # nbs_path is absolute in nbdev's config
SHOWN = set()  # names the page's notebook documents with show_doc cells of its own (build_page fills it)

def api_div(md):
    """One API entry's markdown (a heading, the signature, the description) in a `<div class="api-entry">`: an entry
    is one element of the page (tests/test_docs.py reads each entry's signature and description from it)"""
    return f'<div class="api-entry">\n\n{md.strip()}\n\n</div>\n\n'

# ---------------------------------------------------------------- pages and titles

def sidebar_tree():
    "nbs/sidebar.yml's `contents`: notebook names and `{section: name, contents: [...]}` groups"
    return yaml.safe_load((NBS/'sidebar.yml').read_text(encoding='utf-8'))['website']['sidebar']['contents']

def flat(items):
    "The notebook names in a sidebar tree, in order"
    for it in items or []:
        if isinstance(it, str): yield it
        elif isinstance(it, dict): yield from flat(it.get('contents') or [it.get('href', '')])

def page_stems(extra=(), nbs=NBS):
    "Notebook stems in sidebar order: nbs/sidebar.yml, then other `nbs`/*.ipynb not starting with `_`, then `extra`"
    nbs = Path(nbs)
    stems = [Path(f).stem for f in flat(sidebar_tree()) if f.endswith('.ipynb') and (nbs/f).exists()]
    stems += sorted(p.stem for p in nbs.glob('*.ipynb') if p.name[0] != '_' and p.stem not in stems)
    stems += [s for s in extra if s not in stems]
    return sorted(stems, key=lambda s: s != 'index')  # stable: index first, the rest keep their order

def page_title(stem, nbs=NBS):
    "The notebook's first markdown `# Title` (nbdev's frontmatter rule), else its stem"
    nb = nbformat.read(Path(nbs)/f'{stem}.ipynb', as_version=4)
    for c in nb.cells:
        if c.cell_type == 'markdown' and (t := _md2dict(c.source).get('title')): return t
    return stem

# ---------------------------------------------------------------- nbdev's skip rule

def skipped(directives):
    "Would nbdev_test skip a cell with these nbdev `directives`? (exec_show_docs does not re-run those)"
    return directives.get('eval:', [''])[0].lower() == 'false' or bool(FLAGS & directives.keys())

# ---------------------------------------------------------------- 1. nbdev processing

class exec_show_docs_noskip(exec_show_docs):
    "nbdev's `exec_show_docs`, except it never runs cells nbdev_test skips (a `#| slow` cell with an import, say)"
    def __call__(self, cell):
        if not (cell.cell_type == 'code' and skipped(cell.directives_)): return super().__call__(cell)

class add_constant_docs(Processor):
    """API entries for the public constants of exported cells (names in the module's `__all__` bound by an assignment,
    which nbdev's add_show_docs leaves out): a markdown cell after the cell with `NAME = <its source>` and the
    constant's description: the string right after the assignment (an attribute docstring), else the comment ending
    its line, else `#:` comment lines just above it. Constants shown with show_doc in the notebook are left alone."""
    def begin(self):
        cells = self.nb.cells
        default = next((c.directives_['default_exp'][0] for c in cells if c.cell_type == 'code'
                        and (c.directives_ or {}).get('default_exp')), None)
        for cell in reversed(cells):
            d = (cell.directives_ or {}) if cell.cell_type == 'code' else {}
            mod = (d.get('export') or d.get('exports') or [default])[0]
            if not (d.keys() & {'export', 'exports'}) or 'hide' in d or not mod: continue
            try: names = set(importlib.import_module(f'{PKG}.{mod}').__all__)
            except (ImportError, AttributeError): continue
            entries = [self.entry(n, expr, doc, mod) for n, expr, doc in constants(cell.source) if n in names - SHOWN]
            for md in reversed(entries):
                new = mk_cell(md, cell_type='markdown'); new.directives_ = {}
                cells.insert(cell.idx_ + 1, new)

    @staticmethod
    def entry(name, expr, doc, mod):
        path = ROOT/PKG/f'{mod}.py'
        line = _def_lines(path).get(name)
        src = f'<a class="source-link" href="{CFG.git_url}/blob/{CFG.branch}/{PKG}/{mod}.py#L{line}">source</a>\n\n' \
            if line else ''
        md = f'### {name}\n\n{src}```python\n{name} = {expr}\n```\n\n' + (SiteRenderer.summary(doc) if doc else '')
        return '---\n\n' + api_div(md)

def constants(src):
    "[(name, source of its value, description)] for the module-level assignments in cell source `src`"
    try: tree = ast.parse(src)
    except SyntaxError: return []
    lines, comments = src.splitlines(), {}
    try:
        for t in tokenize.generate_tokens(io.StringIO(src).readline):
            if t.type == tokenize.COMMENT: comments[t.start[0]] = (t.start[1], t.string)
    except (tokenize.TokenError, IndentationError): pass
    out, body = [], tree.body
    for i, st in enumerate(body):
        if isinstance(st, ast.Assign) and len(st.targets) == 1: target, value = st.targets[0], st.value
        elif isinstance(st, ast.AnnAssign) and st.value is not None: target, value = st.target, st.value
        else: continue
        if isinstance(target, ast.Name): pairs = [(target, value)]
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts))
        else: continue
        doc = ''
        nxt = body[i + 1] if i + 1 < len(body) else None
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
            doc = inspect.cleandoc(nxt.value.value)
        elif (c := comments.get(st.end_lineno)) and lines[st.end_lineno - 1][:c[0]].strip():  # at the end of the line
            doc = c[1].lstrip('#:').strip()
        else:
            above, j = [], st.lineno - 1
            while j >= 1 and lines[j - 1].lstrip().startswith('#:'):
                above.insert(0, lines[j - 1].lstrip()[2:].strip()); j -= 1
            doc = ' '.join(above)
        out += [(t.id, ast.get_source_segment(src, v), doc) for t, v in pairs
                if isinstance(t, ast.Name) and t.id[0] != '_']
    return out

class DocsFilter(FilterDefaults):
    """nbdev's docs processors (settings.ini `procs`/`skip_procs` still apply) with `exec_show_docs_noskip`, and
    `add_constant_docs` after nbdev's add_show_docs"""
    def base_procs(self):
        procs = [exec_show_docs_noskip if p is exec_show_docs else p for p in super().base_procs()]
        return procs[:procs.index(add_show_docs) + 1] + [add_constant_docs] + procs[procs.index(add_show_docs) + 1:]

def nbdev_process(nb, path):
    "Run nbdev's processors on nbformat notebook `nb` read from `path`; returns execnb's notebook (`.frontmatter_`)"
    nb = dict2nb(json.loads(nbformat.writes(nb)))
    nb.path_ = str(path)
    cwd = os.getcwd()
    try: os.chdir(NBS); DocsFilter()(nb)  # nbdev reads its config from the cwd
    except Exception as e:
        if not e.__cause__: raise
        raise RuntimeError(f'{e}\n{type(e.__cause__).__name__}: {e.__cause__}\n(nbdev_docs fails the same way: '
                           'nbdev re-runs every cell with an import, exported cells and show_doc cells, outside the '
                           'notebook; keep imports in cells of their own, and show_doc only names those cells define)'
                           ) from None
    finally: os.chdir(cwd)
    return nb

# ---------------------------------------------------------------- API reference (show_doc) for the site

def numpydoc_md(doc):
    """A numpydoc docstring as markdown: section titles bold (not headings); in the list sections each entry one list
    item of prose: `name : type` with an indented description gives "`name` (type): description" (the description's
    lines, and paragraphs, joined), `name : text` alone, or whose text goes on in indented lines (an open bracket or
    quote), gives "`name`: text"; `a, b : ...` names both; a sentence after the entries ends the list"""
    lines, out, i, listing, table = doc.splitlines(), [], 0, False, False
    indented = lambda j: j < len(lines) and lines[j][:1].isspace() and lines[j].strip()
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and re.fullmatch(r'-{3,}', lines[i + 1].strip()) and line.strip():
            out += ['', f'**{line.strip()}**', '']; listing = line.strip() in _LIST_SECTIONS; i += 2
            table = line.strip() in _TABLE_SECTIONS; continue
        if listing and line.strip() and not line[:1].isspace() and ' : ' not in line and \
                (len(line.split()) > 5 or line.rstrip()[-1] in '.,;:'):
            listing = table = False  # a sentence, not an entry: the section's list has ended
            if out and out[-1].strip(): out.append('')
        if listing and line.strip() and not line[:1].isspace():
            name, _, typ = (p.strip() for p in line.partition(' : '))
            desc, i = [], i + 1
            while indented(i) or i < len(lines) and not lines[i].strip() and indented(i + 1):  # blank lines inside
                if lines[i].strip(): desc.append(lines[i].strip())
                i += 1
            parts = [n.strip() for n in name.split(',')]
            names = ', '.join(f'`{n}`' for n in parts) if all(re.fullmatch(r'\*{0,2}\w+', n) for n in parts) \
                else f'`{name}`'
            unclosed = any(typ.count(a) != typ.count(b) for a, b in ('()', '[]', '{}')) or typ.count('"') % 2
            if typ and desc and unclosed:
                desc, typ = [typ] + desc, ''  # "name : text" whose text goes on in the indented lines: all description
            if table:  # parameters: a table of name, type and description, as nbdev's
                if not out[-1].startswith('|'): out += ['| parameter | type | description |', '|---|---|---|']
                cell = lambda s: s.replace('|', '\\|')
                out.append(f'| {names} | {cell(typ if desc else "")} | {cell(" ".join(desc) or typ)} |')
                continue
            out.append(f'- {names} ({typ}): {" ".join(desc)}' if desc and typ else
                       f'- {names}: {" ".join(desc) or typ}' if desc or typ else f'- {names}')
            continue
        if listing and not line.strip(): i += 1; continue  # a tight list: blank lines between entries dropped
        out.append(line)
        i += 1
    return '\n'.join(out)

_LIST_SECTIONS = {'Parameters', 'Returns', 'Yields', 'Raises', 'Attributes', 'Other Parameters', 'Warns'}
_TABLE_SECTIONS = {'Parameters', 'Other Parameters'}  # rendered as a table of the parameters

def _anno(a):
    "An annotation as source text (string and ForwardRef annotations without their quotes)"
    if isinstance(a, str): return a
    if isinstance(a, typing.ForwardRef): return a.__forward_arg__
    return inspect.formatannotation(a)

def _params(sig):
    "The parameters of `sig` as source text, with the `/` and `*` markers"
    out, star = [], False
    ps = list(sig.parameters.values())
    for j, p in enumerate(ps):
        if p.kind is p.VAR_POSITIONAL: star = True
        if p.kind is p.KEYWORD_ONLY and not star: out.append('*'); star = True
        s = ('*' if p.kind is p.VAR_POSITIONAL else '**' if p.kind is p.VAR_KEYWORD else '') + p.name
        if p.annotation is not p.empty: s += ': ' + _anno(p.annotation)
        if p.default is not p.empty: s += (' = ' if p.annotation is not p.empty else '=') + repr(p.default)
        out.append(s)
        if p.kind is p.POSITIONAL_ONLY and (j + 1 == len(ps) or ps[j + 1].kind is not p.POSITIONAL_ONLY): out.append('/')
    return out

def _is_pkg(obj):
    """Is `obj` (a class or function) isocal's own code? Its module is isocal's, or `__main__`: nbdev's exec_show_docs
    runs a notebook's exported cells in an IPython namespace, so the classes show_doc sees are defined there"""
    mod = getattr(obj, '__module__', None) or ''
    return mod == '__main__' or mod.split('.')[0] == PKG

def is_public_class(c):
    "A class isocal defines and lists in its module's `__all__` (any class without `_` when defined by a notebook)"
    if not _is_pkg(c) or c.__name__.startswith('_'): return False
    return c.__module__ == '__main__' or c.__name__ in getattr(sys.modules.get(c.__module__), '__all__', ())

def _code(v):
    "The function behind class attribute `v` (a property's getter, a classmethod's or staticmethod's function), or None"
    f = v.fget if isinstance(v, property) else v.__func__ if isinstance(v, (classmethod, staticmethod)) else v
    return f if inspect.isfunction(f) else None

def _kind(v):
    "How class attribute `v` is marked in its signature: 'property', 'classmethod', 'staticmethod' or ''"
    if isinstance(v, property): return 'property'
    return type(v).__name__ if isinstance(v, (classmethod, staticmethod)) else ''

def api_members(cls):
    """The public members of class `cls` the API reference documents: [(entry name, owner class, raw member)].

    The rule, in one place (the site renders an entry for each; tests/test_docs.py requires one):
    - the name does not start with `_`;
    - the first class of `cls.__mro__` whose namespace has the name (its owner) is one isocal defines;
    - the member is a function, classmethod, staticmethod or property whose code is isocal's.
    So these are left out: what `cls` inherits from scikit-learn (BaseEstimator's `get_params`/`set_params`, the
    mixins' `fit_transform`, `set_output`, `score`, `get_metadata_routing`), from tuple, dict or Exception; the
    `set_*_request` methods scikit-learn's metadata routing generates (descriptors, not functions); and data
    attributes (class constants, NamedTuple fields), which the class's own docstring describes.
    The entry name is `Owner.name` when the owner is a public isocal class (a member inherited from one, such as
    `Portable.save`, is documented there), else `cls.name` (a member of `cls`, or of a private base of it)."""
    out = []
    for k in dict.fromkeys(k for c in cls.__mro__ for k in vars(c)):  # own ones in definition order, then the bases'
        if k.startswith('_'): continue
        owner = next((c for c in cls.__mro__ if k in vars(c)), None)
        if owner is None or not _is_pkg(owner): continue
        v = vars(owner)[k]
        if (f := _code(v)) is None or not _is_pkg(f): continue
        out.append((f'{(owner if owner is not cls and is_public_class(owner) else cls).__name__}.{k}', owner, v))
    return out

def member_doc(cls, k, v):
    """Docstring of member `k` (raw value `v`) of `cls`: its own, else that of the member it overrides in a base class
    isocal defines (as `inspect.getdoc` does, without scikit-learn's or the builtins' docstrings)"""
    for c in cls.__mro__:
        if not _is_pkg(c) or k not in vars(c): continue
        w = vars(c)[k]
        d = w.__doc__ if isinstance(w, property) else getattr(_code(w), '__doc__', None)
        if isinstance(d, str) and d.strip(): return inspect.cleandoc(d)
    return ''

_DEF_LINES = {}  # module file -> {qualified name: line}

def _def_lines(path):
    "{qualified name: line} of the classes, functions, methods and assignments at the top of module file `path`"
    if path not in _DEF_LINES:
        found = {}
        def walk(body, prefix=''):
            for n in body:
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    found.setdefault(prefix + n.name, n.lineno)
                    if isinstance(n, ast.ClassDef): walk(n.body, prefix + n.name + '.')
                elif isinstance(n, (ast.Assign, ast.AnnAssign)):
                    for tg in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                        if isinstance(tg, ast.Name): found.setdefault(prefix + tg.id, n.lineno)
        try: walk(ast.parse(Path(path).read_text(encoding='utf-8')).body)
        except (OSError, SyntaxError): pass
        _DEF_LINES[path] = found
    return _DEF_LINES[path]

def source_url(sym, nm):
    """The link to `sym`'s definition in the repository (settings.ini's git_url, branch and lib_path): its module's
    file at its line, found by qualified name (`nm`, `Class.member`), since the object show_doc sees may be a
    notebook's copy of it; None if isocal's modules do not define it"""
    f = sym.fget if isinstance(sym, property) else getattr(sym, '__func__', sym)
    mod = getattr(f, '__module__', None) or ''
    mods = [mod] if mod.startswith(PKG + '.') else [f'{PKG}.{m.name}' for m in pkgutil.iter_modules([str(ROOT/PKG)])]
    for m in mods:
        path = ROOT/Path(*m.split('.')).with_suffix('.py')
        if (line := _def_lines(path).get(nm)):
            return f'{CFG.git_url}/blob/{CFG.branch}/{path.relative_to(ROOT).as_posix()}#L{line}'
    return None

class SiteRenderer:
    """nbdev's show_doc renderer, for the site (README keeps nbdev's): nbdev 2.4/fastcore take a class's signature
    from `__init__`, so a class without its own (`VennAbers`, a NamedTuple such as `AumResult`, a dict subclass
    such as `IsotonicResult`) shows `(*args, **kwargs)`, and a function without a docstring gets `__call__`'s "Call
    self as a function". Here: `inspect.signature` of the object itself (a class it cannot read shows its bases),
    the object's own docstring only, parameter comments as a list under the code, and for a class its public API
    members (`api_members`: properties as `property C.p: T`, classmethods marked; an override without a docstring
    keeps the one it overrides; members the notebook shows with show_doc of its own are left to that cell; members
    inherited from another public class are listed with a link), and nothing for private names (`__getattr__`)."""
    def __init__(self, sym, name=None, title_level=3):
        self.sym, self.level = sym, title_level
        f = sym.fget if isinstance(sym, property) else sym  # a property has no name of its own
        self.nm = name or getattr(f, '__qualname__', None) or getattr(f, '__name__', None) or repr(sym)

    @staticmethod
    def signature(sym, nm, kind=''):
        """Code line(s) for `sym` called `nm`: `def f(a: int = 1) -> T`, `Cls(a, b)`, `property Cls.p: T` (`kind`
        'property', `sym` its getter) or `@classmethod`/`@staticmethod` (`kind`) above the def; wrapped one parameter
        a line when long"""
        try: sig = inspect.signature(sym, eval_str=False)
        except (ValueError, TypeError):
            if isinstance(sym, type): return f'class {nm}({", ".join(b.__name__ for b in sym.__bases__)})'
            return nm
        ret = '' if isinstance(sym, type) or sig.return_annotation is inspect.Signature.empty else \
              _anno(sig.return_annotation)
        if kind == 'property': return f'property {nm}' + (f': {ret}' if ret else '')
        pre = '' if isinstance(sym, type) else 'async def ' if inspect.iscoroutinefunction(sym) else 'def '
        deco = f'@{kind}\n' if kind else ''
        ret = f' -> {ret}' if ret else ''
        params = _params(sig)
        if '.' in nm and kind != 'staticmethod' and params and params[0] in ('self', 'cls'): params = params[1:]
        one = f'{pre}{nm}({", ".join(params)}){ret}'
        return deco + (one if len(one) <= 88 else f'{pre}{nm}(\n' + ''.join(f'    {p},\n' for p in params) + f'){ret}')

    @staticmethod
    def param_docs(sym):
        "Markdown list of the parameters' comments (fastcore's docments), if any"
        try: dm = docments(sym, full=True)
        except Exception: return ''
        rows = [f'| `{k}` | ' + ' '.join(v['docment'].split()).replace('|', '\\|') + ' |' for k, v in dm.items()
                if v.get('docment') and k != 'return']
        if (r := dm.get('return', {})).get('docment'):
            rows.append('| returns | ' + ' '.join(r['docment'].split()).replace('|', '\\|') + ' |')
        return '\n'.join(['| parameter | description |', '|---|---|'] + rows) if rows else ''

    @staticmethod
    def summary(doc):
        """`doc` with its first paragraph in italics: raw <em> tags, not `*`, which would pair with an asterisk of
        the text (`L*(D)`) and leave a stray one"""
        lines, n = doc.splitlines(), 0
        while n < len(lines) and lines[n].strip() and not (n + 1 < len(lines) and re.fullmatch(r'\s*-{3,}\s*', lines[n + 1])):
            n += 1  # the first paragraph ends at a blank line or a numpydoc section title
        first = ' '.join(l.strip() for l in lines[:n])
        return f'<em>{first}</em>\n' + '\n'.join(lines[n:]) if first else doc

    def entry(self, sym, nm, level, doc=None, kind='', extra=''):
        """One API entry (`api_div`): heading, a link to its source, signature, docstring (numpydoc lists, parameters
        as a table), parameter comments, `extra`"""
        if doc is None:
            doc = inspect.cleandoc(sym.__doc__) if isinstance(getattr(sym, '__doc__', None), str) and \
                (isinstance(sym, type) and '__doc__' in vars(sym) or not isinstance(sym, type)) else ''
            if doc and doc == inspect.cleandoc(type(sym).__doc__ or ''): doc = ''  # inherited from the object's type
        src = source_url(sym, nm)
        md = f'{"#" * level} {nm}\n\n' + (f'<a class="source-link" href="{src}">source</a>\n\n' if src else '') + \
            f'```python\n{self.signature(sym, nm, kind)}\n```\n\n'
        if doc: md += numpydoc_md(self.summary(doc)) + '\n\n'
        # parameter comments, unless numpydoc sections list them (fastcore's docments also reads those: a second list)
        sections = re.search(r'^\s*\w[\w ]*\n\s*-{3,}\s*$', doc, re.M)
        if not (sections or kind == 'property') and (pd := self.param_docs(sym)):
            md += pd + '\n\n'
        return api_div(md + extra)

    def methods(self):
        "(entries for the class's `api_members`, a line naming those documented with a public base class)"
        out, inherited = '', {}
        for name, owner, v in api_members(self.sym):
            cls_nm, k = name.rsplit('.', 1)
            if cls_nm != self.sym.__name__: inherited.setdefault(cls_nm, []).append(name); continue
            nm = f'{self.nm}.{k}'
            if nm in SHOWN or name in SHOWN: continue  # the notebook shows it where its prose is
            out += self.entry(_code(v), nm, self.level + 1, member_doc(self.sym, k, v), _kind(v))
        # backticked names: nbdev's add_links links them to their entries
        return out, ''.join(f'Inherited from `{base}`: ' + ', '.join(f'`{n}`' for n in names) + '\n\n'
                            for base, names in inherited.items())

    def member(self):
        "(class, name, raw member) when `sym` is a method, property or classmethod shown on its own, else None"
        f = self.sym.fget if isinstance(self.sym, property) else getattr(self.sym, '__func__', self.sym)
        qual = getattr(f, '__qualname__', '')
        if not inspect.isfunction(f) or '.' not in qual: return None
        cls = sys.modules.get(f.__module__)
        for part in qual.split('.')[:-1]: cls = getattr(cls, part, None)  # a `<locals>` part gives None
        if not isinstance(cls, type): return None
        # by identity: a property made with property(lambda self: ...) has a getter named `<lambda>`
        k = next((k for k, v in vars(cls).items() if v is self.sym or _code(v) is f), None)
        return (cls, k, vars(cls)[k]) if k else None

    def _repr_markdown_(self):
        m = self.member()
        if m and self.nm == getattr(_code(m[2]), '__qualname__', None): self.nm = f'{m[0].__name__}.{m[1]}'
        if self.nm.rsplit('.', 1)[-1].startswith('_'): return ''
        f = self.sym.fget if isinstance(self.sym, property) else self.sym
        head = '---\n\n'
        if m:  # a method or property shown on its own: as in its class's entry
            cls, k, v = m
            return head + self.entry(_code(v), self.nm, self.level, member_doc(cls, k, v), _kind(v))
        members, inherited = self.methods() if isinstance(self.sym, type) else ('', '')
        return head + self.entry(self.sym, self.nm, self.level, extra=inherited) + members

# ---------------------------------------------------------------- 2. adapt Quarto leftovers

_re_opt = re.compile(r'^\s*#\|\s*([\w-]+)\s*:\s*(.*?)\s*$')  # a Quarto cell option nbdev left in the source
_re_div = re.compile(r'^:::+\s*(\{.*\}|[\w.-]+)\s*$')       # opening of a fenced div, e.g. ::: {.callout-note}
_re_link = re.compile(r'\]\(([^)\s]+)((?:\s+"[^"]*")?)\)(\{[^}\n]*\})?')  # ](url "title"){attrs}
_page_of = {}  # nbdev's page name (pava.html) -> our page (01_pava.html), filled by `site_link`

def callouts(md):
    "Quarto callouts become blockquotes with a bold title; other fenced divs just lose their `:::` fences"
    out, stack = [], []  # stack: one bool per open div, True if it is a callout (i.e. quoted)
    for line in md.splitlines():
        if m := _re_div.match(line.strip()):
            kind = re.search(r'callout-(\w+)', m[1])
            if kind:
                title = re.search(r'title="([^"]*)"', m[1])
                out += ['> '*sum(stack) + f'> **{title[1] if title else kind[1].capitalize()}**', '> '*sum(stack) + '>']
            stack.append(bool(kind))
        elif re.fullmatch(r':::+', line.strip()) and stack: stack.pop()
        else: out.append('> '*sum(stack) + line)
    return '\n'.join(out)

def plain_md(md, link):
    "Markdown without Quarto-only syntax; every link target passed through `link`"
    return _re_link.sub(lambda m: '](' + link(m[1]) + m[2] + ')', callouts(md))

def site_link(url):
    "Link target for the offline site: doc-host and notebook links go to the local `<stem>.html` pages"
    if not _page_of: _page_of.update({_nbpath2html(Path(s + '.ipynb')).name: s + '.html' for s in page_stems()})
    if url.startswith(DOC_URL + '/'):
        page, _, anchor = url[len(DOC_URL) + 1:].partition('#')
        if page in _page_of: return _page_of[page] + ('#' + anchor if anchor else '')
    if '://' not in url: return re.sub(r'^([^#]*)\.ipynb(?=#|$)', r'\1.html', url)
    return url

def readme_link(url):
    """Link target for README.md: links to notebooks, and nbdev's doc-host links (`pava.html`, named by nbdev's rule),
    go to the pages this build writes on the doc host (`01_pava.html`)"""
    local = site_link(url)
    if local != url and '://' not in local or re.match(r'[^#:]*\.ipynb(#|$)', url):
        return f'{DOC_URL}/{local}'
    return url

def joined(out):
    "nbformat copy of output `out` with execnb's lists of lines joined into strings, as nbconvert expects"
    j = lambda v: ''.join(v) if isinstance(v, list) else v
    o = nbformat.from_dict(json.loads(json.dumps(out)))
    if 'text' in o: o.text = j(o.text)
    for k in o.get('data', {}): o.data[k] = j(o.data[k])
    return o

# nbconvert's markdown template, but text outputs fenced with class `output` (indented blocks of consecutive cells
# would merge into one, and pandoc gives the fence a CSS class), and figures with the alt text `figure_alt` chose
_TPL = """{%- extends 'markdown/index.md.j2' -%}
{% block stream %}
~~~~ {.output}
{{ output.text.rstrip() }}
~~~~
{% endblock stream %}
{% block data_text scoped %}
~~~~ {.output}
{{ output.data['text/plain'].rstrip() }}
~~~~
{% endblock data_text %}
{% block data_png %}
[![{{ cell.metadata.get('alt', 'Figure') }}]({{ output.metadata.filenames['image/png'] }})]({{ output.metadata.filenames['image/png'] }}){.zoom title="Open the figure at full size"}

<p class="figcaption">{{ cell.metadata.get('alt', 'Figure') }}</p>
{% endblock data_png %}
{% block data_svg %}
[![{{ cell.metadata.get('alt', 'Figure') }}]({{ output.metadata.filenames['image/svg+xml'] }})]({{ output.metadata.filenames['image/svg+xml'] }}){.zoom title="Open the figure at full size"}

<p class="figcaption">{{ cell.metadata.get('alt', 'Figure') }}</p>
{% endblock data_svg %}
"""

_re_title = re.compile(r"""(?:set_title|title|suptitle)\(\s*[rf]?(["'])(.+?)\1""")

def figure_alt(code, before, page=''):
    """Alt text (and caption) of a cell's figures: the titles its code sets, else the prose before it: its first
    sentence, or more sentences while that is a fragment ("Real data:" says nothing of the figure), up to about 300
    characters; still under four words (a heading such as "`isocal demo`"), followed by the `page`'s summary"""
    titles = [t for _, t in _re_title.findall(code) if '{' not in t]
    prose = re.sub(r'\$([^$]*)\$', r'\1', re.sub(r'\]\([^)]*\)|[`*_#>\[\]|]', '', re.sub(r'\s+', ' ', before))).strip()
    text = '; '.join(titles)
    if len(text.split()) < 4:
        sentences, text = re.split(r'(?<=[.:!?])\s', prose), text + ('; ' if text else '')
        for s in sentences:
            text += ('' if not text or text.endswith('; ') else ' ') + s
            if len(text.split()) >= 8 and not text.endswith(':') or len(text) > 300: break
    text = text.strip(' ;').rstrip(':')  # a sentence that introduces the figure: it is the figure's description
    if len(text.split()) < 4 and page:
        page = re.sub(r'\]\([^)]*\)|[`*_#>\[\]|]', '', page).strip()
        text = f'{text}: {page}' if text else page
    if len(text) > 300: text = text[:300].rsplit(' ', 1)[0] + ' ...'
    return text or 'Figure'

_re_plot = re.compile(r'\bplt\.|\.plot\(|\.subplots\(|\.imshow\(|\.hist\(|\.scatter\(|reliability_diagram\(')
FOLD_LINES = 8  # plotting code longer than this is folded (shown on a click), its figure is not

def heading_levels(md):
    """Markdown whose headings never skip a level going down (h1 then h3 becomes h1 then h2), outside code fences: the
    page title is the h1"""
    out, fence, last = [], None, 1
    for line in md.splitlines():
        m = re.match(r'\s*(`{3,}|~{3,})', line)
        if m and (fence is None or m[1][0] == fence[0] and len(m[1]) >= len(fence)):
            fence = m[1] if fence is None else None
        elif fence is None and (h := re.match(r'(#{1,6})(\s.*)$', line)):
            level = min(len(h[1]), last + 1)
            line, last = '#' * level + h[2], level
        out.append(line)
    return '\n'.join(out) + ('\n' if md.endswith('\n') else '')

def to_markdown(nb, link, keep=lambda out: True):
    "Apply the Quarto cell options nbdev leaves, export with nbconvert -> (markdown, {figure file: bytes})"
    cells = []
    fm = getattr(nb, 'frontmatter_', None) or {}
    page = fm.get('description') or fm.get('title') or ''
    before = page  # before any prose: the page's own summary
    for c in nb.cells:
        if c.cell_type == 'markdown' and c.source:
            cells.append(new_markdown_cell(plain_md(c.source, link))); before = c.source
        if c.cell_type != 'code': continue  # raw cells: FrontmatterProc's YAML, used as page title instead
        lines, opts = (c.source or '').splitlines(), {}
        while lines and (m := _re_opt.match(lines[0])): opts[m[1]] = m[2].strip('\'"'); lines.pop(0)
        outs = [] if opts.get('output') == 'false' else [joined(o) for o in c.get('outputs', []) if keep(o)]
        for o in outs:  # show_doc and Markdown() outputs are rendered as markdown (Quarto's `output: asis`)
            if 'text/markdown' in o.get('data', {}): o.data['text/markdown'] = plain_md(o.data['text/markdown'], link)
        code = '\n'.join(lines).strip()
        if opts.get('include') == 'false' or not (code or outs): continue
        hide = opts.get('echo') == 'false' or not code
        long_plot = _re_plot.search(code) and len(code.splitlines()) > FOLD_LINES
        fold = ('code-fold' in opts or long_plot) and not hide
        alt = opts.get('fig-alt') or opts.get('fig-cap') or figure_alt(code, before, page)
        if fold:  # the code folded, as Quarto's code-fold: the outputs (the figure) stay in view
            summary = opts.get('code-summary', 'Plotting code' if long_plot else 'Code')
            cells.append(new_markdown_cell(f'<details class="code-fold">\n<summary>{summary}</summary>\n\n'
                                           f'```python\n{code}\n```\n\n</details>'))
        cells.append(new_code_cell(code, outputs=outs, metadata={'tags': ['remove_input'] if hide or fold else [],
                                                                 'alt': alt}))
    nb = new_notebook(cells=cells, metadata={'language_info': {'name': 'python'}})
    cfg = Config({'TagRemovePreprocessor': {'enabled': True, 'remove_input_tags': {'remove_input'}}})
    exp = MarkdownExporter(config=cfg, extra_loaders=[DictLoader({'page.md.j2': _TPL})], template_file='page.md.j2')
    md, res = exp.from_notebook_node(nb)
    md = heading_levels(md)
    return md, res.get('outputs', {})

# ---------------------------------------------------------------- 3. render

CSS = (Path(__file__).parent/'docs_site.css').read_text(encoding='utf-8')
esc = lambda s: s.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;').replace('"', '&quot;')
plain = lambda title: re.sub(r'`|\*\*', '', title)  # a title as text (<title>, links)

def sidebar(titles, current):
    "Sidebar <nav>: site name, version, source link, search box, then nbs/sidebar.yml's sections and pages"
    def items(entries):
        out = ''
        for it in entries or []:
            if isinstance(it, str) and (s := Path(it).stem) in titles:
                out += f'<li><a href="{s}.html"{" class=active" if s == current else ""}>{esc(plain(titles[s]))}</a></li>\n'
            elif isinstance(it, dict) and (sub := items(it.get('contents'))):
                out += f'<li class="section"><span>{esc(it.get("section", ""))}</span>\n<ul>\n{sub}</ul></li>\n'
        return out
    listed = {Path(f).stem for f in flat(sidebar_tree())}
    rest = [s for s in titles if s not in listed]  # pages not in sidebar.yml go last (compared by stem)
    return (f'<nav id="sidebar" data-pagefind-ignore="all">\n<div class="site"><a href="index.html">{esc(CFG.title)}</a>'
            f' <span class="version">{esc(CFG.version)}</span></div>\n'
            f'<div class="source"><a href="{esc(CFG.git_url)}">Source on GitHub</a></div>\n'
            f'<div id="search"></div>\n<input type="checkbox" id="nav-toggle" aria-label="show the pages">'
            f'<label for="nav-toggle" class="nav-toggle">Pages</label>\n'
            f'<ul class="pages">\n{items(sidebar_tree() + rest)}</ul>\n</nav>\n')

# Pagefind's UI loads its index with fetch/import(), which browsers refuse from file:// URLs: say how to serve the site
SEARCH = """<link href="pagefind/pagefind-ui.css" rel="stylesheet">
<script src="pagefind/pagefind-ui.js"></script>
<script>
if (location.protocol === 'file:') document.getElementById('search').innerHTML =
  '<p class="nosearch">Search works when the site is served: <code>python -m http.server -d _docs</code></p>';
else new PagefindUI({element: '#search', showSubResults: true, showImages: false});
</script>
"""

# Copy buttons on code blocks (not on outputs), and the contents list marking the section in view
PAGE_JS = """<script>
for (const pre of document.querySelectorAll('div.sourceCode > pre, pre.sourceCode')) {
  if (pre.closest('.output') || pre.parentElement.querySelector(':scope > button.copy')) continue;
  const b = document.createElement('button'); b.className = 'copy'; b.type = 'button'; b.textContent = 'Copy';
  b.title = 'Copy the code'; b.setAttribute('aria-label', 'Copy the code');
  b.addEventListener('click', () => navigator.clipboard.writeText(pre.innerText).then(
    () => { b.textContent = 'Copied'; setTimeout(() => b.textContent = 'Copy', 1500); }, () => {}));
  (pre.parentElement.matches('div.sourceCode') ? pre.parentElement : pre).classList.add('has-copy');
  (pre.parentElement.matches('div.sourceCode') ? pre.parentElement : pre).prepend(b);
}
(() => {
  const links = [...document.querySelectorAll('#TOC a[href^="#"]')];
  const targets = links.map(a => document.getElementById(decodeURIComponent(a.getAttribute('href').slice(1))));
  const mark = () => {
    let i = -1;
    targets.forEach((t, j) => { if (t && t.getBoundingClientRect().top < 120) i = j; });
    links.forEach((a, j) => a.classList.toggle('active', j === i));
  };
  addEventListener('scroll', mark, {passive: true}); addEventListener('hashchange', mark); mark();
})();
</script>
"""

def prev_next(order, titles, stem):
    "Previous/next links in sidebar order"
    i = order.index(stem)
    def link(j, rel, text):
        if not 0 <= j < len(order): return '<span></span>'
        return f'<a rel="{rel}" href="{order[j]}.html">{text.format(esc(plain(titles[order[j]])))}</a>'
    return (f'<nav class="prev-next" data-pagefind-ignore="all">{link(i - 1, "prev", "← {}")}'
            f'{link(i + 1, "next", "{} →")}</nav>\n')

def pandoc(md, html, meta, before_body='', after_body='', tmp='.'):
    "Markdown `md` -> standalone HTML file `html` (figures already beside it; KaTeX from katex/)"
    d = Path(tmp)
    (d/'page.md').write_text(f'---\n{yaml.safe_dump(meta, allow_unicode=True)}---\n\n{md}', encoding='utf-8')
    # an empty favicon: browsers otherwise ask the server for /favicon.ico (a 404 in the console)
    (d/'head.html').write_text(f'<link rel="icon" href="data:,">\n<style>\n{CSS}</style>\n', encoding='utf-8')
    (d/'before.html').write_text(before_body, encoding='utf-8')
    (d/'after.html').write_text(after_body, encoding='utf-8')
    subprocess.run([pypandoc.get_pandoc_path(), 'page.md', '-o', str(Path(html).resolve()),
                    '-f', 'markdown-implicit_figures', '-t', 'html5', '--standalone', '--katex=katex/',
                    '--toc', '--toc-depth=4', '-H', 'head.html', '-B', 'before.html', '-A', 'after.html'],
                   cwd=d, check=True)

def postprocess(html):
    "Wide tables scroll inside a wrapper; the contents list stays out of the search index, the subtitle weighs more"
    html = re.sub(r'<table\b', '<div class="table-scroll"><table', html).replace('</table>', '</table></div>')
    html = html.replace('<p class="subtitle"', '<p class="subtitle" data-pagefind-weight="5"')  # the page's summary
    # TeX source is no text to search or to show in a result's excerpt (`\bar S(q) = \sum_i`)
    html = re.sub(r'<span\s+class="math (inline|display)"', r'<span data-pagefind-ignore class="math \1"', html)
    html = html.replace('</body>', PAGE_JS + '</body>')
    return html.replace('<nav id="TOC"', '<nav id="TOC" data-pagefind-ignore="all"')

def build_page(stem, out, nbs=NBS):
    "Build `out/<stem>.html` from the saved outputs of `nbs/<stem>.ipynb` (nothing is executed); returns seconds"
    t0, path = time.time(), Path(nbs)/f'{stem}.ipynb'
    nbdev.showdoc.BasicMarkdownRenderer = SiteRenderer  # this worker process builds this one page
    order = page_stems(nbs=nbs)
    titles = {s: page_title(s, nbs) for s in order}
    nb = nbformat.read(path, as_version=4)
    code = '\n'.join(c.source for c in nb.cells if c.cell_type == 'code')
    SHOWN.clear(); SHOWN.update(re.findall(r'\bshow_doc\(\s*([\w.]+)', code))
    nb = nbdev_process(nb, path)
    fm = nb.frontmatter_
    md, figures = to_markdown(nb, site_link)
    figdir = Path(out)/'figures'/stem
    shutil.rmtree(figdir, ignore_errors=True)
    for name, data in figures.items():
        figdir.mkdir(parents=True, exist_ok=True); (figdir/name).write_bytes(data)
        md = md.replace(f']({name})', f'](figures/{stem}/{name})')
    title = plain(fm.get('title', stem))
    meta = {'title': fm.get('title', stem), 'pagetitle': title + ('' if title == CFG.title else f' – {CFG.title}'),
            'lang': 'en', 'toc-title': 'On this page', **({'subtitle': fm['description']} if fm.get('description') else {})}
    src = f'{CFG.git_url}/blob/{CFG.branch}/{NBS_REL}/{stem}.ipynb'
    after = prev_next(order, titles, stem) + f'<p class="page-source"><a href="{esc(src)}">Page source</a></p>\n' + SEARCH
    with tempfile.TemporaryDirectory() as tmp: pandoc(md, Path(out)/f'{stem}.html', meta, sidebar(titles, stem), after, tmp)
    f = Path(out)/f'{stem}.html'
    f.write_text(postprocess(f.read_text(encoding='utf-8')), encoding='utf-8')
    return time.time() - t0

def preload(stems, nbs=NBS):
    """Import, in the building process, what the pages' nbdev processing imports (isocal's modules and the modules
    the notebooks' cells import), so that each forked page worker finds them loaded: importing scikit-learn, Numba
    and pandas afresh took most of each page's time. A module that fails to import is left to the page to report"""
    mods = {f'{PKG}.{m.name}' for m in pkgutil.iter_modules([str(ROOT/PKG)]) if not m.name.startswith('_')}
    for stem in stems:
        for c in nbformat.read(Path(nbs)/f'{stem}.ipynb', as_version=4).cells:
            if c.cell_type != 'code': continue
            try: tree = ast.parse(c.source)
            except SyntaxError: continue  # cell magics
            for n in tree.body:  # the imports a cell runs (exec_show_docs runs every cell with one), not functions'
                if isinstance(n, ast.Import): mods.update(a.name for a in n.names)
                elif isinstance(n, ast.ImportFrom) and n.module and not n.level: mods.add(n.module)
    t0 = time.time()
    for m in sorted(mods - set(sys.modules)):
        try:
            with warnings.catch_warnings(): warnings.simplefilter('ignore'); importlib.import_module(m)
        except Exception: pass  # the page's own processing reports it
    return time.time() - t0

def _page_worker(conn, stem, out, nbs):
    "Build one page in this (forked or spawned) process and send back ('ok', seconds) or ('error', message)"
    # nbdev warns about every cell that mixes imports with other code (it re-runs such cells for show_doc): 370 of
    # the build's 400 log lines, about notebooks that run fine; the build log keeps what needs attention
    warnings.filterwarnings('ignore', message='Found cells containing imports')
    try: conn.send(('ok', build_page(stem, out, nbs)))
    except BaseException as e: conn.send(('error', f'{type(e).__name__}: {e}'))
    finally: conn.close()

def build_site(out, only=(), nbs=NBS):
    """Build the pages (all, or the stems in `only`) into `out` in parallel, then KaTeX and the search index.

    A fresh process per page, like nbdev's proc_nbs (nbdev's processing runs notebook code in-process), as many at a
    time as there are CPUs. On Linux the workers are forked from this process after `preload` (from its only thread:
    no pool threads exist when it forks), elsewhere spawned."""
    only = [Path(o).stem for o in only]
    todo = only or page_stems(nbs=nbs)
    out = Path(out); out.mkdir(parents=True, exist_ok=True)
    if not only:
        for f in out.glob('*.html'): f.unlink()  # drop stale pages
    ctx = get_context('fork' if sys.platform.startswith('linux') else 'spawn')
    if ctx.get_start_method() == 'fork': print(f'preloaded modules in {preload(todo, nbs):.1f}s', flush=True)
    fails, queue, running = 0, list(todo), {}
    try:
        while queue or running:
            while queue and len(running) < min(len(todo), os.cpu_count() or 1):
                stem = queue.pop(0)
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_page_worker, args=(send, stem, out, nbs))
                proc.start(); send.close()
                running[recv] = (stem, proc)
            for recv in mp_wait(list(running)):
                stem, proc = running.pop(recv)
                try: status, value = recv.recv()
                except EOFError: proc.join(); status, value = 'error', f'its process died (exit code {proc.exitcode})'
                proc.join(); recv.close()
                if status == 'ok': print(f'{stem}.html: {value:.1f}s', flush=True)
                else: fails += 1; print(f'{stem}.html FAILED: {value}', file=sys.stderr, flush=True)
    finally:
        for _, proc in running.values(): proc.terminate(); proc.join()
    fix_anchors(out)
    install_katex(out)
    index_search(out)
    return fails

def fix_anchors(out):
    """Links to a missing `page.html#anchor`: nbdev's add_links links every backticked name in its index, private names
    (`_pool`, `__getattr__`) included, which have no API entry. A private name (a dotted part starting with `_`) loses
    its link, keeping its text; a public one (an entry the page does not have) points at its page"""
    ids = {f.name: set(re.findall(r' id="([^"]+)"', f.read_text(encoding='utf-8'))) for f in Path(out).glob('*.html')}
    def fix(m):
        page, anchor, attrs, text = m[1], m[2], m[3], m[4]
        if anchor in ids.get(page, {anchor}): return m[0]
        if any(part.startswith('_') for part in anchor.split('.')): return text
        return f'<a href="{page}"{attrs}>{text}</a>'
    for f in Path(out).glob('*.html'):
        html = f.read_text(encoding='utf-8')
        new = re.sub(r'<a\s+href="([^":/#]+\.html)#([^"]+)"([^>]*)>(.*?)</a>', fix, html, flags=re.S)
        if new != html: f.write_text(new, encoding='utf-8')

# ---------------------------------------------------------------- assets: KaTeX and Pagefind

KATEX = '0.19.1'  # pinned; `npm pack` fetches it once into CACHE
CACHE = Path(os.environ.get('ISOCAL_DOCS_CACHE') or Path.home()/'.cache'/'isocal-docs')

def katex_available():
    "Can the build get KaTeX: the tarball is in CACHE, or npm is there to fetch it?"
    return (CACHE/f'katex-{KATEX}.tgz').exists() or shutil.which('npm') is not None

def install_katex(out):
    "Copy KaTeX's dist (js, css, woff2 fonts) into `out/katex/` from the `npm pack katex@KATEX` tarball in CACHE"
    tgz = CACHE/f'katex-{KATEX}.tgz'
    if not tgz.exists() and shutil.which('npm') is None:
        raise SystemExit(f'KaTeX {KATEX} is not in {CACHE} and npm is not installed to fetch it: apt-get install npm')
    if not tgz.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(['npm', 'pack', '--quiet', f'katex@{KATEX}', '--pack-destination', str(CACHE)], check=True,
                       stdout=subprocess.DEVNULL)
    dest = Path(out)/'katex'
    shutil.rmtree(dest, ignore_errors=True)
    with tarfile.open(tgz) as t:
        for m in t.getmembers():
            rel = m.name.removeprefix('package/dist/')
            if m.isfile() and (rel in ('katex.min.js', 'katex.min.css') or re.fullmatch(r'fonts/[\w-]+\.woff2', rel)):
                (dest/rel).parent.mkdir(parents=True, exist_ok=True); (dest/rel).write_bytes(t.extractfile(m).read())

def index_search(out):
    "Pagefind (PyPI `pagefind[extended]`: its binary ships in a wheel) indexes the pages into `out/pagefind/`"
    subprocess.run([sys.executable, '-m', 'pagefind', '--site', str(out), '--output-subdir', 'pagefind', '--silent'],
                   check=True)

# ---------------------------------------------------------------- README

def readme_text():
    "README.md content: nbs/index.ipynb processed by nbdev, not executed; markdown and printed saved outputs kept"
    path = NBS/CFG.get('readme_nb', 'index.ipynb')
    nb = nbformat.read(path, as_version=4)
    nb = nbdev_process(nb, path)
    fm = nb.frontmatter_
    # the tour's printed outputs (saved outputs: deterministic prints, which tests/test_readme.py checks), no figures
    md, _ = to_markdown(nb, readme_link, keep=lambda o: 'text/markdown' in o.get('data', {}) or
                        o.get('output_type') == 'stream' and o.get('name') == 'stdout')
    head = f"# {fm.get('title', CFG.lib_name)}\n\n" + (f"> {fm['description']}\n\n" if fm.get('description') else '')
    return head + re.sub(r'[ \t]+\n', '\n', md).strip() + '\n'

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--out', default=str(ROOT/'_docs'), help='output folder (default: _docs)')
    p.add_argument('--only', nargs='+', default=[], metavar='NAME', help='build only these notebooks (stems)')
    p.add_argument('--nbs', default=str(NBS), help='folder of the executed notebooks to build from (default: nbs)')
    p.add_argument('--readme', action='store_true', help='write README.md from nbs/index.ipynb')
    p.add_argument('--check-readme', action='store_true', help='exit 1 (with a diff) if README.md is stale')
    a = p.parse_args(argv)
    if a.readme or a.check_readme:
        new, readme = readme_text(), ROOT/'README.md'
        if a.readme: readme.write_text(new, encoding='utf-8'); return 0
        old = readme.read_text(encoding='utf-8') if readme.exists() else ''
        if old == new: return 0
        diff = difflib.unified_diff(old.splitlines(True), new.splitlines(True), 'README.md', 'generated')
        sys.stdout.writelines(diff)
        print('README.md is stale: run `python .ci/build_docs.py --readme`', file=sys.stderr)
        return 1
    t0 = time.time()
    fails = build_site(a.out, a.only, nbs=a.nbs)
    print(f'{"FAILED" if fails else "built"} in {time.time() - t0:.0f}s -> {a.out}')
    return 1 if fails else 0

if __name__ == '__main__': sys.exit(main())
