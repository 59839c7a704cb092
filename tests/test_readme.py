"""README.md is generated from nbs/index.ipynb by `.ci/build_docs.py --readme` and must be up to date; what it says
is checked: the tour prints what it shows, the imports load Numba or not as its table says, and the test command
states its prerequisites, shows progress and says how long it takes."""
import json, re, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT/'README.md').read_text(encoding='utf-8')


def test_readme_up_to_date():
    r = subprocess.run([sys.executable, str(ROOT/'.ci'/'build_docs.py'), '--check-readme'],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f'{r.stdout}\n{r.stderr[-3000:]}'


def tour():
    "[(python code, the output the README shows after it or None)] of the tour, in order"
    part = README.split('## A short tour', 1)[1].split('\n## ', 1)[0]
    blocks = re.findall(r'```python\n(.*?)\n```\s*(?:~~~~ \{\.output\}\n(.*?)\n~~~~)?', part, re.S)
    return [(code, out if out else None) for code, out in blocks]


def test_the_tour_prints_what_the_readme_shows():
    "Each code block of the tour, run in order in one fresh process, prints exactly the output shown below it"
    blocks = tour()
    assert len(blocks) >= 4 and sum(out is not None for _, out in blocks) >= 3, blocks
    runner = ("import contextlib, io, json, sys\nns, outs = {}, []\n"
              "for code in json.loads(sys.stdin.read()):\n"
              "    buf = io.StringIO()\n"
              "    with contextlib.redirect_stdout(buf): exec(code, ns)\n"
              "    outs.append(buf.getvalue())\n"
              "print(json.dumps(outs))\n")
    r = subprocess.run([sys.executable, '-c', runner], input=json.dumps([c for c, _ in blocks]), capture_output=True,
                       text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    printed = json.loads(r.stdout.strip().splitlines()[-1])
    for (code, shown), got in zip(blocks, printed):
        assert got.rstrip('\n') == (shown or ''), f'the README shows\n{shown}\nafter\n{code}\nbut it prints\n{got}'


def import_rows():
    "[(import statement, loads Numba)] from the README's table of imports"
    rows = re.findall(r'^\| `([^`]+)`[^|]*\| (yes|no)\b[^|]*\|', README, re.M)
    assert len(rows) >= 4, rows
    return [(stmt, answer == 'yes') for stmt, answer in rows]


@pytest.mark.parametrize('statement, numba', import_rows(), ids=lambda v: v if isinstance(v, str) else '')
def test_which_imports_load_numba(statement, numba):
    code = f"import sys; {statement}; print('numba' in sys.modules)"
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(numba), f'{statement}: the README says Numba is {"" if numba else "not "}loaded'


def test_the_test_command_states_its_prerequisites_progress_and_time():
    command = re.search(r'^python3 -m venv .venv && .*nbdev_test.*pytest.*$', README, re.M)[0]
    assert '--do_print' in command and '-rs' in command  # a line per notebook; pytest lists the skips' reasons
    setup = README.split('## Set up', 1)[1].split('\n## ', 1)[0]
    assert 'apt-get install chromium npm' in setup and 'ISOCAL_NO_SKIP=1' in setup
    minutes = re.search(r'takes about (\d+) minutes on two cores', setup)
    assert minutes and int(minutes[1]) <= 30, 'the README says how long the test command takes'
