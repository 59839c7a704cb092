"""The offline documentation site (`.ci/build_docs.py`), checked page by page in headless Chromium.

The module fixture builds the whole site into `_docs/` from the notebooks' saved outputs (once per run, also under
pytest-xdist; $ISOCAL_DOCS_NBS names another folder of executed notebooks to build from, default nbs/), serves it
with python's http.server on 127.0.0.1 (Pagefind's search cannot load from file://), and opens every page in
Chromium driven over the DevTools protocol (websocket-client): title with the site name, no console errors, images
decoded with alt text, KaTeX-rendered maths where the notebook has math, figures where it plots, no leftover
nbdev/Quarto syntax, no network loads beyond the local server, no broken internal links, nothing wider than the page
at 400 px and at desktop width. Search must find the PAVA page. Screenshots of three pages go to
`_docs_screenshots/` (ignored by git; .ci/run prints its path) for CI. Without Chromium (or without npm, which
fetches KaTeX for the build) these tests are skipped with the reason, or fail under ISOCAL_NO_SKIP=1, as in CI
(`.ci/chrome.py`); $CHROMIUM names another binary.

The API reference is checked from the built files against isocal itself (test_api_*, no browser): every public name
of every module (its `__all__`, and each public class's members by `build_docs.api_members`, the one statement of
which inherited scikit-learn/builtin members are left out) has an entry with its real signature and a description,
and no page has nbdev's fallbacks, raw markdown in a signature, a stray `*`, or a link on a private name that goes
nowhere.
"""
import ast, base64, fcntl, functools, http.server, importlib, importlib.util, inspect, json, os, pkgutil, re, shutil
import subprocess, sys, tempfile
import threading, time, urllib.request
from pathlib import Path

import nbformat
import pytest
import websocket
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT/'_docs'
SHOTS = ROOT/'_docs_screenshots'
_spec = importlib.util.spec_from_file_location('build_docs', ROOT/'.ci'/'build_docs.py')
bd = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(bd)
SRC = Path(os.environ.get('ISOCAL_DOCS_NBS') or bd.NBS)  # executed notebooks the site is built from
PAGES = bd.page_stems(nbs=SRC)
_cspec = importlib.util.spec_from_file_location('chrome', ROOT/'.ci'/'chrome.py')
ch = importlib.util.module_from_spec(_cspec); _cspec.loader.exec_module(ch)
Chrome, _local = ch.Chrome, ch._local


@pytest.fixture(scope='module')
def site(request):
    "Build the site once per test run (xdist workers share one build through a lock and a stamp): {rc, log}"
    if not bd.katex_available():
        ch.missing('npm not found: the docs build fetches KaTeX with `npm pack` once (apt-get install npm)')
    uid = getattr(request.config, 'workerinput', {}).get('testrunuid')  # same in all xdist workers of one run
    DOCS.mkdir(exist_ok=True)
    stamp = DOCS/'.build.json'
    with open(DOCS/'.build.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if uid and stamp.exists() and json.loads(stamp.read_text())['uid'] == uid: res = json.loads(stamp.read_text())
        else:
            r = subprocess.run([sys.executable, str(ROOT/'.ci'/'build_docs.py'), '--out', str(DOCS), '--nbs', str(SRC)],
                               capture_output=True, text=True, timeout=3600)
            res = {'uid': uid, 'rc': r.returncode, 'log': r.stdout + r.stderr[-8000:]}
            stamp.write_text(json.dumps(res))
    return res


@pytest.fixture(scope='module')
def server(site):
    "Base URL of `_docs/` served by python's http.server on a free 127.0.0.1 port"
    handler = functools.partial(type('Quiet', (http.server.SimpleHTTPRequestHandler,),
                                     {'log_message': lambda *a: None}), directory=str(DOCS))
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f'http://127.0.0.1:{httpd.server_address[1]}/'
    httpd.shutdown(); httpd.server_close()


@pytest.fixture(scope='module')
def chrome():
    "A headless Chromium (the tests that use it are skipped, or fail in CI, without one)"
    ch.need_chromium()
    c = Chrome()
    yield c
    c.close()


def test_build(site):
    assert site['rc'] == 0, f"docs build failed:\n{site['log']}"


PAGE_INFO = """(async () => {
  await Promise.all([...document.images].map(i => i.decode().catch(() => null)));
  const attr = (sel, a) => [...document.querySelectorAll(sel)].map(e => e.getAttribute(a));
  return {title: document.title, text: document.body.innerText,
          imgs: [...document.images].map(i => [i.naturalWidth, i.naturalHeight, i.src.slice(0, 40), i.alt]),
          tex: document.querySelectorAll('span.math').length, katex: document.querySelectorAll('.katex').length,
          katexErrors: [...document.querySelectorAll('.katex-error')].map(e => e.title || e.textContent),
          mathml: document.querySelectorAll('math:not(.katex-mathml math)').length,
          sections: [...document.querySelectorAll('#sidebar li.section > span')].map(e => e.textContent),
          version: document.querySelector('#sidebar .version')?.textContent,
          prevNext: attr('.prev-next a', 'rel'),
          ids: attr('[id]', 'id'), links: attr('a[href]', 'href'),
          resources: attr('script[src],img[src],iframe[src],source[src],embed[src],video[src],audio[src]', 'src')
                     .concat(attr('link[href]', 'href'))};
})()"""

# elements sticking out of the page, ignoring those inside a box that scrolls or clips them
OVERFLOW = """(() => {
  const W = document.documentElement.clientWidth, out = [];
  const clipped = e => { for (let p = e.parentElement; p; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX; if (o !== 'visible') return true; } return false; };
  for (const e of document.body.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.width && (r.right > W + 1 || r.left < -1) && !clipped(e))
      out.push(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && e.className.baseVal === undefined ? '.' + e.className : '') + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
  }
  return {scroll: document.documentElement.scrollWidth, width: W, out: out.slice(0, 8)};
})()"""


def notebook_facts(stem):
    "(has math, shows a figure) from the notebook source: $-math in markdown; plotting in cells that are run and shown"
    nb = nbformat.read(SRC/f'{stem}.ipynb', as_version=4)
    md = '\n'.join(c.source for c in nb.cells if c.cell_type == 'markdown')
    math = bool(re.search(r'\$\$.+?\$\$|\$[^$\s][^$\n]*\$', md, re.S))
    def shown(c):
        d = bd.extract_directives(c, remove=False)
        return not (bd.skipped(d) or d.keys() & {'export', 'exporti', 'hide', 'default_exp'})
    plots = re.compile(r'\bplt\.|\.plot\(|reliability_diagram\(|\.imshow\(|\.hist\(|\.scatter\(')
    figs = any(c.cell_type == 'code' and plots.search(c.source) and shown(c) and c.get('outputs') for c in nb.cells)
    return math, figs


@functools.lru_cache
def ids_of(html_file):
    soup = BeautifulSoup(Path(html_file).read_text(encoding='utf-8'), 'html.parser')
    return {t['id'] for t in soup.find_all(id=True)}


@pytest.mark.parametrize('stem', PAGES)
def test_page(site, server, chrome, stem):
    page = DOCS/f'{stem}.html'
    assert page.exists(), f'{page} was not built (see test_build)'
    chrome.width(1280)
    requests = chrome.open(server + page.name)
    info = chrome.js(PAGE_INFO)
    assert not chrome.errors(), f'console errors on {page.name}: {chrome.errors()}'
    # <title>: the page title and the site name; navigation: sections, version, previous/next
    title = ' '.join(re.sub(r'`|\*\*', '', bd.page_title(stem, SRC)).split())
    assert ' '.join(info['title'].split()) in (title, f'{title} – {bd.CFG.title}'), info['title']
    assert bd.CFG.title in info['title']
    assert info['sections'] == [s['section'] for s in bd.sidebar_tree() if isinstance(s, dict)]
    assert info['version'] == bd.CFG.version
    assert info['prevNext'] == ['prev', 'next'][PAGES.index(stem) == 0:len(PAGES) - PAGES.index(stem)]
    # everything nbdev/Quarto-specific was interpreted, not printed
    html = page.read_text(encoding='utf-8')
    # (nbdev's `(*args, **kwargs)` signature for a class without its own __init__ is checked in the API entries by
    # test_api_no_site_debris: notebook code may forward *args and **kwargs itself, as 07_aum's timing helper does)
    for debris in ['#|', '{target=', '{.callout', ':::', 'Call self as a function', '__getattr__(']:
        assert debris not in info['text'], f'{debris!r} leaked into the text of {page.name}'
    assert '{target=' not in html and '#| ' not in html
    # no http(s) resources: the browser fetched nothing but the local server's files and data: URIs
    remote = [r for r in info['resources'] if r and re.match(r'(https?:)?//', r)]
    assert not remote, f'external resources in {page.name}: {remote}'
    fetched = [u for u in requests if not u.startswith((server, 'data:'))]
    assert not fetched, f'{page.name} loaded {fetched}'
    # images decoded and described; maths typeset by the bundled KaTeX; figures where the notebook plots
    bad = [i for i in info['imgs'] if not (i[0] > 0 and i[1] > 0)]
    assert not bad, f'images that did not decode in {page.name}: {bad}'
    assert all(i[3] and i[3] not in ('png', 'svg', 'Figure') for i in info['imgs']), f'images without alt text: {info["imgs"]}'
    math, figs = notebook_facts(stem)
    if math: assert info['tex'] and info['katex'] >= info['tex'], f'{page.name}: math not rendered by KaTeX'
    assert not info['katexErrors'], f'KaTeX could not typeset in {page.name}: {info["katexErrors"][:5]}'
    assert not info['mathml'], f'{page.name} has MathML outside KaTeX'
    if figs: assert info['imgs'], f'{stem}.ipynb plots but {page.name} has no <img>'
    # internal links resolve: the file exists and so does the #anchor
    for href in info['links']:
        if re.match(r'[a-z][\w+.-]*:', href): continue  # http:, https:, mailto:, ...
        target, _, anchor = href.partition('#')
        f = DOCS/target if target else page
        assert f.exists(), f'{page.name}: broken link {href}'
        if anchor: assert anchor in (info['ids'] if f == page else ids_of(f)), f'{page.name}: no anchor for {href}'
    # nothing wider than the page, on a desktop and on a 400 px phone
    for px in (1280, 400):
        chrome.width(px)
        o = chrome.js(OVERFLOW)
        assert o['scroll'] <= o['width'] and not o['out'], f'{page.name} at {px}px is wider than the page: {o}'
    chrome.width(1280)


def test_katex_bundled(site):
    "The site carries its own KaTeX (script, stylesheet, fonts), the version the build pins"
    assert (DOCS/'katex'/'katex.min.js').exists() and (DOCS/'katex'/'katex.min.css').exists()
    assert list((DOCS/'katex'/'fonts').glob('KaTeX_Size1-Regular.woff2'))
    assert bd.KATEX in (DOCS/'katex'/'katex.min.js').read_text(encoding='utf-8')[:2000] or \
        f'"{bd.KATEX}"' in (DOCS/'katex'/'katex.min.js').read_text(encoding='utf-8')


SEARCH = """(async () => {
  const input = document.querySelector('#search input');
  input.value = %s; input.dispatchEvent(new Event('input', {bubbles: true}));
  // results are listed in rank order, each filled in when its data arrives: wait until all are filled and stable
  let last = '', same = 0;
  for (let i = 0; i < 200 && same < 5; i++) {
    await new Promise(r => setTimeout(r, 100));
    const n = document.querySelectorAll('#search .pagefind-ui__result').length;
    const hits = [...document.querySelectorAll('#search .pagefind-ui__result-link')].map(a => a.getAttribute('href'));
    const now = JSON.stringify(hits);
    same = (n && hits.length === n && now === last) ? same + 1 : 0; last = now;
  }
  return JSON.parse(last || '[]');
})()"""


def test_search(site, server, chrome):
    "Pagefind's search box, served: 'pool adjacent violators' finds the PAVA page first"
    chrome.width(1280)
    chrome.open(server + 'index.html')
    hits = chrome.js(SEARCH % json.dumps('pool adjacent violators'))
    assert hits and '01_pava' in hits[0], f'search results: {hits}'
    assert not chrome.errors(), chrome.errors()


def test_search_from_file(site, chrome):
    "From file:// (where browsers refuse Pagefind's index) the page loads cleanly and says how to serve the site"
    chrome.open((DOCS/'index.html').as_uri())
    assert 'http.server' in chrome.js("document.querySelector('#search').innerText")
    assert not chrome.errors(), chrome.errors()


@pytest.mark.parametrize('stem', ['index', '01_pava', '04_venn_abers'])
def test_screenshot(site, server, chrome, stem):
    "Save screenshots (desktop and 400 px) of three pages into _docs_screenshots/ as CI artifacts"
    assert (DOCS/f'{stem}.html').exists(), f'{stem}.html was not built (see test_build)'
    SHOTS.mkdir(exist_ok=True)
    for px in (1280, 400):
        chrome.width(px)
        chrome.open(server + f'{stem}.html')
        chrome.js("document.fonts.ready.then(() => true)")
        png = base64.b64decode(chrome.send('Page.captureScreenshot', format='png')['data'])
        (SHOTS/f'{stem}-{px}px.png').write_bytes(png)
        assert png.startswith(b'\x89PNG') and len(png) > 5000
    chrome.width(1280)


# ---------------------------------------------------------------- the API reference, checked against isocal itself
# File-based (no browser): every public name of every isocal module has an entry in the built site, i.e. an element
# of class "api-entry" (pandoc makes the div a <section>) holding a heading with the name, its signature as code and
# a description. The public names: each module's `__all__` (names it defines; a re-export is documented where it is
# defined), and for each public class the members `bd.api_members` lists -- the rule, with its exclusions
# (scikit-learn's get_params, set_params, set_output, fit_transform, score, get_metadata_routing, set_*_request;
# tuple/dict/Exception methods; data attributes), is stated once, in that function's docstring.

MODULES = sorted(m.name for m in pkgutil.iter_modules([str(ROOT/bd.PKG)]) if not m.name.startswith('_'))
SIG_MARKUP = re.compile(r'`|\]\(|\\\*|</?(em|strong|code|a)\b|^\s*[>#-] ', re.M)  # markdown or HTML in a signature


@functools.lru_cache
def api_entries():
    "{entry name: [(page, signature text, description text, entry element)]} over every built page"
    out = {}
    for f in sorted(DOCS.glob('*.html')):
        soup = BeautifulSoup(f.read_text(encoding='utf-8'), 'html.parser')
        for div in soup.select('.api-entry'):
            head, code = div.find(re.compile(r'^h[1-6]$')), div.find('pre')
            rest = [e for e in div.find_all(recursive=False)
                    if e is not head and not (code and code in e.find_all('pre') + [e])]
            desc = ' '.join(e.get_text(' ', strip=True) for e in rest)
            out.setdefault(head.get_text(strip=True) if head else '', []).append(
                (f.name, code.get_text() if code else '', desc, div))
    return out


def public_names(modname):
    "[(entry name, object, kind)] for isocal.<modname>: kind is 'function', 'class', 'property', 'method', 'constant'"
    mod = importlib.import_module(f'{bd.PKG}.{modname}')
    out = []
    for n in mod.__all__:
        o = getattr(mod, n)
        if inspect.isfunction(o) or isinstance(o, type):
            if o.__module__ != mod.__name__: continue  # re-exported: checked with the module that defines it
            out.append((n, o, 'class' if isinstance(o, type) else 'function'))
            if isinstance(o, type):
                for name, owner, v in bd.api_members(o):
                    if name.split('.')[0] == n: out.append((name, v, 'property' if isinstance(v, property) else 'method'))
        elif not callable(o): out.append((n, o, 'constant'))
        else: out.append((n, o, 'function'))  # another callable (a jitted function, a partial): an entry all the same
    return out


def _params_of(code, name):
    "The ast.arguments and return annotation of a rendered `def name(...) -> T` / `name(...)` signature"
    lines = [l for l in code.strip().splitlines() if not re.fullmatch(r'\s*@(classmethod|staticmethod)\s*', l)]
    text = re.sub(r'^\s*(async\s+)?(def\s+)?' + re.escape(name) + r'\s*\(', 'def f(', '\n'.join(lines), count=1)
    fn = ast.parse(text + ': ...').body[0]
    return fn.args, fn.returns


def signature_problem(name, obj, kind, code):
    "Why rendered signature `code` is not the real signature of `obj` (None if it is)"
    code = code.strip()
    if SIG_MARKUP.search(code): return f'markup in the signature: {code!r}'
    if kind == 'constant':
        m = re.fullmatch(re.escape(name) + r' = (.+)', code, re.S)
        if not m: return f'not "{name} = <value>": {code!r}'
        expr = ast.parse(m[1].strip(), mode='eval')
        literal = (ast.Constant, ast.Tuple, ast.List, ast.Dict, ast.Set, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
                   ast.Load, ast.expr_context)
        if all(isinstance(n, literal) for n in ast.walk(expr.body)) and \
                eval(compile(expr, name, 'eval'), {'__builtins__': {}}) != obj:
            return f'{code!r} is not the value {obj!r}'
        return None
    if kind == 'property':
        ann = inspect.signature(obj.fget).return_annotation
        want = f'property {name}' + ('' if ann is inspect.Signature.empty else f': {bd._anno(ann)}')
        return None if code == want else f'{code!r}, expected {want!r}'
    f = bd._code(obj) if kind == 'method' else obj
    try: sig = inspect.signature(f)
    except (TypeError, ValueError):
        if kind != 'class': return f'no signature to check for {obj!r}'
        want = f'class {name}({", ".join(b.__name__ for b in obj.__bases__)})'
        return None if code == want else f'{code!r}, expected {want!r}'
    if kind == 'class' and code.startswith('class '): return f'{code!r}: the class has a signature, {sig}'
    params = list(sig.parameters.values())
    if kind == 'method' and not isinstance(obj, staticmethod) and params and params[0].name in ('self', 'cls'):
        params = params[1:]
    try: args, returns = _params_of(code, name)
    except SyntaxError as e: return f'{code!r} does not parse: {e}'
    P = inspect.Parameter
    got = [(a.arg, P.POSITIONAL_ONLY) for a in args.posonlyargs] + [(a.arg, P.POSITIONAL_OR_KEYWORD) for a in args.args]
    got += [(args.vararg.arg, P.VAR_POSITIONAL)] if args.vararg else []
    got += [(a.arg, P.KEYWORD_ONLY) for a in args.kwonlyargs] + ([(args.kwarg.arg, P.VAR_KEYWORD)] if args.kwarg else [])
    want = [(p.name, p.kind) for p in params]
    if got != want: return f'{code!r}: parameters {[g[0] for g in got]}, expected {[w[0] for w in want]} ({sig})'
    defaults = dict(zip([a.arg for a in args.posonlyargs + args.args][::-1], args.defaults[::-1]))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    for p in params:
        if (p.default is not P.empty) != (p.name in defaults): return f'{code!r}: default of {p.name} shown wrongly'
        if p.default is not P.empty and \
                ast.unparse(defaults[p.name]) != ast.unparse(ast.parse(repr(p.default), mode='eval')):
            return f'{code!r}: default of {p.name} is {p.default!r}'
    if kind != 'class' and (sig.return_annotation is P.empty) != (returns is None):
        return f'{code!r}: return annotation {sig.return_annotation}'
    return None


def description_problem(desc, div):
    "Why an entry's description is missing or badly rendered (None if it is fine)"
    if not desc: return 'no description (no docstring)'
    for e in div.find_all(['p', 'li']):
        t = ' '.join(''.join(s for s in e.find_all(string=True)
                             if not s.find_parent(['code', 'pre']) and not s.find_parent(class_=re.compile('math|katex')))
                     .split())
        if re.search(r'^\*|\*$|</?em>', t): return f'a stray * or tag: {t[:120]!r}'
    for li in div.find_all('li'):
        if li.find(['p', 'pre', 'ul', 'ol']):
            return f'a list item that is not one line of prose: {li.get_text(" ", strip=True)[:120]!r}'
    for e in div.find_all(['p', 'li']):  # numpydoc's `name : type` lines left as text, not made a list
        if m := re.search(r'^[\w, *]+ : .*', e.get_text(), re.M): return f'a raw numpydoc entry: {m[0][:120]!r}'
    pre = div.find('pre')
    first = (pre.parent if pre.parent.name == 'div' else pre).find_next_sibling()  # the element after the signature
    if first is not None and first.name == 'p' and \
            (first.find('em') is None or first.get_text(strip=True) != first.find('em').get_text(strip=True)):
        return f'the summary is not one emphasised paragraph: {first.get_text(" ", strip=True)[:120]!r}'
    return None


def test_api_rule():
    "`bd.api_members`: isocal's methods, properties and classmethods in, inherited scikit-learn/builtin plumbing out"
    from isocal.isotonic import IsotonicCalibrator
    from isocal.pava import Staircase
    from isocal.venn_abers import VennAbers
    names = {n for n, _, _ in bd.api_members(IsotonicCalibrator)}
    assert {'IsotonicCalibrator.fit', 'IsotonicCalibrator.predict', 'IsotonicCalibrator.transform',
            'Portable.save'} <= names
    for plumbing in ('get_params', 'set_params', 'set_output', 'fit_transform', 'score', 'get_metadata_routing',
                     'set_fit_request', 'set_transform_request'):
        assert not any(n.endswith('.' + plumbing) for n in names), plumbing
    assert 'Staircase.thresholds' in {n for n, _, _ in bd.api_members(Staircase)}
    va = {n: v for n, _, v in bd.api_members(VennAbers)}
    assert isinstance(va['Portable.load'], classmethod) and 'VennAbers.fit' in va


def test_api_no_site_debris(site):
    """No page shows nbdev's fallbacks (`(*args, **kwargs)`, 'Call self as a function'), an entry for a private name,
    or a link on a private name that goes nowhere"""
    assert list(DOCS.glob('*.html')), f"no pages built:\n{site['log']}"
    ids = {f.name: ids_of(f) for f in DOCS.glob('*.html')}
    for f in sorted(DOCS.glob('*.html')):
        soup = BeautifulSoup(f.read_text(encoding='utf-8'), 'html.parser')
        text = soup.get_text(' ')
        assert 'Call self as a function' not in text and '__getattr__(' not in text, f.name
        for div in soup.select('.api-entry'):
            head, code = div.find(re.compile(r'^h[1-6]$')), div.find('pre')
            assert head and code, f'{f.name}: an API entry without a heading or a signature: {div.get_text(" ")[:200]!r}'
            name = head.get_text(strip=True)
            assert not any(p.startswith('_') for p in name.split('.')), f'{f.name}: an API entry for private {name}'
            assert '(*args, **kwargs)' not in code.get_text(), f'{f.name}: {name} shows (*args, **kwargs)'
        for a in soup.find_all('a', href=re.compile(r'^[^:/#]+\.html#')):
            page, _, anchor = a['href'].partition('#')
            if any(p.startswith('_') for p in anchor.split('.')):
                assert anchor in ids.get(page, ()), \
                    f'{f.name}: a link on private {a.get_text()!r} to {a["href"]}, which does not exist'


@pytest.mark.parametrize('modname', MODULES)
def test_api_documented(site, modname):
    "Each public name of isocal.<modname> has an API entry with its real signature and a description"
    entries, problems = api_entries(), []
    home = [f'{p.stem}.html' for p in sorted(SRC.glob('*.ipynb')) if re.search(r'#\|\s*default_exp\s+' + modname + r'\b',
                                                                             p.read_text(encoding='utf-8'))]
    for name, obj, kind in public_names(modname):
        if name not in entries: problems.append(f'{name}: no API entry on any page'); continue
        found = []  # the module's own page first; a problem there is the one reported
        for page, code, desc, div in sorted(entries[name], key=lambda e: e[0] not in home):
            why = signature_problem(name, obj, kind, code) or description_problem(desc, div)
            if why is None: break
            found.append(f'{page}: {why}')
        else: problems.append(f'{name} ({kind}): ' + found[0])
    failed = '' if site['rc'] == 0 else '\n(pages that did not build, see test_build: ' + \
        '; '.join(l.split(':')[0] for l in site['log'].splitlines() if ' FAILED: ' in l) + ')'
    assert not problems, f'{len(problems)} public names of isocal.{modname} are not documented right:\n' + \
        '\n'.join(problems) + failed


def _entry(sig, desc_html):
    "A synthetic built API entry: (signature text, description text, element), as `api_entries` reads them"
    div = BeautifulSoup(f'<section class="api-entry"><h3>x</h3><div class="sourceCode"><pre><code>{sig}</code></pre>'
                        f'</div>{desc_html}</section>', 'html.parser').section
    return div.find('pre').get_text(), ' '.join(e.get_text(' ', strip=True) for e in div.find_all(recursive=False)[2:]), div


@pytest.mark.parametrize('name, obj, kind, sig, desc, why', [
    ('VennAbers', 'venn_abers.VennAbers', 'class', 'VennAbers(*args, **kwargs)', '<p><em>IVAP.</em></p>', 'parameters'),
    ('isotonic_regression', 'pava.isotonic_regression', 'function',
     'def isotonic_regression(y, weights=None, increasing=True)', '<p><em>PAVA.</em></p>', 'parameters'),
    ('isotonic_regression', 'pava.isotonic_regression', 'function',
     'def isotonic_regression(y, weights=None, *, increasing: bool = False) -&gt; IsotonicResult',
     '<p><em>PAVA.</em></p>', 'default of increasing'),
    ('Staircase.thresholds', 'pava.Staircase.thresholds', 'property', 'def Staircase.thresholds()',
     '<p><em>Starts.</em></p>', 'expected'),
    ('fit_staircase', 'fit.fit_staircase', 'function', None, '', 'no description'),
    ('isotonic_loss', 'forward.isotonic_loss', 'function', None,
     '<p><em>L</em>(D): the squared loss (tied x share one level).*</p>', 'stray'),
    ('isotonic_loss', 'forward.isotonic_loss', 'function', None, '<p>L*(D): the squared loss.</p>', 'summary'),
    ('isotonic_loss', 'forward.isotonic_loss', 'function', 'def isotonic_loss(`x`, y) -&gt; float',
     '<p><em>Loss.</em></p>', 'markup'),
    ('STOP_RULES', 'aum.STOP_RULES', 'constant', "STOP_RULES = ('first_min',)", '<p><em>Rules.</em></p>', 'value'),
    ('log_loss', 'metrics.log_loss', 'function', None, '<p><em>Loss.</em></p><p>y_true : array-like</p>', 'numpydoc'),
    ('build_parser', 'cli.build_parser', 'function', None,
     '<p><em>Parser.</em></p><ul><li><p>a</p></li><li><p>b</p></li></ul>', 'one line of prose'),
])
def test_api_checks_catch(name, obj, kind, sig, desc, why):
    """The checks of test_api_documented reject each fault the API reference had or could have, for that reason
    (`sig` None: the signature the site renders, which passes)"""
    mod, *attr = obj.split('.')
    o = importlib.import_module(f'{bd.PKG}.{mod}')
    for a in attr: o = inspect.getattr_static(o, a) if isinstance(o, type) else getattr(o, a)
    if sig is None:
        sig = bd.SiteRenderer.signature(o, name).replace('>', '&gt;')
        assert signature_problem(name, o, kind, _entry(sig, '')[0]) is None, sig
    code, text, div = _entry(sig, desc)
    problem = signature_problem(name, o, kind, code) or description_problem(text, div)
    assert problem and why in problem, problem


# ---------------------------------------------------------------- the site against nbdev's own (issue 31, part 2)
# File-based checks of the built pages, then the browser ones.

def soup_of(stem):
    return BeautifulSoup((DOCS/f'{stem}.html').read_text(encoding='utf-8'), 'html.parser')


def main_part(soup):
    "The page without its sidebar, contents list and navigation: what the notebook rendered"
    for sel in ('#sidebar', '#TOC', '.prev-next', 'script', 'style'):
        for e in soup.select(sel): e.decompose()
    return soup


def test_sidebar_lists_each_page_once(site):
    for stem in PAGES:
        hrefs = [a['href'] for a in soup_of(stem).select('#sidebar ul.pages a')]
        assert sorted(hrefs) == sorted(f'{s}.html' for s in PAGES), f'{stem}.html: {hrefs}'


def test_source_links_point_to_the_repository(site):
    "The page's source and each API entry's source: settings.ini's git_url, a path in the repository, never a local one"
    base = f'{bd.CFG.git_url}/blob/{bd.CFG.branch}/'
    for stem in PAGES:
        soup = soup_of(stem)
        links = [a['href'] for a in soup.select('.page-source a')]
        assert links == [f'{base}nbs/{stem}.ipynb'], links
        assert str(ROOT) not in str(soup), f'{stem}.html shows a local path'
        for div in soup.select('.api-entry'):
            src = div.select_one('a.source-link')
            name = div.find(re.compile(r'^h[1-6]$')).get_text(strip=True)
            assert src and re.fullmatch(re.escape(base) + r'isocal/\w+\.py#L\d+', src['href']), f'{stem}: {name} {src}'


def test_readme_links_match_the_built_pages(site):
    "Every link of README.md into the documentation site names a page (and anchor) that the build wrote"
    readme = (ROOT/'README.md').read_text(encoding='utf-8')
    links = re.findall(re.escape(bd.DOC_URL) + r'/([^)#\s]+)(?:#([^)\s]+))?', readme)
    assert links
    for page, anchor in links:
        assert (DOCS/page).exists(), f'README.md links {page}, which the build does not write'
        if anchor: assert anchor in ids_of(DOCS/page), f'README.md links {page}#{anchor}: no such anchor'


def test_build_log_is_quiet(site):
    "One line a page and a few more: no nbdev warning about cells that mix imports and code (370 lines of 400 once)"
    lines = site['log'].strip().splitlines()
    assert 'Found cells containing imports' not in site['log']
    assert len(lines) <= len(PAGES) + 5, '\n'.join(lines[:40])


def test_headings_never_skip_a_level(site):
    for stem in PAGES:
        levels = [int(h.name[1]) for h in main_part(soup_of(stem)).find_all(re.compile(r'^h[1-6]$'))]
        jumps = [(a, b) for a, b in zip(levels, levels[1:]) if b > a + 1]
        assert not jumps, f'{stem}.html: heading levels jump {jumps} ({levels[:30]})'


def test_contents_list_the_api_entries(site):
    "The contents list (right column) links every section and every API entry of the page"
    for stem in PAGES:
        soup = soup_of(stem)
        toc = {a['href'][1:] for a in soup.select('#TOC a[href^="#"]')}
        for div in soup.select('.api-entry'):
            head = div.find(re.compile(r'^h[1-6]$'))
            anchor = head.get('id') or div.get('id')
            assert anchor in toc, f'{stem}.html: API entry {head.get_text(strip=True)} is not in the contents'


def test_api_entries_have_a_parameter_table(site):
    "An entry whose docstring lists Parameters shows them as a table (name, type, description), as nbdev's sites do"
    soup = soup_of('01_pava')
    div = next(d for d in soup.select('.api-entry') if d.find(re.compile('^h')).get_text(strip=True) == 'isotonic_regression')
    table = div.find('table')
    assert table and [th.get_text(strip=True) for th in table.find_all('th')] == ['parameter', 'type', 'description']
    assert [tr.find('td').get_text(strip=True) for tr in table.find_all('tr')[1:]] == ['y', 'weights', 'increasing']


def test_figures_have_real_alt_text_a_caption_and_zoom(site):
    "Each figure: alt text of at least four words (no fragment such as 'Timing:'), a caption, and a link to itself"
    for stem in PAGES:
        for img in main_part(soup_of(stem)).find_all('img'):
            alt = img.get('alt', '')
            assert len(alt.split()) >= 4 and not alt.endswith(':'), f'{stem}.html: alt text {alt!r}'
            link = img.find_parent('a')
            assert link and link['href'] == img['src'] and 'zoom' in link.get('class', []), f'{stem}: {img["src"]}'
            caption = (link.parent if link.parent.name == 'p' else link).find_next_sibling()
            assert caption is not None and 'figcaption' in caption.get('class', []), f'{stem}: {img["src"]} has no caption'


def test_long_plotting_code_is_folded(site):
    "Plotting code longer than FOLD_LINES lines is folded (<details>); its figure is not"
    for stem in PAGES:
        soup = main_part(soup_of(stem))
        for pre in soup.find_all('pre'):
            code = pre.get_text()
            if bd._re_plot.search(code) and len(code.strip().splitlines()) > bd.FOLD_LINES and \
                    not pre.find_parent(class_='api-entry') and not pre.find_parent(class_='output'):
                assert pre.find_parent('details'), f'{stem}.html: {len(code.splitlines())} lines of plotting unfolded'


def test_math_is_left_out_of_search(site):
    "TeX source never reaches Pagefind's index or its excerpts"
    for stem in PAGES:
        for span in soup_of(stem).select('span.math'):
            assert span.has_attr('data-pagefind-ignore'), f'{stem}.html: {span}'


CODE_FACTS = """(() => {
  const code = [...document.querySelectorAll('div.sourceCode, pre.sourceCode')].filter(e => !e.closest('.output')
      && !e.parentElement.closest('div.sourceCode, pre.sourceCode') && e.closest('details:not([open])') === null);
  return {code: code.length, copy: code.filter(e => e.querySelector('button.copy')).length,
          scrolling: [...document.querySelectorAll('pre')].filter(p => p.scrollWidth > p.clientWidth + 1
                       && p.closest('details:not([open])') === null).map(p => p.textContent.slice(0, 60))};
})()"""


@pytest.mark.parametrize('stem', ['index', '01_pava', '04_venn_abers', '14_portable'])
def test_code_wraps_and_has_copy_buttons(site, server, chrome, stem):
    "No code block scrolls sideways at 1280 px (the README's test command among them); each has a copy button"
    chrome.width(1280)
    chrome.open(server + f'{stem}.html')
    facts = chrome.js(CODE_FACTS)
    assert facts['code'] and facts['copy'] == facts['code'], facts
    assert not facts['scrolling'], f'{stem}.html: code that scrolls sideways: {facts["scrolling"][:5]}'


def test_contents_mark_the_section_in_view(site, server, chrome):
    chrome.width(1280)
    chrome.open(server + '14_portable.html')
    anchor = chrome.js("document.querySelector('section.api-entry[id]').id")
    chrome.js(f"document.getElementById({json.dumps(anchor)}).scrollIntoView(); window.dispatchEvent(new Event('scroll')); true")
    time.sleep(0.3)
    active = chrome.js("[...document.querySelectorAll('#TOC a.active')].map(a => a.getAttribute('href'))")
    assert active == [f'#{anchor}'], active


def test_phone_layout_starts_with_the_page(site, server, chrome):
    "At 400 px the page list is folded behind a toggle: the title is near the top, and the toggle opens the list"
    chrome.width(400)
    chrome.open(server + '01_pava.html')
    top = chrome.js("document.querySelector('h1').getBoundingClientRect().top")
    assert top < 200, f'the title starts {top} px down'
    assert chrome.js("getComputedStyle(document.querySelector('#sidebar ul.pages')).display") == 'none'
    chrome.js("document.querySelector('label.nav-toggle').click(); true")
    assert chrome.js("getComputedStyle(document.querySelector('#sidebar ul.pages')).display") == 'block'
    chrome.width(1280)


def test_search_results_readable(site, server, chrome):
    "Search results open in an overlay wide enough to read, and their excerpts show no raw TeX"
    chrome.width(1280)
    chrome.open(server + 'index.html')
    hits = chrome.js(SEARCH % json.dumps('pooling'))
    assert hits
    width = chrome.js("document.querySelector('#search .pagefind-ui__drawer').getBoundingClientRect().width")
    excerpts = chrome.js("[...document.querySelectorAll('#search .pagefind-ui__result-excerpt')].map(e => e.textContent)")
    assert width >= 600, width
    assert excerpts and not [e for e in excerpts if re.search(r'\\[a-zA-Z]+|\$', e)], excerpts
