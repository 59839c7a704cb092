"The notebooks are committed executed: their saved outputs must come from their current source (.ci/notebooks.py)."
import importlib.util, json, re, shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location('notebooks', ROOT / '.ci' / 'notebooks.py')
notebooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(notebooks)


@pytest.mark.parametrize('path', notebooks.notebooks(), ids=lambda p: p.name)
def test_saved_outputs_are_fresh(path):
    assert notebooks.problems(path) == []


def edit_first_code_cell(path):
    nb = json.loads(path.read_text())
    cell = next(c for c in nb['cells'] if c['cell_type'] == 'code' and 'export' not in ''.join(c['source']))
    cell['source'] = ''.join(cell['source']) + '\n1 + 1'
    path.write_text(json.dumps(nb, indent=1))


def test_check_fails_on_an_edited_cell_and_passes_after_regeneration(tmp_path):
    path = tmp_path / '00_core.ipynb'
    shutil.copy(ROOT / 'nbs' / '00_core.ipynb', path)
    assert notebooks.main(['check', str(path)]) == 0
    edit_first_code_cell(path)
    assert any('edited after' in p for p in notebooks.problems(path))
    assert notebooks.main(['check', str(path)]) == 1
    assert notebooks.main(['run', str(path)]) == 0
    assert notebooks.main(['check', str(path)]) == 0
    assert json.loads(path.read_text())['metadata']['kernelspec']['name'] == 'python3'


def test_check_flags_what_a_reader_must_not_see(tmp_path):
    path = tmp_path / 'nb.ipynb'
    source = 'x = 1'
    nb = {'cells': [{'cell_type': 'code', 'id': 'a', 'execution_count': None, 'source': source,
                     'metadata': {notebooks.DIGEST_KEY: notebooks.digest(source)},
                     'outputs': [{'output_type': 'stream', 'name': 'stdout', 'text': 'np.float64(0.5) in /tmp/x'}]}],
          'metadata': {'kernelspec': notebooks.KERNELSPEC}, 'nbformat': 4, 'nbformat_minor': 5}
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
