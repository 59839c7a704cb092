"""The offline documentation site (`.ci/build_docs.py`), checked page by page in headless Chromium.

The module fixture builds the whole site into `_docs/` from the notebooks' saved outputs (once per run, also under
pytest-xdist; $ISOCAL_DOCS_NBS names another folder of executed notebooks to build from, default nbs/), serves it
with python's http.server on 127.0.0.1 (Pagefind's search cannot load from file://), and opens every page in
Chromium driven over the DevTools protocol (websocket-client): title with the site name, no console errors, images
decoded with alt text, KaTeX-rendered maths where the notebook has math, figures where it plots, no leftover
nbdev/Quarto syntax, no network loads beyond the local server, no broken internal links, nothing wider than the page
at 400 px and at desktop width. Search must find the PAVA page. Screenshots of three pages go to
`_docs_screenshots/` for CI. Missing Chromium is a failure, not a skip (set $CHROMIUM to use another binary).
"""
import base64, fcntl, functools, http.server, importlib.util, json, os, re, shutil, subprocess, sys, tempfile
import threading, time, urllib.request
from pathlib import Path

import nbformat
import pytest
import websocket
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT/'_docs'
SHOTS = ROOT/'_docs_screenshots'
CHROMIUM = os.environ.get('CHROMIUM') or shutil.which('chromium') or '/usr/bin/chromium'  # env var: another build
_spec = importlib.util.spec_from_file_location('build_docs', ROOT/'.ci'/'build_docs.py')
bd = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(bd)
SRC = Path(os.environ.get('ISOCAL_DOCS_NBS') or bd.NBS)  # executed notebooks the site is built from
PAGES = bd.page_stems(nbs=SRC)
_local = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never send 127.0.0.1 through a proxy


@pytest.fixture(scope='module')
def site(request):
    "Build the site once per test run (xdist workers share one build through a lock and a stamp): {rc, log}"
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


class Chrome:
    "Minimal Chrome DevTools protocol client: one headless Chromium, one tab"
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix='chromium-')
        self.proc = subprocess.Popen(
            [CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
             '--disable-component-update', '--no-first-run', '--disable-sync', f'--user-data-dir={self.tmp}',
             '--remote-debugging-port=0', '--window-size=1280,900', 'about:blank'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file, t0 = Path(self.tmp)/'DevToolsActivePort', time.time()
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.time() - t0 > 60: raise RuntimeError('Chromium did not start')
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        tabs = json.load(_local.open(f'http://127.0.0.1:{port}/json/list', timeout=10))
        url = next(t['webSocketDebuggerUrl'] for t in tabs if t['type'] == 'page')
        self.ws = websocket.create_connection(url, timeout=120, suppress_origin=True)
        self.n, self.events = 0, []
        for domain in ('Page', 'Network', 'Runtime', 'Log'): self.send(f'{domain}.enable')

    def send(self, method, **params):
        "Call a DevTools method and return its result (events arriving meanwhile are kept in `events`)"
        self.n += 1
        self.ws.send(json.dumps({'id': self.n, 'method': method, 'params': params}))
        while (msg := json.loads(self.ws.recv())).get('id') != self.n: self.events.append(msg)
        if 'error' in msg: raise RuntimeError(f'{method}: {msg["error"]}')
        return msg['result']

    def open(self, url):
        "Navigate to `url` and wait for its load event; returns the URLs of all requests the page made"
        self.events = []
        self.send('Page.navigate', url=url)
        while not any(e.get('method') == 'Page.loadEventFired' for e in self.events):
            self.events.append(json.loads(self.ws.recv()))
        return [e['params']['request']['url'] for e in self.events if e.get('method') == 'Network.requestWillBeSent']

    def errors(self):
        "Console errors, uncaught exceptions and failed loads since the last `open`"
        out = []
        for e in self.events:
            m, p = e.get('method'), e.get('params', {})
            if m == 'Runtime.exceptionThrown': out.append(p['exceptionDetails'].get('exception', {}).get('description')
                                                          or p['exceptionDetails'].get('text'))
            elif m == 'Runtime.consoleAPICalled' and p.get('type') == 'error':
                out.append(' '.join(str(a.get('value', a.get('description'))) for a in p.get('args', [])))
            elif m == 'Log.entryAdded' and p['entry'].get('level') == 'error': out.append(p['entry'].get('text'))
        return out

    def width(self, px):
        "Emulate a viewport `px` wide (900 high)"
        self.send('Emulation.setDeviceMetricsOverride', width=px, height=900, deviceScaleFactor=1, mobile=False)

    def js(self, expr):
        "Value of JavaScript expression `expr` (promises awaited)"
        r = self.send('Runtime.evaluate', expression=expr, returnByValue=True, awaitPromise=True)
        if 'exceptionDetails' in r: raise RuntimeError(r['exceptionDetails'])
        return r['result'].get('value')

    def close(self):
        self.ws.close()
        self.proc.terminate()
        try: self.proc.wait(10)
        except subprocess.TimeoutExpired: self.proc.kill(); self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope='module')
def chrome():
    "A headless Chromium, or None if it is not installed (the tests then fail with a clear message)"
    if not Path(CHROMIUM).exists(): yield None; return
    c = Chrome()
    yield c
    c.close()


def test_build(site):
    assert site['rc'] == 0, f"docs build failed:\n{site['log']}"


def need(chrome):
    assert chrome is not None, (f'Chromium not found at {CHROMIUM}: the docs tests need it '
                                '(Debian/Ubuntu: apt-get install chromium)')


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
    need(chrome)
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
    # (*args, **kwargs): the signature nbdev gives a class without its own __init__ (no isocal API takes them)
    for debris in ['#|', '{target=', '{.callout', ':::', 'Call self as a function', '(*args, **kwargs)', '__getattr__(']:
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
    need(chrome)
    chrome.width(1280)
    chrome.open(server + 'index.html')
    hits = chrome.js(SEARCH % json.dumps('pool adjacent violators'))
    assert hits and '01_pava' in hits[0], f'search results: {hits}'
    assert not chrome.errors(), chrome.errors()


def test_search_from_file(site, chrome):
    "From file:// (where browsers refuse Pagefind's index) the page loads cleanly and says how to serve the site"
    need(chrome)
    chrome.open((DOCS/'index.html').as_uri())
    assert 'http.server' in chrome.js("document.querySelector('#search').innerText")
    assert not chrome.errors(), chrome.errors()


@pytest.mark.parametrize('stem', ['index', '01_pava', '04_venn_abers'])
def test_screenshot(site, server, chrome, stem):
    "Save screenshots (desktop and 400 px) of three pages into _docs_screenshots/ as CI artifacts"
    need(chrome)
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
