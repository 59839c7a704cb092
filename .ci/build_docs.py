#!/usr/bin/env python
"""Build the isocal documentation site offline into `_docs/`, without Quarto (with Quarto, `nbdev_docs` still works).

Pages: the notebooks listed in nbs/sidebar.yml (index first), then any other nbs/*.ipynb not starting with `_`.
Each page goes through four steps:

1. Execute: nbclient runs the notebook in a real `python3` kernel (cwd nbs/) so outputs and figures are fresh.
   Cells nbdev_test skips (`#| eval: false`, and `#| slow` or any other `tst_flags` of settings.ini) get nbclient's
   `skip-execution` tag: they are shown, not run.
2. nbdev processing: `nbdev.processors.FilterDefaults`, the processor list `nbdev_docs` uses (frontmatter,
   add_show_docs + exec_show_docs for the API docs, rm_export/hide_ for export and hide cells, add_links, add_fold,
   clean_show_doc, ...).
   Only change: exec_show_docs (which re-runs import/export cells in-process) also skips the cells of step 1.
3. Adapt what nbdev leaves for Quarto (`to_markdown`): the frontmatter raw cell becomes the page title/subtitle; the
   leading `#| key: value` cell options are applied then removed (include/echo/output: false, output: asis,
   code-fold -> <details>); Quarto callouts become blockquotes, other `:::` fenced divs lose their fences;
   `[txt](url){target=...}` attributes are dropped; links to notebooks or to the doc host point to the local pages.
4. Render: nbconvert's MarkdownExporter (figures extracted to a temp dir), then pandoc from pypandoc-binary:
   --standalone --embed-resources --mathml, a small inline CSS and a sidebar following nbs/sidebar.yml.

`--readme` writes README.md from nbs/index.ipynb through steps 2-4 (markdown, not executed, only show_doc outputs
kept) so it is byte-for-byte reproducible; `--check-readme` exits 1 with a diff when README.md is stale.

Add a page: create nbs/NN_name.ipynb whose first markdown cell is `# Title` (optionally `> description`), and list
it in nbs/sidebar.yml. It becomes _docs/NN_name.html.
"""
import argparse, difflib, json, os, re, subprocess, sys, tempfile, time
from multiprocessing import get_context
from pathlib import Path

import nbformat, pypandoc, yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from jupyter_client import KernelManager
from nbclient import NotebookClient
from nbconvert import MarkdownExporter
from jinja2 import DictLoader
from traitlets.config import Config
from execnb.nbio import dict2nb
from nbdev.config import get_config
from nbdev.doclinks import _nbpath2html
from nbdev.frontmatter import _md2dict
from nbdev.process import extract_directives
from nbdev.processors import FilterDefaults, exec_show_docs

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
CFG = get_config(path=ROOT)
FLAGS = set(CFG.get('tst_flags', '').split())
DOC_URL = CFG.doc_host.rstrip('/') + CFG.doc_baseurl.rstrip('/')  # where nbdev's doc links point

# ---------------------------------------------------------------- pages and titles

def page_stems(extra=()):
    "Notebook stems in sidebar order: nbs/sidebar.yml, then other nbs/*.ipynb not starting with `_`, then `extra`"
    def flat(items):
        for it in items or []:
            if isinstance(it, str): yield it
            elif isinstance(it, dict): yield from flat(it.get('contents') or [it.get('href', '')])
    side = yaml.safe_load((NBS/'sidebar.yml').read_text(encoding='utf-8'))['website']['sidebar']['contents']
    stems = [Path(f).stem for f in flat(side) if f.endswith('.ipynb') and (NBS/f).exists()]
    stems += sorted(p.stem for p in NBS.glob('*.ipynb') if p.name[0] != '_' and p.stem not in stems)
    stems += [s for s in extra if s not in stems]
    return sorted(stems, key=lambda s: s != 'index')  # stable: index first, the rest keep their order

def page_title(stem):
    "The notebook's first markdown `# Title` (nbdev's frontmatter rule), else its stem"
    nb = nbformat.read(NBS/f'{stem}.ipynb', as_version=4)
    for c in nb.cells:
        if c.cell_type == 'markdown' and (t := _md2dict(c.source).get('title')): return t
    return stem

# ---------------------------------------------------------------- 1. execute

def skipped(directives):
    "Would nbdev_test skip a cell with these nbdev `directives`?"
    return directives.get('eval:', [''])[0].lower() == 'false' or bool(FLAGS & directives.keys())

def execute(path, timeout=1800):
    "Run notebook `path` in a `python3` kernel with cwd = its folder, skipping the cells nbdev_test skips"
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        if c.cell_type == 'code' and ('nbdev_export' + '(' in c.source or skipped(extract_directives(c, remove=False))):
            c.metadata.setdefault('tags', []).append('skip-execution')
    # The kernel inherits our environment; MPLBACKEND (e.g. Agg, set by CI scripts) would override the inline backend
    # and the pages would lose their figures.
    env = {k: v for k, v in os.environ.items() if k != 'MPLBACKEND'}
    # IPC sockets, not TCP: kernels started side by side (2 docs workers, pytest-xdist) cannot race for a port.
    # The socket path prefix must be absolute: the kernel runs in nbs/, this process elsewhere.
    sockets = os.path.join(tempfile.gettempdir(), f'isocal-kernel-{os.getpid()}-{time.monotonic_ns()}')
    km = KernelManager(kernel_name='python3', transport='ipc', ip=sockets)
    try:
        NotebookClient(nb, km=km, timeout=timeout, startup_timeout=180,
                       resources={'metadata': {'path': str(Path(path).parent)}}).execute(env=env)
    finally:
        for leftover in Path(sockets).parent.glob(Path(sockets).name + '-*'): leftover.unlink(missing_ok=True)
    return nb

# ---------------------------------------------------------------- 2. nbdev processing

class exec_show_docs_noskip(exec_show_docs):
    "nbdev's `exec_show_docs`, except it never runs cells nbdev_test skips (a `#| slow` cell with an import, say)"
    def __call__(self, cell):
        if not (cell.cell_type == 'code' and skipped(cell.directives_)): return super().__call__(cell)

class DocsFilter(FilterDefaults):
    "nbdev's docs processors (settings.ini `procs`/`skip_procs` still apply) with `exec_show_docs_noskip`"
    def base_procs(self): return [exec_show_docs_noskip if p is exec_show_docs else p for p in super().base_procs()]

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

# ---------------------------------------------------------------- 3. adapt Quarto leftovers

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
    "Link target for README.md: links to notebooks go to their pages on the doc host"
    if '://' in url or not re.match(r'[^#]*\.ipynb(#|$)', url): return url
    page, _, anchor = url.partition('#')
    return f'{DOC_URL}/{_nbpath2html(Path(page)).as_posix()}' + ('#' + anchor if anchor else '')

def joined(out):
    "nbformat copy of output `out` with execnb's lists of lines joined into strings, as nbconvert expects"
    j = lambda v: ''.join(v) if isinstance(v, list) else v
    o = nbformat.from_dict(json.loads(json.dumps(out)))
    if 'text' in o: o.text = j(o.text)
    for k in o.get('data', {}): o.data[k] = j(o.data[k])
    return o

# nbconvert's markdown template, but text outputs fenced with class `output` (indented blocks of consecutive cells
# would merge into one, and pandoc gives the fence a CSS class)
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
"""

def to_markdown(nb, link, keep=lambda out: True):
    "Apply the Quarto cell options nbdev leaves, export with nbconvert -> (markdown, {figure file: bytes})"
    cells = []
    for c in nb.cells:
        if c.cell_type == 'markdown' and c.source: cells.append(new_markdown_cell(plain_md(c.source, link)))
        if c.cell_type != 'code': continue  # raw cells: FrontmatterProc's YAML, used as page title instead
        lines, opts = (c.source or '').splitlines(), {}
        while lines and (m := _re_opt.match(lines[0])): opts[m[1]] = m[2].strip('\'"'); lines.pop(0)
        outs = [] if opts.get('output') == 'false' else [joined(o) for o in c.get('outputs', []) if keep(o)]
        for o in outs:  # show_doc and Markdown() outputs are rendered as markdown (Quarto's `output: asis`)
            if 'text/markdown' in o.get('data', {}): o.data['text/markdown'] = plain_md(o.data['text/markdown'], link)
        code = '\n'.join(lines).strip()
        if opts.get('include') == 'false' or not (code or outs): continue
        hide = opts.get('echo') == 'false' or not code
        fold = 'code-fold' in opts and not hide
        if fold: cells.append(new_markdown_cell(f"<details>\n<summary>{opts.get('code-summary', 'Code')}</summary>"))
        cells.append(new_code_cell(code, outputs=outs, metadata={'tags': ['remove_input'] if hide else []}))
        if fold: cells.append(new_markdown_cell('</details>'))
    nb = new_notebook(cells=cells, metadata={'language_info': {'name': 'python'}})
    cfg = Config({'TagRemovePreprocessor': {'enabled': True, 'remove_input_tags': {'remove_input'}}})
    exp = MarkdownExporter(config=cfg, extra_loaders=[DictLoader({'page.md.j2': _TPL})], template_file='page.md.j2')
    md, res = exp.from_notebook_node(nb)
    return md, res.get('outputs', {})

# ---------------------------------------------------------------- 4. render

CSS = """<style>
body { max-width: none; margin: 0; padding: 1rem 2rem 3rem 17rem; font: 16px/1.55 system-ui, sans-serif; }
body > * { max-width: 54rem; }
#sidebar { position: fixed; top: 0; left: 0; bottom: 0; width: 14rem; overflow: auto; padding: 1rem .6rem;
           background: #f6f8fa; border-right: 1px solid #ddd; max-width: none; }
#sidebar a { display: block; padding: .25rem .5rem; color: #333; text-decoration: none; border-radius: 4px; }
#sidebar a.active { background: #dbe7f7; font-weight: 600; }
pre { background: #f6f8fa; padding: .6rem .8rem; overflow: auto; border-radius: 4px; }
pre.output { background: none; border-left: 3px solid lightsalmon; border-radius: 0; }  /* cell outputs */
blockquote { margin: 1rem 0; padding: .2rem 1rem; border-left: 4px solid #4a90d9; background: #f3f7fd; color: inherit; }
table { border-collapse: collapse; margin: .5rem 0; } td, th { border: 1px solid #ddd; padding: .2rem .6rem; }
img { max-width: 100%; height: auto; }  details > summary { cursor: pointer; color: #666; }
hr { border: none; border-top: 1px solid #ddd; }  header#title-block-header { text-align: left; }
#TOC { border-left: 3px solid #ddd; padding-left: .8rem; font-size: 90%; } #TOC ul { margin: 0; padding-left: 1rem; }
math[display="block"] { overflow-x: auto; }
@media (max-width: 800px) { body { padding: 1rem; } #sidebar { position: static; width: auto; } }
</style>"""

def sidebar(pages, current):
    "Sidebar <nav> linking every page; `pages` is a list of (stem, title)"
    esc = lambda s: s.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')
    links = ''.join(f'<a href="{s}.html"{" class=active" if s == current else ""}>{esc(t)}</a>\n' for s, t in pages)
    return f'<nav id="sidebar">\n{links}</nav>\n'

def pandoc(md, figures, html, title, subtitle='', before_body='', tmp='.'):
    "Markdown `md` (+ figure files) -> standalone self-contained HTML file `html`"
    d = Path(tmp)
    for name, data in figures.items(): (d/name).write_bytes(data)
    meta = {'title': title, 'lang': 'en', 'toc-title': 'On this page', **({'subtitle': subtitle} if subtitle else {})}
    (d/'page.md').write_text(f'---\n{yaml.safe_dump(meta, allow_unicode=True)}---\n\n{md}', encoding='utf-8')
    (d/'head.html').write_text(CSS, encoding='utf-8')
    (d/'before.html').write_text(before_body, encoding='utf-8')
    subprocess.run([pypandoc.get_pandoc_path(), 'page.md', '-o', str(Path(html).resolve()),
                    '-f', 'markdown-implicit_figures', '-t', 'html5', '--standalone', '--embed-resources',
                    '--mathml', '--toc', '--toc-depth=2', '-H', 'head.html', '-B', 'before.html'],
                   cwd=d, check=True)

def build_page(stem, out, pages, run=True):
    "Build `out/<stem>.html`; returns seconds taken"
    t0, path = time.time(), NBS/f'{stem}.ipynb'
    nb = execute(path) if run else nbformat.read(path, as_version=4)
    nb = nbdev_process(nb, path)
    fm = nb.frontmatter_
    md, figures = to_markdown(nb, site_link)
    with tempfile.TemporaryDirectory() as tmp:
        pandoc(md, figures, Path(out)/f'{stem}.html', fm.get('title', stem), fm.get('description', ''),
               sidebar(pages, stem), tmp)
    return time.time() - t0

def build_site(out, only=(), run=True):
    "Build the pages (all, or the stems in `only`) into `out` in parallel; returns the number of failures"
    only = [Path(o).stem for o in only]
    pages = [(s, page_title(s)) for s in page_stems(only)]
    todo = only or [s for s, _ in pages]
    out = Path(out); out.mkdir(parents=True, exist_ok=True)
    if not only:
        for f in out.glob('*.html'): f.unlink()  # drop stale pages
    fails = 0
    # a fresh process per notebook, like nbdev's proc_nbs (nbdev's processing runs notebook code in-process)
    with get_context('spawn').Pool(min(len(todo), os.cpu_count() or 1), maxtasksperchild=1) as pool:
        jobs = {s: pool.apply_async(build_page, (s, out, pages, run)) for s in todo}
        for s, job in jobs.items():
            try: print(f'{s}.html: {job.get():.1f}s', flush=True)
            except Exception as e: fails += 1; print(f'{s}.html FAILED: {type(e).__name__}: {e}', file=sys.stderr)
    fix_anchors(out)
    return fails

def fix_anchors(out):
    """Point links to a missing `page.html#anchor` at the page: nbdev's add_links links every backticked name in
    its index, private and method names included, which have no show_doc heading unless shown explicitly"""
    ids = {f.name: set(re.findall(r' id="([^"]+)"', f.read_text(encoding='utf-8'))) for f in Path(out).glob('*.html')}
    def fix(m): return m[0] if m[2] in ids.get(m[1], {m[2]}) else f'href="{m[1]}"'
    for f in Path(out).glob('*.html'):
        html = f.read_text(encoding='utf-8')
        if (new := re.sub(r'href="([^":/#]+\.html)#([^"]+)"', fix, html)) != html: f.write_text(new, encoding='utf-8')

# ---------------------------------------------------------------- README

def readme_text():
    "README.md content: nbs/index.ipynb processed by nbdev, not executed, only show_doc-like markdown outputs kept"
    path = NBS/CFG.get('readme_nb', 'index.ipynb')
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        if c.cell_type == 'code': c.outputs = []  # README shows code, not (non-reproducible) outputs
    nb = nbdev_process(nb, path)
    fm = nb.frontmatter_
    md, _ = to_markdown(nb, readme_link, keep=lambda o: 'text/markdown' in o.get('data', {}))
    head = f"# {fm.get('title', CFG.lib_name)}\n\n" + (f"> {fm['description']}\n\n" if fm.get('description') else '')
    return head + re.sub(r'[ \t]+\n', '\n', md).strip() + '\n'

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--out', default=str(ROOT/'_docs'), help='output folder (default: _docs)')
    p.add_argument('--only', nargs='+', default=[], metavar='NAME', help='build only these notebooks (stems)')
    p.add_argument('--no-execute', action='store_true', help='do not run the notebooks (no outputs/figures)')
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
    fails = build_site(a.out, a.only, run=not a.no_execute)
    print(f'{"FAILED" if fails else "built"} in {time.time() - t0:.0f}s -> {a.out}')
    return 1 if fails else 0

if __name__ == '__main__': sys.exit(main())
