"""Tests of the `isocal` command line: in-process through `main` and, when installed, through the console script."""
import csv
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from isocal import __version__
from isocal.cli import format_table, main, run_demo

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SCRIPT = Path(sys.executable).with_name("isocal")
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
    assert iso["ece"] < raw["ece"]
    assert iso["brier"] < raw["brier"]
    assert iso["log_loss_bits"] < raw["log_loss_bits"]
    assert all(np.isfinite(row[k]) for row in rows for k in ("log_loss_bits", "brier", "ece"))
    assert np.isnan(raw["width"]) and np.isnan(iso["width"])
    for va in (ivap, cvap):
        assert va["brier"] < raw["brier"] and va["log_loss_bits"] < raw["log_loss_bits"]
        assert 0 < va["width"] < 0.5


def test_demo_ivap_matches_the_venn_abers_package():
    import venn_abers
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB
    from isocal.cli import demo_probabilities

    X, y = load_breast_cancer(return_X_y=True)
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
    raw, iso, ivap, cvap = run_demo(out=None, seed=seed)
    assert iso["ece"] < raw["ece"] and iso["brier"] < raw["brier"]
    assert ivap["log_loss_bits"] < raw["log_loss_bits"] and cvap["log_loss_bits"] < raw["log_loss_bits"]


def test_demo_is_deterministic(demo_rows):
    again = run_demo(out=None)
    assert [{k: v for k, v in r.items() if k != "width"} for r in again] == \
        [{k: v for k, v in r.items() if k != "width"} for r in demo_rows[0]]
    np.testing.assert_array_equal([r["width"] for r in again], [r["width"] for r in demo_rows[0]])


def test_demo_command_prints_an_aligned_table(tmp_path, capsys):
    png = tmp_path / "r.png"
    assert main(["demo", "--out", str(png), "--seed", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    header, raw, iso, ivap, cvap = out[:5]
    assert header.split()[:4] == ["model", "log", "loss", "[bits]"] and header.endswith("ECE    p1-p0")
    assert raw.startswith("uncalibrated") and iso.startswith("isotonic")
    assert ivap.startswith("IVAP") and cvap.startswith("CVAP")
    assert raw.endswith("-") and iso.endswith("-") and float(ivap.split()[-1]) > 0
    assert len(header) == len(raw) == len(iso) == len(ivap) == len(cvap)
    assert out[-1] == f"reliability diagram: {png}" and png.stat().st_size > 0
    assert format_table(run_demo(out=None)) == "\n".join(out[:5])


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
    np.testing.assert_allclose(table[:, 2], 1 - gm0, rtol=1e-12)
    np.testing.assert_allclose(table[:, 3], gm1, rtol=1e-12)
    assert np.all((table[:, 1] > 0) & (table[:, 1] < 1))


@pytest.mark.parametrize("n_splits", ["1", "500"])
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
    ("short_row", "score,label\n0.1,0\n0.2\n", "{path}, line 3: expected at least 2 fields, found 1"),
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
    assert capsys.readouterr().err.startswith(f"isocal: error: cannot write {tmp_path / 'no' / 'out.csv'}")


# ---------------------------------------------------------------- argument parsing

def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"isocal {__version__}\n"


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["calibrate"], ["calibrate", "x.csv", "--method", "platt"],
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
    assert result.stdout.splitlines()[0].startswith("model") and "isotonic" in result.stdout
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
