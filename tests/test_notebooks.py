"The notebooks are committed executed: their saved outputs must come from their current source (.ci/notebooks.py)."
import importlib.util, json, os, re, shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location('notebooks', ROOT / '.ci' / 'notebooks.py')
notebooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(notebooks)


@pytest.mark.parametrize('path', notebooks.notebooks(), ids=lambda p: p.name)
def test_saved_outputs_are_fresh(path):
    assert notebooks.problems(path) == []


def tiny_notebook(path):
    "A small executed-looking notebook: a markdown cell and two code cells, never run (no digests yet)"
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell('# Tiny'),
                                         nbformat.v4.new_code_cell('x = 21'), nbformat.v4.new_code_cell('print(x * 2)')])
    nbformat.write(nb, path)


def test_check_fails_on_an_edited_cell_and_passes_after_regeneration(tmp_path):
    """`check` fails on a notebook never run and on a cell edited after its run; `run` fixes both and saves what
    JupyterLab would write on opening (kernelspec, language_info). A tiny notebook: the test command runs each of
    nbs/ once, under nbdev_test, and not again here"""
    path = tmp_path / 'tiny.ipynb'
    tiny_notebook(path)
    assert notebooks.main(['check', str(path)]) == 1
    assert notebooks.main(['run', str(path)]) == 0
    assert notebooks.main(['check', str(path)]) == 0, notebooks.problems(path)
    nb = json.loads(path.read_text())
    assert nb['metadata']['kernelspec'] == notebooks.KERNELSPEC and nb['metadata']['language_info']['name'] == 'python'
    assert nb['cells'][2]['outputs'][0]['text'] == ['42\n']
    nb['cells'][2]['source'] = ['print(x * 3)']
    path.write_text(json.dumps(nb, indent=1))
    assert any('edited after' in p for p in notebooks.problems(path))
    assert notebooks.main(['check', str(path)]) == 1


def test_saved_metadata_survives_nbdev_clean(tmp_path):
    "nbdev_clean (settings.ini) keeps the language_info and the cell digests `run` saves"
    from nbdev.clean import nbdev_clean
    path = tmp_path / 'tiny.ipynb'
    tiny_notebook(path)
    assert notebooks.main(['run', str(path)]) == 0
    before = path.read_text()
    cwd = os.getcwd()
    try: os.chdir(ROOT); nbdev_clean(fname=str(path))
    finally: os.chdir(cwd)
    assert path.read_text() == before and notebooks.problems(path) == []


def test_check_flags_what_a_reader_must_not_see(tmp_path):
    path = tmp_path / 'nb.ipynb'
    source = 'x = 1'
    nb = {'cells': [{'cell_type': 'code', 'id': 'a', 'execution_count': None, 'source': source,
                     'metadata': {notebooks.DIGEST_KEY: notebooks.digest(source)},
                     'outputs': [{'output_type': 'stream', 'name': 'stdout', 'text': 'np.float64(0.5) in /tmp/x'}]}],
          'metadata': {'kernelspec': notebooks.KERNELSPEC, 'language_info': {'name': 'python'}},
          'nbformat': 4, 'nbformat_minor': 5}
    path.write_text(json.dumps(nb))
    found = notebooks.problems(path)
    assert any('NumPy scalar' in f for f in found) and any('machine path' in f for f in found)


LOST_ESCAPE = re.compile(r'\n(rac\{|m\{|m |ightarrow|ext\{|abla|imes\b|heta\b|au\b)|[\t\x07\x08\x0b\x0c\r]')


@pytest.mark.parametrize('path', notebooks.notebooks(), ids=lambda p: p.name)
def test_no_latex_lost_to_string_escapes(path):
    r"`\frac` written from a non-raw Python string becomes a form feed (then a line break) and `rac`; `\rm`, `\tau` alike."
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb['cells']):
        if cell['cell_type'] != 'markdown': continue
        m = LOST_ESCAPE.search(''.join(cell['source']))
        assert m is None, f'cell {i}: {m.group(0)!r} looks like a LaTeX command lost to a string escape'
