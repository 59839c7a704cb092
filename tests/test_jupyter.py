"""Notebooks in real Jupyter kernels and in a real JupyterLab.

- A kernel never outlives its notebook: `.ci/run_notebook.py` shuts down the kernel it starts (nbclient shuts down
  only kernels of managers it made itself; 15 kernels, 5.5 GB, were once alive at once).
- JupyterLab starts, and (with Chromium, `.ci/chrome.py`) notebooks opened in it and closed without edits are not
  marked modified and close without a dialog. JupyterLab copies its kernel's `language_info` and display name into
  the metadata of a notebook it opens: `.ci/notebooks.py run` saves the first, and the kernel in `.ci/jupyter`
  (JupyterLab started with JUPYTER_PATH=.ci/jupyter, as the README says) is named as `nbdev_clean` names it in every
  notebook ("python3", not ipykernel's "Python 3 (ipykernel)"). $ISOCAL_DOCS_NBS names another folder of executed
  notebooks to open.

The notebooks themselves run once per test command, under `nbdev_test`, not here.
"""
import importlib.util, json, os, secrets, shutil, socket, subprocess, sys, tempfile, time, urllib.error, urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location('run_notebook', ROOT/'.ci'/'run_notebook.py')
rn = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(rn)
_cspec = importlib.util.spec_from_file_location('chrome', ROOT/'.ci'/'chrome.py')
ch = importlib.util.module_from_spec(_cspec); _cspec.loader.exec_module(ch)
SRC = Path(os.environ.get('ISOCAL_DOCS_NBS') or ROOT/'nbs')  # executed notebooks to open in JupyterLab
local = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never send 127.0.0.1 through a proxy


def kernels_of(pid):
    "Process ids of the ipykernel processes whose parent is `pid` (Linux /proc)"
    out = []
    for d in Path('/proc').iterdir():
        if not d.name.isdigit(): continue
        try:
            if 'ipykernel' in (d/'cmdline').read_bytes().decode(errors='replace') and \
                    int((d/'stat').read_text().rsplit(')', 1)[1].split()[1]) == pid:
                out.append(int(d.name))
        except (OSError, ValueError, IndexError): pass
    return out


@pytest.mark.skipif(not Path('/proc/self/stat').exists(), reason='counts kernel processes through /proc (Linux)')
def test_no_kernel_outlives_its_notebook(tmp_path):
    "A notebook run in a kernel (passing, then failing): afterwards no kernel process of ours is left"
    before = kernels_of(os.getpid())
    ok, bad = tmp_path/'ok.ipynb', tmp_path/'bad.ipynb'
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('import os; print(os.getpid())')]), ok)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('raise ValueError("on purpose")')]), bad)
    pid = int(rn.execute(ok).cells[0].outputs[0]['text'])
    with pytest.raises(Exception, match='on purpose'): rn.execute(bad)
    deadline = time.time() + 20
    while (kernels_of(os.getpid()) != before or Path(f'/proc/{pid}').exists()) and time.time() < deadline: time.sleep(0.2)
    assert not Path(f'/proc/{pid}').exists(), f'the kernel {pid} of ok.ipynb is still running'
    assert kernels_of(os.getpid()) == before


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Lab:
    "A JupyterLab server on a free port serving `root`, with a fresh workspace (no tabs restored from an earlier run)"
    def __init__(self, root, log_path, expose=False):
        env = dict(os.environ, JUPYTER_PATH=str(ROOT/'.ci'/'jupyter'))  # the README's way to start it
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.log = open(log_path, 'w+')
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).with_name('jupyter')), 'lab', '--no-browser', f'--port={self.port}',
             '--ip=127.0.0.1', '--allow-root', f'--ServerApp.token={self.token}', '--ServerApp.open_browser=False',
             f'--ServerApp.root_dir={root}', f'--LabApp.workspaces_dir={tempfile.mkdtemp(prefix="jl-ws-")}']
            + (['--LabApp.expose_app_in_browser=True'] if expose else []),
            stdout=self.log, stderr=subprocess.STDOUT, cwd=root, env=env)
        deadline, self.status = time.time() + 90, None
        while self.status is None:
            assert self.proc.poll() is None, f'jupyter lab exited with {self.proc.returncode}:\n{self.output()}'
            assert time.time() < deadline, f'jupyter lab did not answer within 90 s:\n{self.output()}'
            try:
                with local.open(self.url('api/status'), timeout=5) as r:
                    if r.status == 200: self.status = json.load(r)
            except (urllib.error.URLError, ConnectionError, TimeoutError): time.sleep(0.5)

    def url(self, path): return f'http://127.0.0.1:{self.port}/{path}?token={self.token}'
    def output(self): self.log.seek(0); return self.log.read()

    def close(self):
        self.proc.terminate()
        try: self.proc.wait(30)
        except subprocess.TimeoutExpired: self.proc.kill(); self.proc.wait()
        self.log.close()


def test_jupyterlab_starts(tmp_path):
    lab = Lab(ROOT, tmp_path/'jupyter.log')
    try:
        assert 'started' in lab.status, lab.status
        with local.open(lab.url('lab'), timeout=30) as r:
            assert r.status == 200 and b'JupyterLab' in r.read()
    finally: lab.close()


STATE = """(() => {
  const w = [...window.jupyterapp.shell.widgets('main')].find(x => x.context && x.context.path === %s);
  if (!w || !w.context.isReady) return null;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return {dirty: w.context.model.dirty, kernel: k ? k.status : null, cells: w.content.widgets.length,
          outputs: w.node.querySelectorAll('.jp-OutputArea-output').length,
          dialogs: document.querySelectorAll('.jp-Dialog').length,
          metadata: w.context.model.toJSON().metadata};
})()"""

OPENED = ['index.ipynb', '01_pava.ipynb', '14_portable.ipynb']  # the front page, the example, a short one


def test_notebooks_open_and_close_clean_in_jupyterlab(tmp_path):
    """Opened in JupyterLab, with its kernel started, a notebook shows its saved outputs and is not marked modified;
    closed without edits, it closes without asking to save"""
    ch.need_chromium()
    for name in OPENED: shutil.copy(SRC/name, tmp_path/name)  # a copy: JupyterLab's autosave never touches nbs/
    lab = Lab(tmp_path, tmp_path/'jupyter.log', expose=True)
    chrome = ch.Chrome()
    try:
        for name in OPENED:
            chrome.open(lab.url(f'lab/tree/{name}'))
            deadline, state = time.time() + 120, None
            while time.time() < deadline:
                state = chrome.js("window.jupyterapp ? " + STATE % json.dumps(name) + " : null")
                if state and state['kernel'] == 'idle': break
                time.sleep(0.5)
            assert state and state['kernel'] == 'idle', f'{name}: kernel not ready: {state}\n{lab.output()[-3000:]}'
            time.sleep(1)  # the kernel's info has arrived: JupyterLab has written what it writes into the metadata
            state = chrome.js(STATE % json.dumps(name))
            saved = json.loads((tmp_path/name).read_text())['metadata']
            assert not state['dirty'], (f'{name} is marked modified right after opening; JupyterLab metadata '
                                        f'{state["metadata"]}, saved {saved}')
            deadline = time.time() + 20                 # JupyterLab renders cells lazily (windowing): on a loaded
            while state['outputs'] == 0 and time.time() < deadline:    # machine the first outputs can come later
                time.sleep(0.5)
                state = chrome.js(STATE % json.dumps(name))
            assert state['outputs'] > 0 and not state['dialogs'], state
            chrome.js("(() => { const w = [...window.jupyterapp.shell.widgets('main')].find(x => x.context && "
                      f"x.context.path === {json.dumps(name)}); w.close(); return true; }})()")
            time.sleep(1)
            assert chrome.js("document.querySelectorAll('.jp-Dialog').length") == 0, f'closing {name} asked to save'
            assert chrome.js(f"[...window.jupyterapp.shell.widgets('main')].some(x => x.context && "
                             f"x.context.path === {json.dumps(name)})") is False, f'{name} did not close'
    finally:
        chrome.close(); lab.close()
    for name in OPENED: assert (tmp_path/name).read_bytes() == (SRC/name).read_bytes(), f'{name} was written'


def test_missing_tools_skip_with_a_reason_or_fail_in_ci(monkeypatch):
    "Without Chromium a browser test is skipped with how to install it; under ISOCAL_NO_SKIP=1 (CI) it fails"
    monkeypatch.setattr(ch, 'CHROMIUM', None)
    monkeypatch.delenv(ch.NO_SKIP, raising=False)
    with pytest.raises(pytest.skip.Exception, match='apt-get install chromium'): ch.need_chromium()
    monkeypatch.setenv(ch.NO_SKIP, '1')
    with pytest.raises(pytest.fail.Exception, match='ISOCAL_NO_SKIP=1'): ch.need_chromium()


def test_the_suite_never_runs_a_notebook_of_nbs_again():
    "Each notebook runs once per test command, under nbdev_test: the notebook runners refuse nbs/ inside pytest"
    _nspec = importlib.util.spec_from_file_location('notebooks', ROOT/'.ci'/'notebooks.py')
    nbk = importlib.util.module_from_spec(_nspec); _nspec.loader.exec_module(nbk)
    for run in (rn.execute, nbk.execute):
        with pytest.raises(RuntimeError, match='run by nbdev_test'): run(ROOT/'nbs'/'00_core.ipynb')
