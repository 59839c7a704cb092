"The front door: `import isocal` is fast and exposes the main API; the README's tour runs when pasted verbatim."
import importlib, re, subprocess, sys
from pathlib import Path

import isocal

ROOT = Path(__file__).resolve().parent.parent


def test_every_top_level_name_is_its_modules_object():
    for name in isocal.__all__:
        home = importlib.import_module(f'isocal.{isocal._HOME[name]}')
        assert getattr(isocal, name) is getattr(home, name), name
    assert set(isocal.__all__) <= set(dir(isocal))


def test_unknown_name_is_an_attribute_error():
    try: isocal.no_such_name
    except AttributeError as e: assert 'no_such_name' in str(e)
    else: raise AssertionError('no AttributeError')


def test_import_isocal_loads_no_heavy_dependency():
    code = "import sys, isocal; print(sorted(m for m in ('numba', 'sklearn', 'matplotlib', 'scipy') if m in sys.modules))"
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == '[]'


def tour_code():
    readme = (ROOT / 'README.md').read_text()
    tour = readme.split('## A short tour', 1)[1].split('\n## ', 1)[0]
    return '\n'.join(re.findall(r'```python\n(.*?)```', tour, re.S))


def test_readme_tour_runs_verbatim_in_a_fresh_session():
    code = tour_code()
    assert 'from isocal import' in code
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=ROOT / 'tests')
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[0].startswith('[')     # the fitted staircase is printed first
