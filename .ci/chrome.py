"""Headless Chromium for the browser tests (tests/test_docs.py, tests/test_jupyter.py), and the rule for tools the
system must provide.

`Chrome` is a minimal client of the Chrome DevTools protocol (websocket-client): one headless Chromium, one tab.
`CHROMIUM` is $CHROMIUM, else `chromium` on PATH, else None. `missing(why)` skips a test whose system tool is absent
(Chromium, npm), with the reason in pytest's report (`pytest -rs` lists them); with ISOCAL_NO_SKIP=1, which
.ci/run sets, it fails instead, so CI runs every test or fails.
"""
import json, os, shutil, subprocess, tempfile, time, urllib.request
from pathlib import Path

import pytest
import websocket

CHROMIUM = os.environ.get('CHROMIUM') or shutil.which('chromium') or shutil.which('chromium-browser')
NO_SKIP = 'ISOCAL_NO_SKIP'
_local = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never send 127.0.0.1 through a proxy


def missing(why):
    "Skip the test for a missing system tool `why`; fail instead when $ISOCAL_NO_SKIP is 1 (CI)"
    if os.environ.get(NO_SKIP) == '1': pytest.fail(f'{why} ({NO_SKIP}=1: every test must run)')
    pytest.skip(why)


def need_chromium():
    "The Chromium binary, or `missing` with how to install it"
    if not (CHROMIUM and Path(CHROMIUM).exists()):
        missing('Chromium not found (Debian/Ubuntu: apt-get install chromium; or set $CHROMIUM): '
                'the browser checks of the site and of JupyterLab are skipped')
    return CHROMIUM


class Chrome:
    "Minimal Chrome DevTools protocol client: one headless Chromium, one tab"
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix='chromium-')
        self.proc = subprocess.Popen(
            [need_chromium(), '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
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


