"""Every notebook runs in a real Jupyter kernel, and JupyterLab starts.

Notebooks are executed with nbclient in the `python3` kernel (cwd nbs/), skipping the cells nbdev_test skips
(`#| eval: false`, `#| slow` and the other `tst_flags`), with `.ci/run_notebook.py`'s `execute`.
"""
import importlib.util, json, secrets, socket, subprocess, sys, time, urllib.error, urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location('run_notebook', ROOT/'.ci'/'run_notebook.py')
bd = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(bd)
NOTEBOOKS = sorted(p for p in bd.NBS.glob('*.ipynb') if not p.name.startswith('_'))


@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(nb):
    bd.execute(nb)  # raises nbclient's CellExecutionError (with the cell and traceback) on any error


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_jupyterlab_starts(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    log = open(tmp_path/'jupyter.log', 'w+')
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name('jupyter')), 'lab', '--no-browser', f'--port={port}', '--ip=127.0.0.1',
         '--allow-root', f'--ServerApp.token={token}', '--ServerApp.open_browser=False',
         f'--ServerApp.root_dir={ROOT}'],
        stdout=log, stderr=subprocess.STDOUT)
    def output(): log.seek(0); return log.read()
    local = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never send 127.0.0.1 through a proxy
    try:
        deadline, status = time.time() + 60, None
        while status is None:
            assert proc.poll() is None, f'jupyter lab exited with {proc.returncode}:\n{output()}'
            assert time.time() < deadline, f'jupyter lab did not answer within 60 s:\n{output()}'
            try:
                with local.open(f'http://127.0.0.1:{port}/api/status?token={token}', timeout=5) as r:
                    if r.status == 200: status = json.load(r)
            except (urllib.error.URLError, ConnectionError, TimeoutError): time.sleep(0.5)
        assert 'started' in status, status
        with local.open(f'http://127.0.0.1:{port}/lab?token={token}', timeout=30) as r:
            assert r.status == 200 and b'JupyterLab' in r.read()
    finally:
        proc.terminate()
        try: proc.wait(20)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait()
        log.close()
