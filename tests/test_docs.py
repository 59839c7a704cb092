"""The offline documentation site (`.ci/build_docs.py`), checked page by page in headless Chromium.

The module fixture builds the whole site into `_docs/` (once per run, also under pytest-xdist), then every page is
opened in Chromium driven over the DevTools protocol (websocket-client): title, images decoded, MathML present where the
notebook has math, figures present where it plots, no leftover nbdev/Quarto syntax, no network loads, no broken
internal links. `_docs/screenshot.png` is saved for CI. Missing Chromium is a failure, not a skip (set $CHROMIUM to
use another Chromium/Chrome binary).
"""
import base64, fcntl, functools, importlib.util, json, os, re, shutil, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

import nbformat
import pytest
import websocket
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT/'_docs'
CHROMIUM = os.environ.get('CHROMIUM') or shutil.which('chromium') or '/usr/bin/chromium'  # env var: another build
_spec = importlib.util.spec_from_file_location('build_docs', ROOT/'.ci'/'build_docs.py')
bd = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(bd)
PAGES = bd.page_stems()
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
            r = subprocess.run([sys.executable, str(ROOT/'.ci'/'build_docs.py'), '--out', str(DOCS)],
                               capture_output=True, text=True, timeout=3600)
            res = {'uid': uid, 'rc': r.returncode, 'log': r.stdout + r.stderr[-8000:]}
            stamp.write_text(json.dumps(res))
    return res


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
        self.send('Page.enable'); self.send('Network.enable')

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
          imgs: [...document.images].map(i => [i.naturalWidth, i.naturalHeight, i.src.slice(0, 30)]),
          maths: document.getElementsByTagName('math').length,
          ids: attr('[id]', 'id'), links: attr('a[href]', 'href'),
          resources: attr('script[src],img[src],iframe[src],source[src],embed[src],video[src],audio[src]', 'src')
                     .concat(attr('link[href]', 'href'))};
})()"""


def notebook_facts(stem):
    "(has math, shows a figure) from the notebook source: $-math in markdown; plotting in cells that are run and shown"
    nb = nbformat.read(bd.NBS/f'{stem}.ipynb', as_version=4)
    md = '\n'.join(c.source for c in nb.cells if c.cell_type == 'markdown')
    math = bool(re.search(r'\$\$.+?\$\$|\$[^$\s][^$\n]*\$', md, re.S))
    def shown(c):
        d = bd.extract_directives(c, remove=False)
        return not (bd.skipped(d) or d.keys() & {'export', 'exporti', 'hide', 'default_exp'})
    plots = re.compile(r'\bplt\.|\.plot\(|reliability_diagram\(|\.imshow\(|\.hist\(|\.scatter\(')
    figs = any(c.cell_type == 'code' and plots.search(c.source) and shown(c) for c in nb.cells)
    return math, figs


@functools.lru_cache
def ids_of(html_file):
    soup = BeautifulSoup(Path(html_file).read_text(encoding='utf-8'), 'html.parser')
    return {t['id'] for t in soup.find_all(id=True)}


@pytest.mark.parametrize('stem', PAGES)
def test_page(site, chrome, stem):
    need(chrome)
    page = DOCS/f'{stem}.html'
    assert page.exists(), f'{page} was not built (see test_build)'
    requests = chrome.open(page.as_uri())
    info = chrome.js(PAGE_INFO)
    title = re.sub(r'`|\*\*', '', bd.page_title(stem))
    assert info['title'] and ' '.join(info['title'].split()) == ' '.join(title.split())
    # everything nbdev/Quarto-specific was interpreted, not printed
    html = page.read_text(encoding='utf-8')
    for debris in ['#|', '{target=', '{.callout', ':::']:
        assert debris not in info['text'], f'{debris!r} leaked into the text of {page.name}'
    assert '{target=' not in html and '#| ' not in html
    # self-contained: no http(s) resources, the browser fetched nothing but the page and data: URIs
    remote = [r for r in info['resources'] if r and re.match(r'(https?:)?//', r)]
    assert not remote, f'external resources in {page.name}: {remote}'
    fetched = [u for u in requests if not u.startswith(('file:', 'data:'))]
    assert not fetched, f'{page.name} loaded {fetched}'
    # images decoded; MathML and figures where the notebook has them
    bad = [i for i in info['imgs'] if not (i[0] > 0 and i[1] > 0)]
    assert not bad, f'images that did not decode in {page.name}: {bad}'
    math, figs = notebook_facts(stem)
    if math: assert info['maths'] > 0, f'{stem}.ipynb has $math$ but {page.name} has no <math>'
    if figs: assert info['imgs'], f'{stem}.ipynb plots but {page.name} has no <img>'
    # internal links resolve: the file exists and so does the #anchor
    for href in info['links']:
        if re.match(r'[a-z][\w+.-]*:', href): continue  # http:, https:, mailto:, ...
        target, _, anchor = href.partition('#')
        f = DOCS/target if target else page
        assert f.exists(), f'{page.name}: broken link {href}'
        if anchor: assert anchor in (info['ids'] if f == page else ids_of(f)), f'{page.name}: no anchor for {href}'


def test_screenshot(site, chrome):
    "Save a screenshot of the home page as a CI artifact"
    need(chrome)
    assert (DOCS/'index.html').exists(), 'index.html was not built (see test_build)'
    chrome.open((DOCS/'index.html').as_uri())
    png = base64.b64decode(chrome.send('Page.captureScreenshot', format='png')['data'])
    (DOCS/'screenshot.png').write_bytes(png)
    assert png.startswith(b'\x89PNG') and len(png) > 5000
