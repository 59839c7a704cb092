#!/usr/bin/env python
"""Keep the notebooks' saved outputs honest: regenerate them, and check they are not stale.

The notebooks in nbs/ are committed *executed*: a reader on GitHub, in JupyterLab before running anything, or on a
site built from saved outputs sees the evidence the prose cites. Two commands:

    python .ci/notebooks.py run [NB ...]     # execute (slow cells included) and save outputs, in place
    python .ci/notebooks.py check [NB ...]   # exit 1 if any saved output is stale or unpresentable

`run` executes each notebook top to bottom in a fresh `python3` kernel (cwd nbs/), skipping only `#| eval: false`
cells, gives it the python3 kernelspec and the `language_info` its kernel reported (what JupyterLab writes into the
metadata when it opens the notebook and starts its kernel: saved already, the notebook opens unmodified; settings.ini
lets `nbdev_clean` keep the key), and stamps every code cell with `source_digest`, a digest of the source the
outputs came from (settings.ini lets `nbdev_clean` keep this key too).

Execution counts stay empty (`[ ]:` in JupyterLab): `nbdev_clean` clears them, so diffs show only real changes, and
what a count would say is already known: every saved output comes from one top-to-bottom run of the notebook as it
is, which each cell's `source_digest` vouches for (`check` fails when a cell changed after its outputs were saved). The notebook is written to a temporary
file and renamed into place only when every cell ran, so a failed run never leaves a half-executed notebook.
With no arguments it runs every notebook in nbs/, `--jobs 2` two at a time.

`check` fails when a code cell's source no longer matches its digest (edited after its outputs were saved), when a
notebook was never executed or lacks the kernelspec, and when an output shows what a reader must not see: a machine
path, a NumPy scalar repr such as `np.float64(0.5)`, or an error. That an executed notebook would raise is
`nbdev_test`'s job in CI; `run` also fails on it.
"""
import argparse, hashlib, json, os, re, sys, tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / 'nbs'
KERNELSPEC = {'display_name': 'python3', 'language': 'python', 'name': 'python3'}  # as nbdev_clean writes it
DIGEST_KEY = 'source_digest'
FORBIDDEN = [(re.compile(r'np\.(float|int|bool)\w*\('), 'a NumPy scalar repr'),
             (re.compile(r'(/work/|/tmp/|/home/|/root/|\.venv/)'), 'a machine path'),
             (re.compile(r'<dask\.|dask\.array<|Dask (Series|DataFrame|Name)'), 'a raw Dask repr')]


def digest(source) -> str:
    "The digest stamped on a code cell: its source, whitespace at the ends ignored."
    text = ''.join(source) if isinstance(source, list) else source
    return hashlib.sha256(text.strip().encode()).hexdigest()[:16]


def notebooks(names=()):
    if names: return [Path(n).resolve() for n in names]
    return sorted(p for p in NBS.glob('*.ipynb') if not p.name.startswith('_'))


def not_evaluated(source: str) -> bool:
    "Cells nbdev_test never runs: `#| eval: false`."
    return re.search(r'^#\|\s*eval:\s*false\s*$', source, re.M) is not None


def refuse_under_pytest(path):
    """The test command runs each notebook of nbs/ once, under nbdev_test: a test that would run one again (in a kernel,
    minutes each) is an error, not a second run. Outside pytest (`run`, a person) anything may be run."""
    if os.environ.get('PYTEST_CURRENT_TEST') and Path(path).resolve().parent == NBS.resolve():
        raise RuntimeError(f'{Path(path).name} is run by nbdev_test in the test command; a test may not run it again '
                           '(run a small notebook of its own in tmp_path instead)')


def execute(path: Path, timeout=3600):
    "Run one notebook in place; return its path and the wall time."
    import time
    import nbformat
    from nbclient import NotebookClient
    refuse_under_pytest(path)
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != 'code': continue
        tags = cell.metadata.setdefault('tags', [])
        if not_evaluated(cell.source) and 'skip-execution' not in tags: tags.append('skip-execution')
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name='python3', resources={'metadata': {'path': str(NBS)}},
                   skip_cells_with_tag='skip-execution').execute()
    for cell in nb.cells:
        if cell.cell_type != 'code': continue
        tags = [t for t in cell.metadata.pop('tags', []) if t != 'skip-execution']
        if tags: cell.metadata['tags'] = tags
        cell.metadata.pop('execution', None)
        cell.metadata[DIGEST_KEY] = digest(cell.source)
        cell.outputs = joined_streams(cell.outputs)
    nb.metadata['kernelspec'] = dict(KERNELSPEC)  # nb.metadata.language_info: the kernel's, as nbclient left it
    write_atomically(path, nb)
    return path.name, time.perf_counter() - start


def joined_streams(outputs):
    "Consecutive prints to the same stream as one output (a loop's lines in one box, not one box per flush)."
    joined = []
    for out in outputs:
        if (joined and out.get('output_type') == 'stream' and joined[-1].get('output_type') == 'stream'
                and joined[-1].get('name') == out.get('name')):
            joined[-1]['text'] = joined[-1]['text'] + out['text']
        else: joined.append(out)
    return joined


def write_atomically(path: Path, nb):
    "Write `nb` beside `path` in nbdev_clean's form (Jupyter's line lists, sorted keys), then rename it into place."
    import nbformat
    from execnb.nbio import nb2str
    from nbdev.clean import clean_nb
    from nbdev.config import get_config
    cfg = get_config(path=ROOT)
    plain = json.loads(nbformat.writes(nb))
    clean_nb(plain, False, cfg.get('allowed_metadata_keys').split(), cfg.get('allowed_cell_metadata_keys').split(),
             cfg.clean_ids)
    fd, tmp = tempfile.mkstemp(suffix='.ipynb', dir=path.parent)
    with os.fdopen(fd, 'w', encoding='utf-8') as f: f.write(nb2str(plain))
    os.replace(tmp, path)


def output_text(out) -> str:
    if 'text' in out: return ''.join(out['text'])
    data = out.get('data', {})
    return ''.join(''.join(v) if isinstance(v, list) else v for k, v in data.items() if k.startswith('text/'))


def problems(path: Path):
    "What a reader would find wrong with this notebook's saved outputs (empty when it is fresh)."
    nb = json.loads(path.read_text(encoding='utf-8'))
    found = []
    if nb.get('metadata', {}).get('kernelspec') != KERNELSPEC:
        found.append(f'not the python3 kernelspec ({KERNELSPEC})')
    if nb.get('metadata', {}).get('language_info', {}).get('name') != 'python':
        found.append('no language_info (JupyterLab would add it on opening, and mark the notebook modified)')
    for i, cell in enumerate(nb['cells']):
        if cell['cell_type'] != 'code' or not ''.join(cell['source']).strip(): continue
        where = f'cell {i} ({cell.get("id", "?")})'
        stamp = cell.get('metadata', {}).get(DIGEST_KEY)
        if stamp is None: found.append(f'{where}: never executed (no {DIGEST_KEY})')
        elif stamp != digest(cell['source']): found.append(f'{where}: source edited after its outputs were saved')
        for out in cell.get('outputs', []):
            if out.get('output_type') == 'error': found.append(f'{where}: saved output is an error ({out.get("ename")})')
            text = output_text(out)
            for pattern, what in FORBIDDEN:
                m = pattern.search(text)
                if m: found.append(f'{where}: output shows {what}: {text[max(0, m.start() - 30):m.end() + 30]!r}')
    return found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('command', choices=['run', 'check'])
    ap.add_argument('notebooks', nargs='*', help='notebooks (default: every nbs/*.ipynb)')
    ap.add_argument('--jobs', type=int, default=1, help='notebooks executed at once by `run`')
    args = ap.parse_intermixed_args(argv)
    paths = notebooks(args.notebooks)
    if args.command == 'run':
        if args.jobs == 1: runs = map(execute, paths)
        else: runs = ProcessPoolExecutor(args.jobs).map(execute, paths)
        for name, secs in runs: print(f'{name}: executed in {secs:.0f} s', flush=True)
        return 0
    bad = {p.name: problems(p) for p in paths}
    bad = {k: v for k, v in bad.items() if v}
    for name, found in bad.items():
        print(f'{name}:'); print('\n'.join(f'  {f}' for f in found))
    if bad: print(f'\nStale or unpresentable saved outputs: regenerate with `python .ci/notebooks.py run <notebook>`.')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
