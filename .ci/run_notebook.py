"""Execute a notebook the way nbdev_test does, but in a real `python3` Jupyter kernel: `execute(path)` -> the executed
nbformat node; `python .ci/run_notebook.py nbs/01_pava.ipynb` runs one from the command line.

The test command runs every notebook once, with `nbdev_test`; this is for running one as JupyterLab would (the cells
nbdev_test skips, `#| eval: false` and the `tst_flags`, are skipped here too), and tests/test_jupyter.py checks with it
that a kernel never outlives its notebook. The docs build executes nothing: it renders the saved outputs
(`.ci/notebooks.py run` saves them).
"""
import os, sys, tempfile, time
from pathlib import Path

import nbformat
from jupyter_client import KernelManager
from nbclient import NotebookClient
from nbdev.config import get_config
from nbdev.process import extract_directives

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
FLAGS = set(get_config(path=ROOT).get('tst_flags', '').split())


def skipped(directives):
    "Would nbdev_test skip a cell with these nbdev `directives`?"
    return directives.get('eval:', [''])[0].lower() == 'false' or bool(FLAGS & directives.keys())


def refuse_under_pytest(path):
    """The test command runs each notebook of nbs/ once, under nbdev_test: a test that would run one again (in a kernel,
    minutes each) is an error, not a second run. Outside pytest (`run`, a person) anything may be run."""
    if os.environ.get('PYTEST_CURRENT_TEST') and Path(path).resolve().parent == NBS.resolve():
        raise RuntimeError(f'{Path(path).name} is run by nbdev_test in the test command; a test may not run it again '
                           '(run a small notebook of its own in tmp_path instead)')


def execute(path, timeout=1800):
    """Run notebook `path` in a `python3` kernel with cwd = its folder, skipping the cells nbdev_test skips; the kernel
    is shut down when the notebook ends, whether it passed or failed"""
    refuse_under_pytest(path)
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        if c.cell_type == 'code' and ('nbdev_export' + '(' in c.source or skipped(extract_directives(c, remove=False))):
            c.metadata.setdefault('tags', []).append('skip-execution')
    # The kernel inherits our environment; MPLBACKEND (e.g. Agg, set by CI scripts) would override the inline backend
    # and the notebook would lose its figures.
    env = {k: v for k, v in os.environ.items() if k != 'MPLBACKEND'}
    # IPC sockets, not TCP: kernels started side by side (pytest-xdist) cannot race for a port.
    # The socket path prefix must be absolute: the kernel runs in nbs/, this process elsewhere.
    sockets = os.path.join(tempfile.gettempdir(), f'isocal-kernel-{os.getpid()}-{time.monotonic_ns()}')
    km = KernelManager(kernel_name='python3', transport='ipc', ip=sockets)
    try:
        # nbclient shuts down only the kernels of managers it made itself: this one is ours to shut down
        NotebookClient(nb, km=km, timeout=timeout, startup_timeout=180,
                       resources={'metadata': {'path': str(Path(path).parent)}}).execute(env=env)
    finally:
        if km.has_kernel: km.shutdown_kernel(now=False)
        km.cleanup_resources()
        for leftover in Path(sockets).parent.glob(Path(sockets).name + '-*'): leftover.unlink(missing_ok=True)
    return nb


if __name__ == '__main__':
    for p in sys.argv[1:]: execute(p); print(f'{p}: ran')
