"""README.md is generated from nbs/index.ipynb by `.ci/build_docs.py --readme` and must be up to date."""
import subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_up_to_date():
    r = subprocess.run([sys.executable, str(ROOT/'.ci'/'build_docs.py'), '--check-readme'],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f'{r.stdout}\n{r.stderr[-3000:]}'
