"""Tests of the `isocal` command line: in-process through `main` and, when installed, through the console script."""
import csv
import errno
import gc
import io
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, strategies as st
from sklearn.isotonic import IsotonicRegression

from isocal import __version__
from isocal.cli import main
from isocal.cli_calibrate import _IN_SAMPLE as IN_SAMPLE
from isocal.cli_demo import format_table, run_demo

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SCRIPT = Path(sys.executable).with_name("isocal")
IN_SAMPLE_LINE = f"isocal: warning: {IN_SAMPLE}\n"  # said once by a run that calibrates the scores it fits
needs_script = pytest.mark.skipif(not SCRIPT.exists() and shutil.which("isocal") is None,
                                  reason="the isocal console script is not installed (pip install -e .)")


def script():
    return str(SCRIPT) if SCRIPT.exists() else shutil.which("isocal")


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], np.array(rows[1:], dtype=float)


def set_everywhere(monkeypatch, name, value):
    """Set the module constant `name` in every part of the command line that holds it (the module that defines it and
    those that import it), as a setting of the whole command."""
    import importlib
    modules = [importlib.import_module(f"isocal.{m}") for m in ("cli_read", "cli_write", "cli_demo", "cli_calibrate",
                                                                "cli_warmup", "cli")]
    holders = [m for m in modules if hasattr(m, name)]
    assert holders, name
    for m in holders:
        monkeypatch.setattr(m, name, value)


@pytest.fixture
def scores_csv(tmp_path):
    rng = np.random.default_rng(3)
    s = rng.normal(size=200)
    y = (rng.uniform(size=200) < 1 / (1 + np.exp(-2 * s))).astype(int)
    path = write_csv(tmp_path / "scores.csv", ["id", "label", "score"],
                     [(f"row{i}", yi, repr(float(si))) for i, (yi, si) in enumerate(zip(y, s))])
    return path, s, y


# ---------------------------------------------------------------- demo

@pytest.fixture(scope="module")
def demo_rows(tmp_path_factory):
    png = tmp_path_factory.mktemp("demo") / "reliability.png"
    return run_demo(out=png), png


def test_demo_writes_a_png(demo_rows):
    _, png = demo_rows
    assert png.stat().st_size > 1000 and png.read_bytes()[:8] == PNG_SIGNATURE


def test_demo_isotonic_is_better_calibrated_on_the_test_split(demo_rows):
    rows, _ = demo_rows
    raw, iso, ivap, cvap = rows
    assert [row["name"] for row in rows] == ["uncalibrated", "isotonic", "IVAP", "CVAP"]
    assert all(np.isfinite(row[k]) for row in rows for k in ("log_loss_bits", "brier", "ece"))
    assert np.isnan(raw["width"]) and np.isnan(iso["width"])
    for row in (iso, ivap, cvap):  # issue 15: no calibrated method is worse than the raw model in any column
        assert all(row[k] < raw[k] for k in ("log_loss_bits", "brier", "ece")), row
    for va in (ivap, cvap):
        assert 0 < va["width"] < 0.05


def test_demo_has_a_test_split_large_enough_to_say_something():
    from isocal.cli_demo import demo_probabilities
    y_test, probs, _ = demo_probabilities(0)
    assert len(y_test) >= 5000 and 0.3 < y_test.mean() < 0.7  # issue 15: not 171 rows
    assert all(len(p) == len(y_test) for p in probs.values())


def test_demo_ivap_matches_the_venn_abers_package():
    import venn_abers
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB
    from isocal.cli_demo import demo_probabilities

    X, y = make_classification(n_samples=20_000, n_features=20, n_informative=2, n_redundant=10, random_state=0)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, train_size=0.4, stratify=y, random_state=0)
    X_cal, X_test, y_cal, y_test = train_test_split(X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=0)
    model = GaussianNB().fit(X_train, y_train)
    log_odds = lambda X: model.predict_joint_log_proba(X)[:, 1] - model.predict_joint_log_proba(X)[:, 0]
    s_cal, s_test = log_odds(X_cal), log_odds(X_test)
    _, p01 = venn_abers.VennAbers().fit(np.c_[-s_cal, s_cal], y_cal).predict_proba(np.c_[-s_test, s_test])
    y_demo, probs, widths = demo_probabilities(0)
    np.testing.assert_array_equal(y_demo, y_test)
    np.testing.assert_allclose(probs["IVAP"], p01[:, 1] / (1 - p01[:, 0] + p01[:, 1]), rtol=1e-12)
    np.testing.assert_allclose(widths["IVAP"], np.mean(p01[:, 1] - p01[:, 0]), rtol=1e-12)
    for name in ("IVAP", "CVAP"):
        assert np.all((probs[name] > 0) & (probs[name] < 1))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_demo_calibration_helps_for_other_seeds(seed):
    raw, *calibrated = run_demo(out=None, seed=seed)
    for row in calibrated:
        assert all(row[k] < raw[k] for k in ("log_loss_bits", "brier", "ece")), row


def test_demo_is_deterministic(demo_rows):
    again = run_demo(out=None)
    assert [{k: v for k, v in r.items() if k != "width"} for r in again] == \
        [{k: v for k, v in r.items() if k != "width"} for r in demo_rows[0]]
    np.testing.assert_array_equal([r["width"] for r in again], [r["width"] for r in demo_rows[0]])


def test_demo_command_prints_an_aligned_table(tmp_path, capsys):
    from isocal.cli_demo import demo_description
    png = tmp_path / "r.png"
    assert main(["demo", "--out", str(png), "--seed", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == demo_description(0) and "tested on 6000" in out[0]
    header, raw, iso, ivap, cvap = out[1:6]
    assert header.split()[:4] == ["model", "log", "loss", "[bits]"] and header.endswith("ECE    p1-p0")
    assert raw.startswith("uncalibrated") and iso.startswith("isotonic")
    assert ivap.startswith("IVAP") and cvap.startswith("CVAP")
    assert raw.endswith("-") and iso.endswith("-") and float(ivap.split()[-1]) > 0
    assert len(header) == len(raw) == len(iso) == len(ivap) == len(cvap)
    assert out[-1] == f"reliability diagram: {png}" and png.stat().st_size > 0
    assert format_table(run_demo(out=None)) == "\n".join(out[1:6])


def test_demo_figure_has_a_panel_with_bands_per_model(tmp_path, monkeypatch):
    """Issue 15: one panel per model, each with its title (name and metrics), axis labels, a shaded Wilson band
    (the library's `reliability_band`) and a histogram; a figure title and one legend that names every element."""
    from matplotlib.figure import Figure
    from isocal.cli_demo import demo_probabilities, save_reliability_figure
    from isocal.metrics import reliability_band
    drawn = {}
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: drawn.setdefault("fig", self))
    y, probs, _ = demo_probabilities(0)
    save_reliability_figure(y, probs, tmp_path / "r.png", title="the title")
    fig = drawn["fig"]
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split(":")[0] for ax in panels] == list(probs)
    assert all("ECE" in ax.get_title() and "Brier" in ax.get_title() for ax in panels)
    assert all(ax.get_xlim() == (0, 1) and ax.get_ylim() == (0, 1) for ax in panels)
    assert {ax.get_xlabel() for ax in panels if ax.get_xlabel()} == {"predicted probability of label 1 (bin mean)"}
    assert {ax.get_ylabel() for ax in panels if ax.get_ylabel()} == {"observed frequency of label 1"}
    for ax, (name, p) in zip(panels, probs.items()):
        (band,) = ax.collections
        _, _, lo, hi = reliability_band(y, p, level=0.95)
        edges = band.get_paths()[0].vertices[:, 1]  # the band's outline: its lower and its upper edge
        assert set(edges) == set(lo) | set(hi)
        assert len(ax.child_axes) == 1 and ax.child_axes[0].patches  # the histogram
    assert fig.get_suptitle() == "the title"
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "perfectly calibrated", "95% Wilson interval of the frequency",
        "observed frequency in each of 10 equal-width bins", "histogram of predictions (log scale)"]


def test_demo_reports_an_unwritable_png(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "missing_dir" / "r.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("isocal: error: cannot write") and err.count("\n") == 1


# ---------------------------------------------------------------- calibrate

def test_calibrate_round_trips_a_csv(tmp_path, scores_csv):
    path, s, y = scores_csv
    out = tmp_path / "calibrated.csv"
    assert main(["calibrate", str(path), "--out", str(out)]) == 0
    header, table = read_csv(out)
    assert header == ["score", "probability"]
    np.testing.assert_array_equal(table[:, 0], s)  # same scores, same order, bit for bit
    expected = IsotonicRegression(out_of_bounds="clip").fit(s, y).predict(s)
    np.testing.assert_allclose(table[:, 1], expected, rtol=1e-12, atol=1e-15)
    assert np.all(np.diff(table[np.argsort(s), 1]) >= 0)


def test_calibrate_apply_uses_the_fitted_map_and_clips_outside_it(tmp_path, scores_csv):
    path, s, y = scores_csv
    new = write_csv(tmp_path / "new.csv", ["score"], [[-100], [0.25], [100]])
    out = tmp_path / "out.csv"
    assert main(["calibrate", str(path), "--apply", str(new), "--out", str(out), "--method", "isotonic"]) == 0
    _, table = read_csv(out)
    expected = IsotonicRegression(out_of_bounds="clip").fit(s, y).predict([-100, 0.25, 100])
    np.testing.assert_array_equal(table[:, 0], [-100, 0.25, 100])
    np.testing.assert_allclose(table[:, 1], expected, rtol=1e-12, atol=1e-15)


def test_calibrate_default_output_name(tmp_path, scores_csv, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", str(scores_csv[0])]) == 0
    assert (tmp_path / "calibrated.csv").exists()
    assert capsys.readouterr().out.strip() == "wrote 200 calibrated probabilities to calibrated.csv"


def venn_abers_package_interval(s, y, t):
    import venn_abers
    _, p01 = venn_abers.VennAbers().fit(np.c_[-s, s], y).predict_proba(np.c_[-t, t])
    return p01[:, 0], p01[:, 1]


def test_calibrate_ivap_matches_the_venn_abers_package(tmp_path, scores_csv):
    path, s, y = scores_csv
    new = write_csv(tmp_path / "new.csv", ["score"], [[-100], [0.25], [float(s[3])], [100]])
    out = tmp_path / "out.csv"
    assert main(["calibrate", str(path), "--method", "ivap", "--apply", str(new), "--out", str(out)]) == 0
    header, table = read_csv(out)
    assert header == ["score", "probability", "p0", "p1"]
    p0, p1 = venn_abers_package_interval(s, y, table[:, 0])
    np.testing.assert_allclose(table[:, 2], p0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(table[:, 3], p1, rtol=0, atol=1e-15)
    np.testing.assert_allclose(table[:, 1], p1 / (1 - p0 + p1), rtol=1e-15)


def test_calibrate_cvap_merges_fold_ivaps(tmp_path, scores_csv):
    from isocal.venn_abers import fold_ids
    path, s, y = scores_csv
    out = tmp_path / "out.csv"
    assert main(["calibrate", str(path), "--method", "cvap", "--n-splits", "4", "--seed", "3", "--out", str(out)]) == 0
    _, table = read_csv(out)
    folds = fold_ids(len(s), 4, random_state=3)
    per_fold = [venn_abers_package_interval(s[folds == j], y[folds == j], s) for j in range(4)]
    gm0 = np.prod([1 - q0 for q0, _ in per_fold], axis=0) ** 0.25
    gm1 = np.prod([q1 for _, q1 in per_fold], axis=0) ** 0.25
    np.testing.assert_allclose(table[:, 1], gm1 / (gm0 + gm1), rtol=1e-12)
    assert np.all((table[:, 1] > 0) & (table[:, 1] < 1))
    assert np.all((table[:, 2] <= table[:, 1]) & (table[:, 1] <= table[:, 3]))  # the interval: see below


@pytest.mark.parametrize("n_splits", ["500"])
def test_calibrate_cvap_bad_n_splits(tmp_path, scores_csv, capsys, n_splits):
    assert main(["calibrate", str(scores_csv[0]), "--method", "cvap", "--n-splits", n_splits,
                 "--out", str(tmp_path / "o.csv")]) == 2
    assert capsys.readouterr().err == (f"isocal: error: --n-splits must be between 2 and the number of rows (200), "
                                       f"got {n_splits}\n")


BAD_CSVS = [
    ("missing", None, "cannot read {path}: No such file or directory"),
    ("empty", "", "{path}: missing column(s) 'score', 'label'; the header has nothing"),
    ("no_label", "score,y\n0.1,0\n", "{path}: missing column(s) 'label'; the header has 'score', 'y'"),
    ("header_only", "score,label\n", "{path} has no data rows"),
    ("text", "score,label\n0.1,0\n0.2,1\nabc,1\n", "{path}, line 4: column 'score' has non-numeric value 'abc'"),
    ("empty_cell", "score,label\n0.1,\n", "{path}, line 2: column 'label' has non-numeric value ''"),
    ("nan", "score,label\n0.1,0\nnan,1\n", "{path}, line 3: column 'score' has non-finite value 'nan'"),
    ("label_2", "score,label\n0.1,0\n\n0.2,2\n", "{path}, line 4: column 'label' must be 0 or 1, got 2"),
    ("label_half", "score,label\n0.1,0.5\n", "{path}, line 2: column 'label' must be 0 or 1, got 0.5"),
    ("short_row", "score,label\n0.1,0\n0.2\n", "{path}, line 3: expected 2 fields as in the header, found 1"),
    # issue 16: pyarrow reads the file; the same messages, and Python's lenient float() syntax refused
    ("long_row", "score,label\n0.1,0,7\n", "{path}, line 2: expected 2 fields as in the header, found 3"),
    ("underscore", "score,label\n0.1,0\n1_000,1\n", "{path}, line 3: column 'score' has non-numeric value '1_000'"),
    ("full_width", "score,label\n\uff10.\uff15,0\n", "{path}, line 2: column 'score' has non-numeric value '\uff10.\uff15'"),
    ("hexadecimal", "score,label\n0x10,0\n", "{path}, line 2: column 'score' has non-numeric value '0x10'"),
    ("inf", "score,label\n0.1,0\n-Infinity,1\n", "{path}, line 3: column 'score' has non-finite value '-Infinity'"),
    ("overflow", "score,label\n1e999,0\n", "{path}, line 2: column 'score' has non-finite value '1e999'"),
    ("label_text", "score,label\n0.1,true\n", "{path}, line 2: column 'label' has non-numeric value 'true'"),
    ("label_negative", "score,label\n0.1,0\n0.2,-1\n", "{path}, line 3: column 'label' must be 0 or 1, got -1"),
    ("quoted_newline", 'id,score,label\n"a\nb",0.1,0\nc,x,1\n', "{path}, line 4: column 'score' has non-numeric value 'x'"),
    ("label_after_quoted_newline", 'id,score,label\n"a\nb",0.1,0\n\nc,0.2,3\n',
     "{path}, line 5: column 'label' must be 0 or 1, got 3"),
]


def make_bad_csv(tmp_path, name, content):
    path = tmp_path / f"{name}.csv"
    if content is not None:
        path.write_text(content)
    return path


@pytest.mark.parametrize("name, content, message", BAD_CSVS, ids=[case[0] for case in BAD_CSVS])
def test_bad_csv_exits_2_with_a_one_line_message(tmp_path, capsys, name, content, message):
    path = make_bad_csv(tmp_path, name, content)
    assert main(["calibrate", str(path), "--out", str(tmp_path / "out.csv")]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"isocal: error: {message.format(path=path)}\n"
    assert captured.out == "" and not (tmp_path / "out.csv").exists()


def test_bad_apply_file_is_named(tmp_path, scores_csv, capsys):
    new = write_csv(tmp_path / "new.csv", ["value"], [[1.0]])
    assert main(["calibrate", str(scores_csv[0]), "--apply", str(new), "--out", str(tmp_path / "o.csv")]) == 2
    assert capsys.readouterr().err == f"isocal: error: {new}: missing column(s) 'score'; the header has 'value'\n"


def test_unwritable_output(tmp_path, scores_csv, capsys):
    assert main(["calibrate", str(scores_csv[0]), "--out", str(tmp_path / "no" / "out.csv")]) == 2
    assert capsys.readouterr().err.startswith(f"isocal: error: cannot write --out {tmp_path / 'no' / 'out.csv'}")


# ---------------------------------------------------------------- argument parsing

def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"isocal {__version__}\n"


@pytest.mark.parametrize("argv", [["frobnicate"], ["calibrate"], ["calibrate", "x.csv", "--method", "platt"],
                                  ["demo", "--seed", "one"]])
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == 2
    assert "usage: isocal" in capsys.readouterr().err


def test_help_exits_0(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "demo" in out and "calibrate" in out


# ---------------------------------------------------------------- the installed console script

def run_script(*args, cwd):
    return subprocess.run([script(), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@needs_script
def test_script_version(tmp_path):
    result = run_script("--version", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == f"isocal {__version__}\n"


@needs_script
def test_script_demo(tmp_path):
    result = run_script("demo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("model") and "isotonic" in result.stdout
    assert result.stdout.splitlines()[-1] == "reliability diagram: reliability.png"
    assert (tmp_path / "reliability.png").read_bytes()[:8] == PNG_SIGNATURE


@needs_script
def test_script_calibrate_round_trip(tmp_path, scores_csv):
    path, s, _ = scores_csv
    result = run_script("calibrate", str(path), "--out", "cal.csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    _, table = read_csv(tmp_path / "cal.csv")
    np.testing.assert_array_equal(table[:, 0], s)


@needs_script
@pytest.mark.parametrize("name, content, message", [BAD_CSVS[0], BAD_CSVS[4], BAD_CSVS[7]],
                         ids=["missing", "text", "label_2"])
def test_script_bad_csv(tmp_path, name, content, message):
    path = make_bad_csv(tmp_path, name, content)
    result = run_script("calibrate", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"isocal: error: {message.format(path=path)}\n"


CONSOLE_CODE = ("import gc, sys; from isocal.cli import console_main; status = console_main(); "
                "print('frozen', gc.get_freeze_count() > 0, file=sys.stderr); sys.exit(status)")


def test_console_main_freezes_the_collector_after_main_only(tmp_path, scores_csv):
    """The console script's `console_main` gives `main`'s status and bytes, and freezes the collector afterwards, in
    its own process; `main` called from Python leaves the collector alone."""
    path, _, _ = scores_csv
    run = lambda *args: subprocess.run([sys.executable, "-c", CONSOLE_CODE, *args], cwd=tmp_path, capture_output=True,
                                       text=True, timeout=120)
    fitted = run("calibrate", str(path), "--method", "ivap", "--out", "script.csv")
    assert fitted.returncode == 0 and fitted.stderr == IN_SAMPLE_LINE + "frozen True\n"
    refused = run("calibrate", "missing.csv")
    assert refused.returncode == 2 and refused.stderr.startswith("isocal: error: ")
    frozen = gc.get_freeze_count()
    assert main(["calibrate", str(path), "--method", "ivap", "--out", str(tmp_path / "main.csv")]) == 0
    assert gc.get_freeze_count() == frozen
    assert (tmp_path / "script.csv").read_bytes() == (tmp_path / "main.csv").read_bytes()


# ---------------------------------------------------------------- the output never destroys a file (issue 12, 3)

def snapshot(directory):
    "Every file under `directory` with its bytes: shows both lost content and left-over temporary files."
    return {p.relative_to(directory): p.read_bytes() for p in sorted(Path(directory).rglob("*")) if p.is_file()}


def same_file_cases(tmp_path, path):
    "Other spellings of `path`: itself, with `..`, relative, through a symlink, and a hard link."
    (tmp_path / "sub").mkdir(exist_ok=True)
    (tmp_path / "link.csv").symlink_to(path)
    os.link(path, tmp_path / "hard.csv")
    return {"same": path, "dotdot": tmp_path / "sub" / ".." / path.name, "symlink": tmp_path / "link.csv",
            "hardlink": tmp_path / "hard.csv"}


@pytest.mark.parametrize("spelling", ["same", "dotdot", "relative", "symlink", "hardlink"])
def test_calibrate_refuses_to_overwrite_the_scores_file(tmp_path, scores_csv, capsys, monkeypatch, spelling):
    path = scores_csv[0]
    cases = same_file_cases(tmp_path, path)
    monkeypatch.chdir(tmp_path)
    out = cases.get(spelling, Path(path.name))
    before = snapshot(tmp_path)
    assert main(["calibrate", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("isocal: error: --out") and "same file as the input SCORES" in err and err.count("\n") == 1
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("spelling", ["same", "dotdot", "symlink", "hardlink"])
def test_calibrate_refuses_to_overwrite_the_apply_file(tmp_path, scores_csv, capsys, spelling):
    new = write_csv(tmp_path / "new.csv", ["score"], [[0.5], [1.5]])
    out = same_file_cases(tmp_path, new)[spelling]
    before = snapshot(tmp_path)
    assert main(["calibrate", str(scores_csv[0]), "--apply", str(new), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("isocal: error: --out") and "same file as the input --apply" in err
    assert snapshot(tmp_path) == before


def test_calibrate_write_failure_keeps_the_previous_output(tmp_path, scores_csv, capsys, monkeypatch):
    out = tmp_path / "out.csv"
    out.write_text("previous,results\n1,2\n")
    before = snapshot(tmp_path)
    import pyarrow.csv

    def fails_midway(table, file, options=None, **kwargs):  # (formats a piece of the rows, on a thread)
        file.write(b"0.5,0.25\n0.")
        file.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pyarrow.csv, "write_csv", fails_midway)
    assert main(["calibrate", str(scores_csv[0]), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"isocal: error: cannot write --out {out}: No space left on device\n"
    assert snapshot(tmp_path) == before  # old content intact, no temporary file left


def test_calibrate_file_size_limit_keeps_the_previous_output(tmp_path, scores_csv):
    out = tmp_path / "out.csv"
    out.write_text("previous,results\n1,2\n")
    before = snapshot(tmp_path)
    code = ("import resource, sys; from isocal.cli import main; from isocal.isotonic import IsotonicCalibrator; "
            "IsotonicCalibrator(out_of_bounds='clip').fit([0., 1.], [0., 1.]).predict([0.5]); "  # compile first
            "resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000)); sys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, "calibrate", str(scores_csv[0]), "--out", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"isocal: error: cannot write --out {out}: File too large\n"
    assert snapshot(tmp_path) == before


def test_calibrate_replaces_the_output_keeping_its_permissions(tmp_path, scores_csv):
    out = tmp_path / "out.csv"
    out.write_text("old\n")
    os.chmod(out, 0o640)
    assert main(["calibrate", str(scores_csv[0]), "--out", str(out)]) == 0
    assert (out.stat().st_mode & 0o777) == 0o640 and read_csv(out)[0] == ["score", "probability"]
    fresh = tmp_path / "fresh.csv"
    umask = os.umask(0o022)
    try:
        assert main(["calibrate", str(scores_csv[0]), "--out", str(fresh)]) == 0
    finally:
        os.umask(umask)
    assert (fresh.stat().st_mode & 0o777) == 0o644  # as `open(..., "w")` would create it, not mkstemp's 0o600


def test_calibrate_writes_through_a_symlinked_output(tmp_path, scores_csv):
    target = tmp_path / "target.csv"
    target.write_text("old\n")
    (tmp_path / "link.csv").symlink_to(target)
    assert main(["calibrate", str(scores_csv[0]), "--out", str(tmp_path / "link.csv")]) == 0
    assert (tmp_path / "link.csv").is_symlink() and read_csv(target)[0] == ["score", "probability"]


def test_demo_write_failure_keeps_the_previous_figure(tmp_path, capsys, monkeypatch):
    from matplotlib.figure import Figure
    png = tmp_path / "r.png"
    png.write_bytes(b"previous figure")
    before = snapshot(tmp_path)

    def failing_savefig(self, fname, **kwargs):
        if hasattr(fname, "write"):
            fname.write(PNG_SIGNATURE)
        else:
            with open(fname, "wb") as f:
                f.write(PNG_SIGNATURE)
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    monkeypatch.setattr(Figure, "savefig", failing_savefig)
    assert main(["demo", "--out", str(png)]) == 2
    assert capsys.readouterr().err == f"isocal: error: cannot write --out {png}: File too large\n"
    assert snapshot(tmp_path) == before


def refuse_to_run(*args, **kwargs):
    raise AssertionError("the output should have been checked before reading the input")


@pytest.mark.parametrize("where", ["missing_dir", "parent_is_a_file", "is_a_directory", "empty"])
def test_calibrate_checks_the_output_before_reading(tmp_path, scores_csv, capsys, monkeypatch, where):
    (tmp_path / "file").write_text("x")
    (tmp_path / "adir").mkdir()
    out = {"missing_dir": tmp_path / "no" / "out.csv", "parent_is_a_file": tmp_path / "file" / "out.csv",
           "is_a_directory": tmp_path / "adir", "empty": ""}[where]
    before = snapshot(tmp_path)
    monkeypatch.setattr("isocal.cli_calibrate.read_columns", refuse_to_run)
    assert main(["calibrate", str(scores_csv[0]), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("isocal: error: ") and "--out" in err and err.count("\n") == 1
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("where", ["missing_dir", "is_a_directory"])
def test_demo_checks_the_output_before_computing(tmp_path, capsys, monkeypatch, where):
    (tmp_path / "adir.png").mkdir()
    out = {"missing_dir": tmp_path / "no" / "r.png", "is_a_directory": tmp_path / "adir.png"}[where]
    monkeypatch.setattr("isocal.cli_demo.demo_probabilities", refuse_to_run)
    assert main(["demo", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"isocal: error: cannot write --out {out}") and err.count("\n") == 1


def test_demo_refuses_an_unknown_figure_format_up_front(tmp_path, capsys, monkeypatch):
    from matplotlib.figure import Figure
    monkeypatch.setattr("isocal.cli_demo.demo_probabilities", refuse_to_run)
    assert main(["demo", "--out", str(tmp_path / "r.xyz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"isocal: error: --out {tmp_path / 'r.xyz'}: unsupported figure format 'xyz'")
    assert err.count("\n") == 1
    supported = Figure().canvas.get_supported_filetypes()
    assert all(f".{ext}" in err for ext in supported if ext != "pgf")
    assert list(tmp_path.iterdir()) == []


SIGNATURES = {"png": PNG_SIGNATURE, "pdf": b"%PDF", "svg": b"<?xml"}


@pytest.mark.parametrize("name, written", [("rnoext", "rnoext.png"), ("r.PDF", "r.PDF"), ("r.svg", "r.svg"),
                                           ("dir.v2/fig", "dir.v2/fig.png")])
def test_demo_reports_the_file_it_wrote(tmp_path, capsys, name, written):
    (tmp_path / "dir.v2").mkdir()
    assert main(["demo", "--out", str(tmp_path / name)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"reliability diagram: {tmp_path / written}"
    fmt = Path(written).suffix[1:].lower()
    assert (tmp_path / written).read_bytes().startswith(SIGNATURES[fmt])
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [Path(written).name]


# ---------------------------------------------------------------- a single class (issue 12, 3)

def single_class_csv(tmp_path, label):
    return write_csv(tmp_path / f"only{label}.csv", ["score", "label"], [[s, label] for s in (-1.0, 0.0, 2.5)])


@pytest.mark.parametrize("label", [0, 1])
def test_isotonic_warns_on_a_single_class(tmp_path, capsys, label):
    path = single_class_csv(tmp_path, label)
    out = tmp_path / "out.csv"
    assert main(["calibrate", str(path), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == (f"isocal: warning: {path} has only label {label}: "
                            f"every calibrated probability is {label}\n") + IN_SAMPLE_LINE
    np.testing.assert_array_equal(read_csv(out)[1][:, 1], label)


@pytest.mark.parametrize("method", ["ivap", "cvap"])
@pytest.mark.parametrize("label", [0, 1])
def test_venn_abers_refuses_a_single_class(tmp_path, capsys, method, label):
    path = single_class_csv(tmp_path, label)
    extra = ["--n-splits", "2"] if method == "cvap" else []
    assert main(["calibrate", str(path), "--method", method, *extra, "--out", str(tmp_path / "out.csv")]) == 2
    assert capsys.readouterr().err == (f"isocal: error: --method {method} needs both labels 0 and 1, but {path} "
                                       f"has only label {label}\n")
    assert not (tmp_path / "out.csv").exists()


def test_cvap_refuses_a_fold_with_a_single_class(tmp_path, capsys):
    path = write_csv(tmp_path / "rare.csv", ["score", "label"], [[i / 10, int(i == 5)] for i in range(10)])
    assert main(["calibrate", str(path), "--method", "cvap", "--n-splits", "2", "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("isocal: error: --method cvap: fold ") and "has only label 0" in err
    assert "--n-splits" in err and err.count("\n") == 1


def test_calibrate_help_explains_a_single_class(capsys):
    assert main(["calibrate", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "only one label" in out and "warning" in out and "refuse" in out


# ---------------------------------------------------------------- argument values (issue 12, 3)

@pytest.mark.parametrize("argv, message", [
    (["demo", "--seed", "-1"], "argument --seed: must be an integer from 0 to 4294967295, got '-1'"),
    (["demo", "--seed", "4294967296"], "argument --seed: must be an integer from 0 to 4294967295, got '4294967296'"),
    (["calibrate", "s.csv", "--method", "cvap", "--seed", "-1"],
     "argument --seed: must be an integer from 0 to 4294967295, got '-1'"),
    (["calibrate", "s.csv", "--method", "cvap", "--n-splits", "1"],
     "argument --n-splits: must be an integer of at least 2, got '1'"),
    (["calibrate", "s.csv", "--method", "cvap", "--n-splits", "-3"],
     "argument --n-splits: must be an integer of at least 2, got '-3'"),
    (["calibrate", "s.csv", "--method", "cvap", "--n-splits", "2.5"],
     "argument --n-splits: must be an integer of at least 2, got '2.5'"),
    (["calibrate", "s.csv", "--method", "ivap", "--n-splits", "3"],
     "--n-splits applies only to --method cvap, not --method ivap"),
    (["calibrate", "s.csv", "--n-splits", "3"], "--n-splits applies only to --method cvap, not --method isotonic"),
    (["calibrate", "s.csv", "--method", "ivap", "--seed", "3"], "--seed applies only to --method cvap, not --method ivap"),
    (["calibrate", "s.csv", "--seed", "0"], "--seed applies only to --method cvap, not --method isotonic"),
])
def test_bad_argument_values_are_usage_errors(capsys, monkeypatch, argv, message):
    monkeypatch.setattr("isocal.cli_calibrate.read_columns", refuse_to_run)
    monkeypatch.setattr("isocal.cli_demo.demo_probabilities", refuse_to_run)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage: isocal" in err and err.endswith(f"error: {message}\n")


def test_duplicate_column_is_refused(tmp_path, capsys):
    path = tmp_path / "dup.csv"
    path.write_text("score,label,score\n0.1,0,5\n0.2,1,6\n")
    assert main(["calibrate", str(path), "--out", str(tmp_path / "o.csv")]) == 2
    assert capsys.readouterr().err == f"isocal: error: {path}: column 'score' appears 2 times in the header\n"


# ---------------------------------------------------------------- CVAP: one definition, p0 <= p <= p1 (issue 12, 1)

@pytest.mark.parametrize("n_splits", [4, 9, 20])  # the CLI lays the fold intervals out by row, the library by column
def test_calibrate_cvap_uses_the_library_interval(tmp_path, scores_csv, n_splits):
    from isocal.venn_abers import CrossVennAbers, fold_ids
    path, s, y = scores_csv
    out = tmp_path / "out.csv"
    assert main(["calibrate", str(path), "--method", "cvap", "--n-splits", str(n_splits), "--seed", "3",
                 "--out", str(out)]) == 0
    header, table = read_csv(out)
    assert header == ["score", "probability", "p0", "p1"]
    cvap = CrossVennAbers().fit(s, y, fold_ids(len(s), n_splits, random_state=3))
    columns = np.repeat(s[:, None], n_splits, axis=1)
    p0, p1 = cvap.predict_interval(columns)
    np.testing.assert_array_equal(table[:, 2], p0)
    np.testing.assert_array_equal(table[:, 3], p1)
    np.testing.assert_array_equal(table[:, 1], cvap.predict_proba(columns))
    assert np.all((table[:, 2] <= table[:, 1]) & (table[:, 1] <= table[:, 3]))



@st.composite
def labelled_scores(draw):
    n = draw(st.integers(4, 40))
    tenths = st.integers(-20, 20).map(lambda k: k / 10)  # ties between folds are where merged intervals invert
    scores = draw(st.lists(tenths | st.floats(-50, 50, allow_nan=False), min_size=n, max_size=n))
    labels = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n).filter(lambda l: 0 < sum(l) < len(l)))
    return np.array(scores), np.array(labels)


INVERTED_BY_GEOMETRIC_MEANS = (  # the per-fold geometric means gave p0 0.5436 > p 0.5420 > p1 0.5401 at score -0.3
    np.array([-0.4, -1.6, 0.0, -0.3, -1.4, 1.4, 1.6, -0.6, 0.5, -0.1, 0.2, 1.5, -0.3, 1.8, -0.3, -0.1, 1.9]),
    np.array([0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 0]))


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")  # the reference package, on tiny folds
@example(data=INVERTED_BY_GEOMETRIC_MEANS, n_splits=2, seed=80, extra=[])
@given(data=labelled_scores(), n_splits=st.integers(2, 4), seed=st.integers(0, 2**32 - 1),
       extra=st.lists(st.floats(-60, 60, allow_nan=False), max_size=5))
def test_cvap_rows_satisfy_p0_le_p_le_p1(tmp_path_factory, data, n_splits, seed, extra):
    from isocal.venn_abers import fold_ids
    s, y = data
    folds = fold_ids(len(s), n_splits, random_state=seed)
    if any(len(set(y[folds == j])) < 2 for j in range(n_splits)):
        return  # refused with a message, tested above
    tmp = tmp_path_factory.mktemp("cvap")
    path = write_csv(tmp / "s.csv", ["score", "label"], [(repr(float(a)), int(b)) for a, b in zip(s, y)])
    new = write_csv(tmp / "new.csv", ["score"], [[repr(float(v))] for v in [*s, *extra]])
    out = tmp / "out.csv"
    assert main(["calibrate", str(path), "--method", "cvap", "--n-splits", str(n_splits), "--seed", str(seed),
                 "--apply", str(new), "--out", str(out)]) == 0
    _, table = read_csv(out)
    p, p0, p1 = table[:, 1], table[:, 2], table[:, 3]
    assert np.all((0 <= p0) & (p0 <= p) & (p <= p1) & (p1 <= 1)), table[~((p0 <= p) & (p <= p1))]
    # the probability is the log-minimax merge of the fold IVAPs, computed independently by the venn-abers package
    t = table[:, 0]
    per_fold = [venn_abers_package_interval(s[folds == j], y[folds == j], t) for j in range(n_splits)]
    gm0 = np.exp(np.mean([np.log1p(-q0) for q0, _ in per_fold], axis=0))
    gm1 = np.exp(np.mean([np.log(q1) for _, q1 in per_fold], axis=0))
    np.testing.assert_allclose(p, gm1 / (gm0 + gm1), rtol=1e-12)


def test_demo_cvap_width_is_the_library_interval(monkeypatch):
    from isocal.cli_demo import demo_probabilities
    from isocal.venn_abers import CrossVennAbers
    captured = {}
    original = CrossVennAbers.predict_interval

    def spy(self, scores):
        p0, p1 = original(self, scores)
        assert p0.shape == p1.shape == (len(scores),)
        captured["width"] = float(np.mean(p1 - p0))
        return p0, p1

    monkeypatch.setattr(CrossVennAbers, "predict_interval", spy)
    _, probs, widths = demo_probabilities(0)
    assert widths["CVAP"] == captured["width"]


@pytest.mark.parametrize("columns", [{"a": np.arange(3.0), "b": np.arange(2.0)},  # zip cut the longer column
                                     {"a": np.ones((2, 2)), "b": np.ones((2, 2))},   # rows of lists were written
                                     {"a": np.float64(1.0)}])
def test_write_columns_refuses_columns_it_cannot_write_whole(tmp_path, columns):
    from isocal.cli_write import write_columns
    with pytest.raises(ValueError, match="`columns` must be 1-D arrays of one length"):
        write_columns(tmp_path / "o.csv", columns)
    assert list(tmp_path.iterdir()) == []


def test_special_output_files_are_written_not_replaced(scores_csv):
    assert main(["calibrate", str(scores_csv[0]), "--out", os.devnull]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)  # still the device, not a regular file put in its place


class Interrupted(Exception):
    pass


@given(fail_at=st.integers(0, 80), error=st.sampled_from(["OSError", "KeyboardInterrupt", "Interrupted"]),
       old=st.binary(max_size=300))
def test_replace_file_is_all_or_nothing(tmp_path_factory, fail_at, error, old):
    from isocal.cli_read import InputError
    from isocal.cli_write import replace_file
    directory = tmp_path_factory.mktemp("replace")
    target = directory / "out.bin"
    target.write_bytes(old)
    rows = [f"row {i}\n".encode() for i in range(60)]
    exception = {"OSError": OSError(errno.ENOSPC, "No space left on device"), "KeyboardInterrupt": KeyboardInterrupt(),
                 "Interrupted": Interrupted()}[error]

    def write(file):
        for i, row in enumerate(rows):
            if i == fail_at:
                raise exception
            file.write(row)

    if fail_at < len(rows):
        with pytest.raises(InputError if error == "OSError" else type(exception)):
            replace_file(target, write, text=False)
        assert target.read_bytes() == old
    else:
        replace_file(target, write, text=False)
        assert target.read_bytes() == b"".join(rows)
    assert [p.name for p in directory.iterdir()] == ["out.bin"]


def python_int_or_none(text):
    try:
        return int(text)
    except ValueError:
        return None


@given(text=st.text(max_size=12) | st.integers(-2**40, 2**40).map(str))
def test_any_seed_text_is_accepted_or_a_usage_error(tmp_path_factory, text):
    value = python_int_or_none(text)
    out = str(tmp_path_factory.getbasetemp() / "unused.png")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("isocal.cli_demo.demo_probabilities", lambda seed: (_ for _ in ()).throw(Interrupted(seed)))
        patch.setattr("sys.stderr", io.StringIO())
        if value is not None and 0 <= value <= 2**32 - 1:
            with pytest.raises(Interrupted) as stop:
                main(["demo", "--out", out, f"--seed={text}"])
            assert stop.value.args == (value,)
        else:
            assert main(["demo", "--out", out, f"--seed={text}"]) == 2
            assert "argument --seed: must be an integer from 0 to 4294967295" in sys.stderr.getvalue()


def test_output_name_at_the_file_system_limit(tmp_path, scores_csv):
    out = tmp_path / ("x" * 251 + ".csv")  # 255 characters: a temporary name built from it must be shorter
    assert main(["calibrate", str(scores_csv[0]), "--out", str(out)]) == 0
    assert read_csv(out)[0] == ["score", "probability"] and len(list(tmp_path.iterdir())) == 2


# ---------------------------------------------------------------- real files: pyarrow, Parquet, stdin (issue 16, 1)

CELL_TEXT = st.text(alphabet="0123456789+-.eE_x naifINF\uff11\u0661", max_size=8)


def python_reference(cell):
    "Independent rule for a score cell: Python's float() syntax, less its non-ASCII digits and underscores; finite."
    if not cell.isascii() or "_" in cell:
        return None
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@given(cell=CELL_TEXT)
@example(cell="1_000")
@example(cell="\uff11")
@example(cell=" +.5e-3 ")
@example(cell="1e999")
@example(cell="nan")
def test_score_cells_are_read_strictly(tmp_path_factory, cell):
    directory = tmp_path_factory.mktemp("cell")
    path = directory / "s.csv"
    path.write_text(f"score,label\n{cell},0\n1,1\n", encoding="utf-8")
    out = directory / "o.csv"
    code = main(["calibrate", str(path), "--out", str(out)])
    expected = python_reference(cell.strip())
    if expected is None:
        assert code == 2 and not out.exists()
    else:
        assert code == 0
        assert read_csv(out)[1][0, 0] == expected


def write_parquet(path, columns):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table(columns), path)
    return path


def read_parquet(path):
    import pyarrow.parquet as pq
    table = pq.read_table(path)
    return table.column_names, {name: table.column(name).to_numpy() for name in table.column_names}


@pytest.mark.parametrize("method", ["isotonic", "ivap", "cvap"])
def test_parquet_in_and_out_match_csv(tmp_path, scores_csv, method, capsys):
    path, s, y = scores_csv
    parquet = write_parquet(tmp_path / "scores.parquet", {"label": y.astype(np.int64), "score": s})
    assert main(["calibrate", str(path), "--method", method, "--out", str(tmp_path / "a.csv")]) == 0
    assert main(["calibrate", str(parquet), "--method", method, "--out", str(tmp_path / "b.pq")]) == 0
    header, table = read_csv(tmp_path / "a.csv")
    names, columns = read_parquet(tmp_path / "b.pq")
    assert names == header
    for j, name in enumerate(header):
        np.testing.assert_array_equal(columns[name], table[:, j])


@pytest.mark.parametrize("columns, message", [
    ({"score": [0.1, None], "label": [0, 1]}, "{path}, row 2: column 'score' has a missing value"),
    ({"score": [0.1, float("nan")], "label": [0, 1]}, "{path}, row 2: column 'score' has non-finite value nan"),
    ({"score": [0.1, 0.2, 0.3], "label": [0, 1, 2]}, "{path}, row 3: column 'label' must be 0 or 1, got 2"),
    ({"score": ["0.1"], "label": [0]}, "{path}: column 'score' has type string, not a number"),
    ({"s": [0.1], "label": [0]}, "{path}: missing column(s) 'score'; the header has 's', 'label'"),
])
def test_bad_parquet_is_reported_by_row(tmp_path, capsys, columns, message):
    path = write_parquet(tmp_path / "bad.parquet", columns)
    assert main(["calibrate", str(path), "--out", str(tmp_path / "o.csv")]) == 2
    assert capsys.readouterr().err == f"isocal: error: {message.format(path=path)}\n"


def test_a_csv_named_parquet_is_refused(tmp_path, scores_csv, capsys):
    path = tmp_path / "fake.parquet"
    shutil.copy(scores_csv[0], path)
    assert main(["calibrate", str(path), "--out", str(tmp_path / "o.csv")]) == 2
    assert capsys.readouterr().err.startswith(f"isocal: error: cannot read {path} as Parquet:")


def test_other_column_names(tmp_path, scores_csv, capsys):
    path, s, y = scores_csv
    renamed = write_csv(tmp_path / "renamed.csv", ["p", "y"], [(repr(float(a)), b) for a, b in zip(s, y)])
    new = write_csv(tmp_path / "new.csv", ["p"], [[repr(float(a))] for a in s[::-1]])
    assert main(["calibrate", str(path), "--apply", str(new).replace("new", "new"), "--out", str(tmp_path / "a.csv"),
                 "--method", "ivap"]) == 2  # the default column name is not in new.csv
    assert "missing column(s) 'score'" in capsys.readouterr().err
    args = ["--method", "ivap", "--score-col", "p", "--label-col", "y", "--apply", str(new)]
    assert main(["calibrate", str(renamed), *args, "--out", str(tmp_path / "b.csv")]) == 0
    reference = write_csv(tmp_path / "ref.csv", ["score"], [[repr(float(a))] for a in s[::-1]])
    assert main(["calibrate", str(path), "--method", "ivap", "--apply", str(reference), "--out",
                 str(tmp_path / "c.csv")]) == 0
    np.testing.assert_array_equal(read_csv(tmp_path / "b.csv")[1], read_csv(tmp_path / "c.csv")[1])
    (tmp_path / "bad.csv").write_text("p,y\n0.1,0\n0.2,5\n")
    assert main(["calibrate", str(tmp_path / "bad.csv"), "--score-col", "p", "--label-col", "y", "--out",
                 str(tmp_path / "d.csv")]) == 2
    assert capsys.readouterr().err.endswith("line 3: column 'y' must be 0 or 1, got 5\n")


def run_main(*args, stdin=b""):
    code = "import sys; from isocal.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], input=stdin, capture_output=True, timeout=300)


def test_stdin_and_stdout(tmp_path, scores_csv):
    path, s, y = scores_csv
    assert main(["calibrate", str(path), "--method", "cvap", "--out", str(tmp_path / "a.csv")]) == 0
    result = run_main("calibrate", "-", "--method", "cvap", "--out", "-", stdin=path.read_bytes())
    assert result.returncode == 0, result.stderr
    assert result.stdout == (tmp_path / "a.csv").read_bytes()
    assert result.stderr == IN_SAMPLE_LINE.encode() + b"wrote 200 calibrated probabilities to standard output\n"
    bad = run_main("calibrate", "-", "--out", "-", stdin=b"score,label\n0.1,0\n\n0.2,x\n")
    assert (bad.returncode, bad.stdout) == (2, b"")
    assert bad.stderr == b"isocal: error: standard input, line 4: column 'label' has non-numeric value 'x'\n"
    twice = run_main("calibrate", "-", "--apply", "-", stdin=b"")
    assert twice.returncode == 2 and b"standard input can be read only once" in twice.stderr


def test_progress_bars_only_when_asked(tmp_path, scores_csv, capsys, monkeypatch):
    out = tmp_path / "o.csv"
    assert main(["calibrate", str(scores_csv[0]), "--method", "cvap", "--out", str(out)]) == 0
    assert capsys.readouterr().err == IN_SAMPLE_LINE  # standard error is not a terminal here: no progress
    monkeypatch.setattr("isocal.cli_calibrate._show_progress", lambda: True)
    set_everywhere(monkeypatch, "PROGRESS_DELAY", 0)
    assert main(["calibrate", str(scores_csv[0]), "--method", "cvap", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "reading" in err and "cvap" in err


@pytest.mark.parametrize("method", ["ivap", "cvap"])
def test_venn_abers_columns_are_the_library_methods_bit_for_bit(tmp_path, scores_csv, method, monkeypatch):
    from isocal.venn_abers import CrossVennAbers, VennAbers, fold_ids
    set_everywhere(monkeypatch, "BLOCK_ROWS", 7)  # several blocks, the last one short
    path, s, y = scores_csv
    new = np.r_[s[::-1], s.min() - 1, s.max() + 1]
    write_csv(tmp_path / "new.csv", ["score"], [[repr(float(v))] for v in new])
    assert main(["calibrate", str(path), "--method", method, "--apply", str(tmp_path / "new.csv"),
                 "--out", str(tmp_path / "o.csv")]) == 0
    if method == "ivap":
        model, columns = VennAbers().fit(s, y), new
    else:
        model, columns = CrossVennAbers().fit(s, y, fold_ids(len(s), 5, random_state=0)), np.repeat(new[:, None], 5, 1)
    p0, p1 = model.predict_interval(columns)
    np.testing.assert_array_equal(read_csv(tmp_path / "o.csv")[1], np.c_[new, model.predict_proba(columns), p0, p1])


@pytest.mark.parametrize("argv", [["--score-col", "label"], ["--label-col", "score"], ["--score-col", "x", "--label-col", "x"]])
def test_score_and_label_columns_must_differ(capsys, monkeypatch, argv):
    monkeypatch.setattr("isocal.cli_calibrate.read_columns", refuse_to_run)
    assert main(["calibrate", "s.csv", *argv]) == 2
    assert "--score-col and --label-col name the same column" in capsys.readouterr().err


# ---------------------------------------------------------------- --save-model and --model (issue 13, 5)

CLASSES = {"isotonic": "IsotonicCalibrator", "ivap": "VennAbers", "cvap": "CrossVennAbers"}
FIT_OPTIONS = {"isotonic": [], "ivap": [], "cvap": ["--n-splits", "3", "--seed", "7"]}


@pytest.mark.parametrize("out_name", ["out.csv", "out.parquet"])
@pytest.mark.parametrize("method", ["isotonic", "ivap", "cvap"])
def test_saved_model_reproduces_the_fit_output_byte_for_byte(tmp_path, scores_csv, capsys, method, out_name):
    path = scores_csv[0]
    fit, applied, model = tmp_path / f"fit_{out_name}", tmp_path / f"applied_{out_name}", tmp_path / "m.json"
    assert main(["calibrate", str(path), "--method", method, *FIT_OPTIONS[method], "--save-model", str(model),
                 "--out", str(fit)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"saved the {method} model to {model}"
    assert main(["calibrate", str(path), "--model", str(model), "--out", str(applied)]) == 0
    assert capsys.readouterr().out == f"wrote 200 calibrated probabilities to {applied} by the {method} model of {model}\n"
    assert applied.read_bytes() == fit.read_bytes()


@pytest.mark.parametrize("method", ["isotonic", "ivap", "cvap"])
def test_saved_model_applies_to_new_scores_as_apply_did(tmp_path, scores_csv, method):
    path, s, _ = scores_csv
    new = write_csv(tmp_path / "new.csv", ["score"], [[repr(float(v))] for v in np.r_[s[::3], s.min() - 5, 1e6, 0.0]])
    model = tmp_path / "m.json"
    assert main(["calibrate", str(path), "--method", method, "--apply", str(new), "--save-model", str(model),
                 "--out", str(tmp_path / "fit.csv")]) == 0
    assert main(["calibrate", str(new), "--model", str(model), "--out", str(tmp_path / "applied.csv")]) == 0
    assert (tmp_path / "applied.csv").read_bytes() == (tmp_path / "fit.csv").read_bytes()


@pytest.mark.parametrize("method", ["isotonic", "ivap", "cvap"])
def test_saved_model_is_the_portable_file_of_the_fitted_calibrator(tmp_path, scores_csv, method):
    from isocal.isotonic import IsotonicCalibrator
    from isocal.portable import load
    from isocal.venn_abers import CrossVennAbers, VennAbers, fold_ids
    path, s, y = scores_csv
    model = tmp_path / "m.json"
    assert main(["calibrate", str(path), "--method", method, *FIT_OPTIONS[method], "--save-model", str(model),
                 "--out", str(tmp_path / "o.csv")]) == 0
    expected = {"isotonic": lambda: IsotonicCalibrator(out_of_bounds="clip").fit(s, y),
                "ivap": lambda: VennAbers().fit(s, y),
                "cvap": lambda: CrossVennAbers().fit(s, y, fold_ids(len(s), 3, random_state=7))}[method]()
    expected.save(tmp_path / "by_save.json")
    assert model.read_bytes() == (tmp_path / "by_save.json").read_bytes()  # the text `save` writes
    loaded = load(model)
    assert type(loaded).__name__ == CLASSES[method]
    if method == "cvap":
        assert loaded.n_splits_ == 3


def test_model_reads_only_the_score_column(tmp_path, scores_csv, capsys):
    path, s, _ = scores_csv
    model = tmp_path / "m.json"
    assert main(["calibrate", str(path), "--method", "ivap", "--save-model", str(model),
                 "--out", str(tmp_path / "fit.csv")]) == 0
    # labels that a fit would refuse (not 0/1, not even numbers) and a renamed score column are fine with --model
    write_csv(tmp_path / "other.csv", ["label", "s"], [["x", repr(float(v))] for v in s])
    assert main(["calibrate", str(tmp_path / "other.csv"), "--model", str(model), "--score-col", "s",
                 "--label-col", "s", "--out", str(tmp_path / "o.csv")]) == 0
    header, table = read_csv(tmp_path / "o.csv")
    assert header == ["score", "probability", "p0", "p1"]
    np.testing.assert_array_equal(table, read_csv(tmp_path / "fit.csv")[1])


@pytest.mark.parametrize("extra, message", [
    (["--method", "ivap"], "--method cannot be used with --model: the method and its fit come from the model file"),
    (["--method", "isotonic"], "--method cannot be used with --model"),
    (["--n-splits", "3"], "--n-splits cannot be used with --model"),
    (["--seed", "0"], "--seed cannot be used with --model"),
    (["--apply", "new.csv"], "--apply cannot be used with --model: SCORES is the file that --model calibrates"),
    (["--save-model", "again.json"], "--save-model cannot be used with --model"),
])
def test_fit_options_with_model_are_usage_errors(tmp_path, scores_csv, capsys, monkeypatch, extra, message):
    model = tmp_path / "m.json"
    assert main(["calibrate", str(scores_csv[0]), "--save-model", str(model), "--out", str(tmp_path / "o.csv")]) == 0
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("isocal.cli_calibrate.read_columns", refuse_to_run)
    before = snapshot(tmp_path)
    assert main(["calibrate", str(scores_csv[0]), "--model", str(model), *extra, "--out", "x.csv"]) == 2
    err = capsys.readouterr().err
    assert "usage: isocal calibrate" in err and f"error: {message}" in err
    assert snapshot(tmp_path) == before


def bad_model_files(tmp_path, good):
    "Model files that --model must refuse, with the start of the message naming each."
    from isocal.labeler import ThresholdLabeler
    text = good.read_text()
    newer = json.loads(text)
    newer["schema_version"] += 1
    newer["state"] = {"something": "new"}
    ThresholdLabeler().fit(np.array([0.1, 0.5, 0.9, 1.2]), np.array([0, 1, 2, 2])).save(tmp_path / "labeler.json")
    files = {"missing.json": None, "truncated.json": text[:len(text) // 2], "empty.json": "",
             "newer.json": json.dumps(newer), "not_json.json": "score,label\n0.5,1\n",
             "no_envelope.json": json.dumps({"model": []}),
             "other_format.json": json.dumps({**json.loads(text), "format": "sklearn"}),
             "wrong_state.json": text.replace('"scores"', '"scores_"', 1), "labeler.json": None}
    for name, content in files.items():
        if content is not None:
            (tmp_path / name).write_text(content)
    return list(files)


def test_bad_model_files_are_refused_by_name(tmp_path, scores_csv, capsys):
    good = tmp_path / "good.json"
    assert main(["calibrate", str(scores_csv[0]), "--method", "ivap", "--save-model", str(good),
                 "--out", str(tmp_path / "fit.csv")]) == 0
    names = bad_model_files(tmp_path, good)
    (tmp_path / "kept.csv").write_text("previous\n")
    capsys.readouterr()
    before = snapshot(tmp_path)
    messages = {}
    for name in names:
        for out in ("new.csv", "kept.csv"):
            assert main(["calibrate", str(scores_csv[0]), "--model", str(tmp_path / name),
                         "--out", str(tmp_path / out)]) == 2, name
            err = capsys.readouterr().err
            assert err.startswith(f"isocal: error: --model {tmp_path / name}") and err.count("\n") == 1, err
            messages[name] = err
        assert snapshot(tmp_path) == before  # no output file created, the old one kept, no temporary file
    assert "No such file" in messages["missing.json"]
    assert "corrupt or truncated JSON" in messages["truncated.json"] and "corrupt" in messages["empty.json"]
    assert "schema 2" in messages["newer.json"] and "upgrade isocal" in messages["newer.json"]
    assert "not an isocal model file" in messages["other_format.json"]
    assert "ThresholdLabeler" in messages["labeler.json"] and "cannot apply" in messages["labeler.json"]
    assert "scores" in messages["wrong_state.json"]


@pytest.mark.parametrize("clash", ["scores", "scores_symlink", "apply", "out", "out_dotdot", "dash"])
def test_save_model_never_overwrites_an_input_or_the_output(tmp_path, scores_csv, capsys, monkeypatch, clash):
    path = scores_csv[0]
    new = write_csv(tmp_path / "new.csv", ["score"], [[0.5], [1.5]])
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.csv").symlink_to(path)
    out = tmp_path / "out.csv"
    out.write_text("previous\n")
    target = {"scores": path, "scores_symlink": tmp_path / "link.csv", "apply": new, "out": out,
              "out_dotdot": tmp_path / "sub" / ".." / "out.csv", "dash": "-"}[clash]
    monkeypatch.setattr("isocal.cli_calibrate.read_columns", refuse_to_run)
    before = snapshot(tmp_path)
    assert main(["calibrate", str(path), "--apply", str(new), "--save-model", str(target), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    start = "--save-model needs a file name, not -" if clash == "dash" else f"--save-model {target}"
    assert err.startswith(f"isocal: error: {start}") and err.count("\n") == 1, err
    assert snapshot(tmp_path) == before


def test_out_may_not_be_the_model_file(tmp_path, scores_csv, capsys):
    model = tmp_path / "m.json"
    assert main(["calibrate", str(scores_csv[0]), "--save-model", str(model), "--out", str(tmp_path / "o.csv")]) == 0
    capsys.readouterr()
    before = snapshot(tmp_path)
    assert main(["calibrate", str(scores_csv[0]), "--model", str(model), "--out", str(model)]) == 2
    assert "same file as the input --model" in capsys.readouterr().err
    assert snapshot(tmp_path) == before


def test_save_model_is_checked_before_the_fit(tmp_path, scores_csv, capsys, monkeypatch):
    monkeypatch.setattr("isocal.cli_calibrate.read_columns", refuse_to_run)
    bad = tmp_path / "no_dir" / "m.json"
    assert main(["calibrate", str(scores_csv[0]), "--save-model", str(bad), "--out", str(tmp_path / "o.csv")]) == 2
    assert capsys.readouterr().err.startswith(f"isocal: error: cannot write --save-model {bad}")
    assert list(tmp_path.iterdir()) == [scores_csv[0]]


def test_save_model_write_failure_keeps_the_previous_model(tmp_path, scores_csv, capsys, monkeypatch):
    model = tmp_path / "m.json"
    model.write_text("previous model\n")

    def fails(_):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("isocal.cli_calibrate._model_bytes", lambda model, path: fails(model))
    assert main(["calibrate", str(scores_csv[0]), "--save-model", str(model), "--out", str(tmp_path / "o.csv")]) == 2
    assert capsys.readouterr().err == f"isocal: error: cannot write --save-model {model}: No space left on device\n"
    assert model.read_text() == "previous model\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "o.csv", "scores.csv"]  # no temporary file


def test_model_through_stdin_and_stdout(tmp_path, scores_csv):
    path = scores_csv[0]
    model = tmp_path / "m.json"
    assert main(["calibrate", str(path), "--method", "cvap", "--save-model", str(model),
                 "--out", str(tmp_path / "fit.csv")]) == 0
    result = run_main("calibrate", "-", "--model", str(model), "--out", "-", stdin=path.read_bytes())
    assert result.returncode == 0, result.stderr
    assert result.stdout == (tmp_path / "fit.csv").read_bytes()
    assert result.stderr == f"wrote 200 calibrated probabilities to standard output by the cvap model of {model}\n".encode()


def test_help_documents_save_model_and_model(capsys):
    assert main(["calibrate", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--save-model MODEL" in out and "--model MODEL" in out and "byte for byte" in out


@pytest.mark.parametrize("out_of_bounds", ["nan", "raise"])
def test_model_saved_without_clipping_refuses_scores_outside_its_range(tmp_path, capsys, out_of_bounds):
    from isocal.isotonic import IsotonicCalibrator
    model = tmp_path / "m.json"
    IsotonicCalibrator(out_of_bounds=out_of_bounds).fit([0.0, 1.0, 2.0], [0, 1, 1]).save(model)
    inside = write_csv(tmp_path / "inside.csv", ["score"], [[0.0], [1.5], [2.0]])
    assert main(["calibrate", str(inside), "--model", str(model), "--out", str(tmp_path / "o.csv")]) == 0
    np.testing.assert_array_equal(read_csv(tmp_path / "o.csv")[1][:, 1], [0, 1, 1])
    outside = write_csv(tmp_path / "outside.csv", ["score"], [[1.0], [7.5]])
    assert main(["calibrate", str(outside), "--model", str(model), "--out", str(tmp_path / "never.csv")]) == 2
    assert capsys.readouterr().err == (f"isocal: error: --model {model}: score 7.5 is outside the range the model was "
                                       f"fitted on [0, 2], and its out_of_bounds is {out_of_bounds!r}, not 'clip'\n")
    assert not (tmp_path / "never.csv").exists()


def test_warmup_compiles_each_module_and_reports_it(capsys):
    from isocal.cli_warmup import _warmup_tasks
    assert main(["warmup"]) == 0
    out = capsys.readouterr().out
    for name in _warmup_tasks():
        assert name in out
    assert "compiled into Numba's cache" in out


COMPILED_BY_CALIBRATE = """
import json, sys
from numba.core import event
record = event.RecordingListener()
event.register("numba:compile", record)
from isocal.cli import main
for method in ("isotonic", "ivap", "cvap"):
    assert main(["calibrate", sys.argv[1], "--method", method, "--out", sys.argv[2]]) == 0
print(json.dumps(sorted({ev.data["dispatcher"].py_func.__qualname__ for _, ev in record.buffer if ev.is_start})))
"""


def test_warmup_of_the_command_line_leaves_calibrate_nothing_to_compile(tmp_path):
    "After warmup's `cli` task on an empty Numba cache, `isocal calibrate` compiles no kernel for any method."
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-c", "from isocal.cli_warmup import _warmup_tasks; _warmup_tasks()['cli']()"], env=env,
                   check=True)
    rng = np.random.default_rng(0)
    s = rng.normal(size=300)
    path = write_csv(tmp_path / "s.csv", ["score", "label"],
                     [(repr(float(a)), int(b)) for a, b in zip(s, rng.uniform(size=300) < 0.5)])
    run = subprocess.run([sys.executable, "-c", COMPILED_BY_CALIBRATE, str(path), str(tmp_path / "o.csv")], env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1]) == []


# ---------------------------------------------------------------- speed where users wait (issue 16, 1)

@pytest.fixture
def tied_scores(tmp_path):
    "Scores with many ties and runs of blocks at equal levels, and new scores inside, between and outside them."
    rng = np.random.default_rng(7)
    s = np.round(rng.normal(size=600), 1)
    y = (rng.uniform(size=600) < 1 / (1 + np.exp(-3 * s))).astype(int)
    y[s > 1.5] = 1  # a run of blocks at level 1
    path = write_csv(tmp_path / "tied.csv", ["score", "label"], [(repr(float(a)), b) for a, b in zip(s, y)])
    new = write_csv(tmp_path / "new.csv", ["score"],
                    [[repr(float(v))] for v in np.r_[s[::7], s.min() - 1, s.max() + 1, np.linspace(-3, 3, 101)]])
    return path, new


@pytest.mark.parametrize("out_name", ["out.csv", "out.parquet"])
@pytest.mark.parametrize("apply", [False, True])
def test_isotonic_fit_without_scikit_learn_writes_the_calibrators_bytes(tmp_path, tied_scores, out_name, apply):
    "A run that saves no model fits the isotonic map without scikit-learn (`_isotonic_map`): the same bytes as with it."
    path, new = tied_scores
    extra = ["--apply", str(new)] if apply else []
    light, full = tmp_path / f"light_{out_name}", tmp_path / f"full_{out_name}"
    assert main(["calibrate", str(path), *extra, "--out", str(light)]) == 0
    assert main(["calibrate", str(path), *extra, "--save-model", str(tmp_path / "m.json"), "--out", str(full)]) == 0
    assert light.read_bytes() == full.read_bytes()


@pytest.mark.parametrize("label", [0, 1])
def test_isotonic_fit_without_scikit_learn_on_a_single_class(tmp_path, capsys, label):
    path = write_csv(tmp_path / "one.csv", ["score", "label"], [[0.1, label], [0.1, label], [0.7, label], [2, label]])
    assert main(["calibrate", str(path), "--out", str(tmp_path / "a.csv")]) == 0
    assert main(["calibrate", str(path), "--save-model", str(tmp_path / "m.json"), "--out", str(tmp_path / "b.csv")]) == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert read_csv(tmp_path / "a.csv")[1][:, 1].tolist() == [label] * 4


@pytest.mark.parametrize("method", ["isotonic", "ivap", "cvap"])
def test_calibrate_imports_neither_scikit_learn_nor_pandas(tmp_path, scores_csv, method):
    "Importing scikit-learn took most of a second of a short run, pandas (through pyarrow's to_numpy) a fifth."
    code = ("import sys; from isocal.cli import main; status = main(sys.argv[1:]); "
            "print(sorted(m for m in ('sklearn', 'pandas', 'matplotlib') if m in sys.modules), file=sys.stderr); "
            "sys.exit(status)")
    result = subprocess.run([sys.executable, "-c", code, "calibrate", str(scores_csv[0]), "--method", method,
                             "--out", str(tmp_path / "o.csv")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr == IN_SAMPLE_LINE + "[]\n"


@pytest.mark.parametrize("threads", [0, 1, 3])
@pytest.mark.parametrize("method", ["isotonic", "ivap", "cvap"])
def test_blocks_and_threads_write_the_same_file(tmp_path, tied_scores, monkeypatch, method, threads):
    "Rows are computed in blocks and formatted in pieces on threads; neither changes a byte of the output."
    path, new = tied_scores
    argv = ["calibrate", str(path), "--method", method, "--apply", str(new)]
    assert main([*argv, "--out", str(tmp_path / "whole.csv")]) == 0
    assert main([*argv, "--out", str(tmp_path / "whole.parquet")]) == 0
    set_everywhere(monkeypatch, "BLOCK_ROWS", 16)
    set_everywhere(monkeypatch, "FORMAT_ROWS", 5)
    set_everywhere(monkeypatch, "WRITE_THREADS", threads)
    set_everywhere(monkeypatch, "_CVAP_PIECE", 5 + 5 * threads)  # CVAP intervals merged 1, 2 or 4 rows at a time
    assert main([*argv, "--out", str(tmp_path / "blocks.csv")]) == 0
    assert (tmp_path / "blocks.csv").read_bytes() == (tmp_path / "whole.csv").read_bytes()
    assert main([*argv, "--out", str(tmp_path / "blocks.parquet")]) == 0
    import pyarrow.parquet as pq
    blocks, whole = pq.ParquetFile(tmp_path / "blocks.parquet"), pq.ParquetFile(tmp_path / "whole.parquet")
    assert blocks.metadata.num_row_groups == -(-blocks.metadata.num_rows // 16) and whole.metadata.num_row_groups == 1
    assert blocks.read().equals(whole.read())


def test_write_columns_of_no_rows_writes_the_header(tmp_path):
    from isocal.cli_read import read_columns
    from isocal.cli_write import write_columns
    write_columns(tmp_path / "empty.csv", {"score": np.array([]), "label": np.array([], dtype=np.int64)})
    assert (tmp_path / "empty.csv").read_text() == "score,label\n"
    write_columns(tmp_path / "empty.parquet", {"score": np.array([])})
    import pyarrow.parquet as pq
    assert pq.read_table(tmp_path / "empty.parquet").num_rows == 0


# ---------------------------------------------------------------- dictionary-encoded Venn–Abers columns

STEP_VALUES = st.sampled_from([0.0, -0.0, 0.5, 1 / 3, 1.0, 5e-324, 1e-300, 0.1, 0.30000000000000004, 2.5e-5, 1e22,
                               1e21, 123456789012345678.0, float("nan"), float("inf"), -float("inf")])


@given(st.lists(st.tuples(STEP_VALUES, STEP_VALUES), max_size=40))
def test_runs_encode_the_columns_exactly(rows):
    "Each row is its run's first row, bit for bit; and neighbouring runs differ (so no run could be longer)."
    from isocal.cli_calibrate import _runs
    columns = [np.array([row[j] for row in rows], dtype=float) for j in range(2)]
    firsts, run = _runs(columns)
    assert run.dtype == np.int32 and firsts.tolist() == np.flatnonzero(np.diff(run, prepend=-1)).tolist()
    changed = np.zeros(max(len(firsts) - 1, 0), bool)
    for column in columns:
        assert column[firsts][run].tobytes() == column.tobytes()
        bits = column[firsts].view(np.uint64)
        changed |= bits[1:] != bits[:-1]
    assert changed.all()


@given(st.lists(STEP_VALUES, min_size=1, max_size=30), st.data())
def test_an_encoded_column_prints_as_its_floats(values, data):
    "The CSV text of an `_EncodedColumn` is that of the float column it encodes, byte for byte, piece by piece."
    from isocal.cli_write import _EncodedColumn, _csv_text, _text_values
    values = np.array(values)
    codes = np.array(data.draw(st.lists(st.integers(0, len(values) - 1), max_size=30)), dtype=np.int32)
    scores = np.linspace(-1.0, 1.0, len(codes))
    column = _text_values(_EncodedColumn(codes, values))
    dense = [scores, values[codes]]
    for start, stop in [(0, len(codes)), (0, len(codes) // 2), (len(codes) // 2, len(codes))]:
        text = _csv_text([scores[start:stop], column[start:stop]], ["score", "p"]).to_pybytes()
        assert text == _csv_text([a[start:stop] for a in dense], ["score", "p"]).to_pybytes()


@pytest.mark.parametrize("method", ["ivap", "cvap"])
def test_venn_abers_parquet_columns_are_float64(tmp_path, scores_csv, method):
    "Encoded columns are decoded for Parquet: a reader sees plain double columns, not dictionaries."
    import pyarrow.parquet as pq
    assert main(["calibrate", str(scores_csv[0]), "--method", method, "--out", str(tmp_path / "o.parquet")]) == 0
    schema = pq.read_schema(tmp_path / "o.parquet")
    assert [str(t) for t in schema.types] == ["double"] * 4


# ---------------------------------------------------------------- a command line that guides (issue 31, part 4)

def test_bare_isocal_prints_the_help(capsys):
    "`isocal` alone prints the whole help (the description and every command), not just a usage line"
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: isocal") and "Isotonic calibration" in out
    assert all(command in out for command in ("demo", "calibrate", "warmup"))


@pytest.mark.parametrize("method", ["isotonic", "ivap", "cvap"])
def test_in_sample_calibration_is_said_once(tmp_path, scores_csv, capsys, method):
    "Without --apply the fitted scores themselves are calibrated: said once on standard error; not with --apply/--model"
    path = scores_csv[0]
    out, model = tmp_path / "o.csv", tmp_path / "m.json"
    assert main(["calibrate", str(path), "--method", method, "--out", str(out), "--save-model", str(model)]) == 0
    err = capsys.readouterr().err
    assert err.count("in-sample") == 1 and err.startswith("isocal: warning:") and "--apply" in err
    assert main(["calibrate", str(path), "--method", method, "--apply", str(path), "--out", str(out)]) == 0
    assert "in-sample" not in capsys.readouterr().err
    assert main(["calibrate", str(path), "--model", str(model), "--out", str(out)]) == 0
    assert "in-sample" not in capsys.readouterr().err


@pytest.mark.parametrize("name", ["out.xlsx", "out.txt", "out.json", "out"])
def test_output_format_comes_from_the_extension(tmp_path, scores_csv, capsys, name):
    "An output name without a known extension is refused before any work, not written as CSV under its name"
    assert main(["calibrate", str(scores_csv[0]), "--out", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {tmp_path / name}" in err
    assert ".csv" in err and ".parquet" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.csv"]


def test_known_output_extensions(tmp_path, scores_csv):
    path = scores_csv[0]
    for name in ("o.csv", "o.CSV", "o.tsv", "o.parquet", "o.pq"):
        assert main(["calibrate", str(path), "--apply", str(path), "--out", str(tmp_path / name)]) == 0
    assert (tmp_path / "o.parquet").read_bytes()[:4] == b"PAR1" == (tmp_path / "o.pq").read_bytes()[:4]
    assert (tmp_path / "o.tsv").read_text().splitlines()[0] == "score\tprobability"
    assert (tmp_path / "o.csv").read_text() == (tmp_path / "o.CSV").read_text() == \
        (tmp_path / "o.tsv").read_text().replace("\t", ",")


def test_delimiter(tmp_path, scores_csv, capsys):
    "--delimiter reads and writes another separator; a file that plainly uses one gets a hint, not just 'missing'"
    path, s, y = scores_csv
    semi = tmp_path / "semi.csv"
    semi.write_text(path.read_text().replace(",", ";"))
    assert main(["calibrate", str(semi), "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "missing column(s)" in err and "--delimiter ';'" in err
    assert main(["calibrate", str(path), "--apply", str(path), "--out", str(tmp_path / "comma.csv")]) == 0
    assert main(["calibrate", str(semi), "--delimiter", ";", "--apply", str(semi), "--out", str(tmp_path / "s.csv")]) == 0
    assert (tmp_path / "s.csv").read_text() == (tmp_path / "comma.csv").read_text().replace(",", ";")
    tab = tmp_path / "tab.txt"
    tab.write_text(path.read_text().replace(",", "\t"))
    for spelling in ("\t", "\\t", "tab"):
        assert main(["calibrate", str(tab), "--delimiter", spelling, "--apply", str(tab),
                     "--out", str(tmp_path / "t.csv")]) == 0
        assert (tmp_path / "t.csv").read_text() == (tmp_path / "comma.csv").read_text().replace(",", "\t")
    capsys.readouterr()
    for bad in ("", ";;", '"', "\n", "1", "."):
        assert main(["calibrate", str(path), "--delimiter", bad]) == 2
        assert "argument --delimiter" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["isotonic", "ivap", "cvap"])
def test_precision(tmp_path, scores_csv, method):
    """Default: the shortest text that reads back as the same float (round trip); --precision N: N significant digits
    for the probabilities (the scores are written as they were read)"""
    path = scores_csv[0]
    full, short = tmp_path / "full.csv", tmp_path / "short.csv"
    assert main(["calibrate", str(path), "--method", method, "--apply", str(path), "--out", str(full)]) == 0
    assert main(["calibrate", str(path), "--method", method, "--apply", str(path), "--out", str(short),
                 "--precision", "3"]) == 0
    with open(full, newline="") as f: a = list(csv.reader(f))
    with open(short, newline="") as f: b = list(csv.reader(f))
    assert a[0] == b[0] and len(a) == len(b)
    for ra, rb in zip(a[1:], b[1:]):
        assert ra[0] == rb[0]  # the score column as read
        for x, y in zip(ra[1:], rb[1:]):
            assert y == f"{float(x):.3g}", (x, y)
    assert max(len(f) for row in b[1:] for f in row[1:]) <= len("0.123") + len("e-05")
    assert max(len(f) for row in a[1:] for f in row[1:]) > 8  # the default writes every digit a float needs


@pytest.mark.parametrize("bad", ["0", "18", "x", "-1"])
def test_precision_range(tmp_path, scores_csv, capsys, bad):
    assert main(["calibrate", str(scores_csv[0]), "--precision", bad]) == 2
    assert "argument --precision: must be an integer from 1 to 17" in capsys.readouterr().err


def test_models_are_compact_and_may_be_gzipped(tmp_path, scores_csv):
    "--save-model writes one line of JSON, gzip-compressed for a .gz name; --model reads either, the same bytes out"
    path = scores_csv[0]
    plain, packed = tmp_path / "m.json", tmp_path / "m.json.gz"
    for model in (plain, packed):
        assert main(["calibrate", str(path), "--method", "cvap", "--save-model", str(model),
                     "--out", str(tmp_path / "fit.csv")]) == 0
    text = plain.read_text()
    assert text.count("\n") == 1 and ", " not in text and ": " not in text
    import gzip
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    for model in (plain, packed):
        assert main(["calibrate", str(path), "--model", str(model), "--out", str(tmp_path / f"{model.name}.csv")]) == 0
        assert (tmp_path / f"{model.name}.csv").read_bytes() == (tmp_path / "fit.csv").read_bytes()


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def screen(text):
    "The lines a terminal shows after `text`: \r returns to the line's start, ESC[K erases to its end"
    lines, col = [""], 0
    for piece in re.split(r"(\r|\n|\x1b\[K)", text):
        if piece == "\n": lines.append(""); col = 0
        elif piece == "\r": col = 0
        elif piece == "\x1b[K": lines[-1] = lines[-1][:col]
        else: lines[-1] = lines[-1][:col] + piece + lines[-1][col + len(piece):]; col += len(piece)
    return lines


def test_progress_on_a_terminal(tmp_path, scores_csv, monkeypatch):
    """On a terminal a run longer than PROGRESS_DELAY (about 2 s) shows one progress line through its stages (reading,
    fitting, writing), redrawn in place, and erased at the end: no blank or stray lines are left"""
    from isocal import cli_read
    assert 1.5 <= cli_read.PROGRESS_DELAY <= 3
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    set_everywhere(monkeypatch, "PROGRESS_DELAY", 0)
    slow = {"fit": 0}
    import isocal.cli_calibrate as cc
    original = cc._fit_venn_abers

    def slow_fit(*args):
        import time
        time.sleep(0.5)  # the progress line is redrawn while a fit reports nothing
        slow["fit"] += 1
        return original(*args)

    monkeypatch.setattr(cc, "_fit_venn_abers", slow_fit)
    out = tmp_path / "o.csv"
    assert main(["calibrate", str(scores_csv[0]), "--method", "cvap", "--apply", str(scores_csv[0]),
                 "--out", str(out)]) == 0
    text = terminal.getvalue()
    assert "reading" in text and "fitting cvap" in text and "writing" in text and "%" in text
    assert text.count("fitting cvap") >= 2  # redrawn during the fit
    assert screen(text) == [""], screen(text)  # all erased: the next line starts clean
    assert screen("a\n" + text + "b\n") == ["a", "b", ""]


# ---------------------------------------------------------------- files (issue 30, part 3)

@needs_script
@pytest.mark.parametrize("option", ["SCORES", "--apply"])
def test_standard_input_that_is_the_out_file_is_refused(tmp_path, scores_csv, option):
    "`isocal calibrate - --out in.csv < in.csv` would replace the input with its labels: refused, the file kept"
    path = scores_csv[0]
    before = path.read_bytes()
    args = ["calibrate", "-", "--out", str(path)] if option == "SCORES" else \
        ["calibrate", str(tmp_path / "other.csv"), "--apply", "-", "--out", str(path)]
    shutil.copy(path, tmp_path / "other.csv")
    with open(path, "rb") as stdin:
        r = subprocess.run([script(), *args], stdin=stdin, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "standard input" in r.stderr and "same file" in r.stderr and r.stderr.count("\n") == 1
    assert path.read_bytes() == before


@pytest.mark.parametrize("option", ["--out", "--save-model"])
def test_write_protected_output_is_refused(tmp_path, scores_csv, capsys, option):
    "An existing write-protected output is refused before any work (as `cp` does without -f), even as root"
    target = tmp_path / ("o.csv" if option == "--out" else "m.json")
    target.write_text("keep me")
    os.chmod(target, 0o444)
    args = ["calibrate", str(scores_csv[0]), option, str(target)] + (["--out", str(tmp_path / "x.csv")]
                                                                      if option == "--save-model" else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == f"isocal: error: cannot write {option} {target}: the file is write-protected: make it writable or " \
                  f"remove it first\n"
    assert target.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == sorted(["scores.csv", target.name])


def test_a_killed_runs_temporary_file_is_removed_by_the_next_run(tmp_path, scores_csv):
    "SIGKILL leaves `.o.csv.<hex>.tmp`; the next run writing o.csv removes it (nobody holds it locked)"
    leftover = tmp_path / ".o.csv.0123456789ab.tmp"
    leftover.write_text("half a file")
    assert main(["calibrate", str(scores_csv[0]), "--out", str(tmp_path / "o.csv")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.csv", "scores.csv"]


def test_deeply_nested_model_is_a_malformed_model_file(tmp_path, scores_csv, capsys):
    model = tmp_path / "deep.json"
    model.write_text("[" * 100_000)
    assert main(["calibrate", str(scores_csv[0]), "--model", str(model), "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"isocal: error: --model {model}: malformed model file") and err.count("\n") == 1


def wait_until_reading_stdin(proc, pipe_fd):
    "Wait until `proc` has taken what was written into its standard input pipe (it is then inside `main`)"
    import fcntl, termios, array, time
    deadline = time.time() + 120
    while time.time() < deadline:
        left = array.array("i", [0])
        fcntl.ioctl(pipe_fd, termios.FIONREAD, left)
        if left[0] == 0:
            time.sleep(0.2)
            return
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    raise AssertionError("the command never read its standard input")


def default_signals():
    """In the child, before it runs: Ctrl-C's signal back to its default. pytest-xdist's workers ignore SIGINT, and a
    process started with SIGINT ignored keeps ignoring it (Python then installs no KeyboardInterrupt handler, as a
    shell's background jobs expect)"""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@needs_script
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_interrupted_or_terminated_without_a_traceback(tmp_path, signame):
    """Ctrl-C (SIGINT) or SIGTERM: one line on standard error, no traceback, no output file, no temporary file; the
    process ends by the signal, as the shell expects"""
    import signal
    sig = getattr(signal, signame)
    proc = subprocess.Popen([script(), "calibrate", "-", "--out", str(tmp_path / "o.csv")], stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd=tmp_path, preexec_fn=default_signals)
    try:
        proc.stdin.write(b"score,label\n0.1,0\n0.2,1\n")
        proc.stdin.flush()
        wait_until_reading_stdin(proc, proc.stdin.fileno())
        proc.send_signal(sig)
        err = proc.communicate(timeout=60)[1].decode()
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()
    assert "Traceback" not in err and err == f"isocal: {'interrupted' if signame == 'SIGINT' else 'terminated'}\n", err
    assert proc.returncode == -sig
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_signal_while_writing_removes_the_temporary_file(tmp_path, scores_csv, signame):
    "A signal that arrives while the output is being written: the temporary file is removed, the old output kept"
    import signal, time
    out = tmp_path / "o.csv"
    out.write_text("old\n")
    code = ("import sys, time, isocal.cli_write as w\n"
            "original = w._write_csv_blocks\n"
            "def slow(file, *args):\n    file.write(b'partial'); file.flush(); print('writing', flush=True); time.sleep(600)\n"
            "w._write_csv_blocks = slow\n"
            "from isocal.cli import console_main\n"
            "sys.argv = ['isocal'] + sys.argv[1:]\n"
            "sys.exit(console_main())\n")
    proc = subprocess.Popen([sys.executable, "-c", code, "calibrate", str(scores_csv[0]), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    try:
        assert proc.stdout.readline() == "writing\n"
        assert len(list(tmp_path.glob(".o.csv.*.tmp"))) == 1
        proc.send_signal(getattr(signal, signame))
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()
    assert "Traceback" not in err, err
    assert proc.returncode == -getattr(signal, signame)
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["o.csv", "scores.csv"]
