"""Portable (JSON) calibrators: bit-exact round trips, plain-JSON files, clear errors, atomic save."""
import json
import math
import os

import numpy as np
import pytest
from hypothesis import given, strategies as st

import isocal.portable as portable
from isocal.portable import PortableError, encode_floats
from isocal.venn_abers import CrossVennAbers, VennAbers

floats01 = st.floats(0, 1, allow_nan=False)
any_float = st.floats(allow_nan=False, allow_infinity=False, width=64)


def bits(a):
    "The raw bits of a float array (NaNs of equal payload compare equal, -0.0 differs from 0.0)."
    return np.asarray(a, dtype=np.float64).view(np.uint64)


def assert_same_bits(a, b):
    np.testing.assert_array_equal(bits(a), bits(b))


def plain_json_only(v):
    "Is `v` made only of dicts with string keys, lists, strings, bools, None, ints and finite floats?"
    if isinstance(v, dict): return all(isinstance(k, str) and plain_json_only(x) for k, x in v.items())
    if isinstance(v, list): return all(plain_json_only(x) for x in v)
    if isinstance(v, float): return math.isfinite(v)
    return v is None or isinstance(v, (str, bool, int))


def file_round_trip(obj, tmp_path):
    "Save `obj`, check the file is strict plain JSON equal to `to_dict`, and load it back (typed and generic)."
    path = tmp_path / 'model.json'
    obj.save(path)
    text = path.read_text()
    d = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in the file"))
    assert plain_json_only(d) and d == obj.to_dict()
    assert [p.name for p in tmp_path.iterdir()] == ['model.json']       # no temporary file left
    back, generic = type(obj).load(path), portable.load(path)
    assert type(back) is type(obj) and type(generic) is type(obj)
    return back


# ---- the float codec ------------------------------------------------------------------------------------------

@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=30))
def test_float_codec_bit_exact(values):
    "Python's json (repr) plus the strings for non-finite values: every double reads back with the same bits."
    a = np.array(values, dtype=np.float64)
    text = json.dumps(encode_floats(a), allow_nan=False)
    f = portable.Fields({'a': json.loads(text)}, ('a',), 'state', 'test')
    back = f.floats('a', allow_empty=True)
    finite = np.isfinite(a)
    assert_same_bits(back[finite], a[finite])
    np.testing.assert_array_equal(np.isnan(back), np.isnan(a))
    np.testing.assert_array_equal(back[np.isinf(a)], a[np.isinf(a)])


# ---- VennAbers, CrossVennAbers --------------------------------------------------------------------------------

scores_labels = st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from([-1.5, -0.0, 0.0, 0.1, 0.3, 1e-300, 2.0]) | any_float, min_size=n, max_size=n),
    st.lists(st.integers(0, 1), min_size=n, max_size=n)))


@given(scores_labels, st.lists(any_float | st.just(-0.0), min_size=1, max_size=20))
def test_venn_abers_round_trip(tmp_path_factory, data, test_scores):
    s, y = data
    va = VennAbers().fit(s, y)
    back = file_round_trip(va, tmp_path_factory.mktemp('va'))
    for a, b in zip(va.predict_interval(test_scores), back.predict_interval(test_scores)): assert_same_bits(a, b)
    assert_same_bits(va.predict_proba(test_scores, merge='brier'), back.predict_proba(test_scores, merge='brier'))
    assert (back.n_samples_, back.n_positive_) == (len(s), sum(y))


@given(st.integers(2, 4).flatmap(lambda K: st.tuples(st.just(K), st.lists(
    st.tuples(any_float, st.integers(0, 1)), min_size=K, max_size=30))),
    st.lists(any_float, min_size=1, max_size=4))
def test_cross_venn_abers_round_trip(tmp_path_factory, data, test_col):
    K, rows = data
    s, y = zip(*rows)
    folds = np.arange(len(s)) % K
    cv = CrossVennAbers().fit(s, y, folds)
    back = file_round_trip(cv, tmp_path_factory.mktemp('cv'))
    t = np.tile(np.asarray(test_col)[:, None], (1, K))
    for a, b in zip(cv.predict_fold_intervals(t), back.predict_fold_intervals(t)): assert_same_bits(a, b)
    assert_same_bits(cv.predict_proba(t), back.predict_proba(t))


# ---- errors ---------------------------------------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path):
    "A saved VennAbers and its dict."
    va = VennAbers().fit([0.1, 0.4, 0.4, 0.8], [0, 1, 0, 1])
    path = tmp_path / 'va.json'
    va.save(path)
    return path, va.to_dict()


def write(path, d):
    path.write_text(json.dumps(d))
    return path


def test_newer_schema_fails_clearly(saved):
    path, d = saved
    d.update(schema_version=2, isocal_version='9.1', state={'something': 'new'}, extra='key')
    with pytest.raises(ValueError, match=r"va\.json: written by isocal 9\.1, schema 2; this isocal .* reads up to "
                                         r"schema 1: upgrade"):
        VennAbers.load(write(path, d))
    with pytest.raises(ValueError, match='upgrade'): portable.load(path)


def test_other_class_fails(saved):
    path, d = saved
    with pytest.raises(ValueError, match=r"va\.json: `class` is \"VennAbers\", but CrossVennAbers"):
        CrossVennAbers.load(path)
    d['class'] = 'os.system'
    with pytest.raises(ValueError, match=r"`class` names \"os.system\", which is not an isocal calibrator"):
        portable.load(write(path, d))


@pytest.mark.parametrize('edit, match', [
    (lambda d: d.pop('state'), r"the top-level object is missing the key\(s\) 'state'"),
    (lambda d: d.update(pickle='x'), r"the top-level object has unknown key\(s\) 'pickle'"),
    (lambda d: d['state'].pop('counts'), r"`state` is missing the key\(s\) 'counts'"),
    (lambda d: d['state'].update(p0_table=[0.0]), r"`state` has unknown key\(s\) 'p0_table'"),
    (lambda d: d['params'].update(merge='log'), r"`params` has unknown key\(s\) 'merge'"),
    (lambda d: d.update(format='other'), r"`format` must be 'isocal'"),
    (lambda d: d.update(schema_version='1'), r"`schema_version` must be an integer"),
    (lambda d: d.update(schema_version=True), r"`schema_version` must be an integer"),
    (lambda d: d.update(schema_version=0), r"`schema_version` must be at least 1"),
    (lambda d: d.update(isocal_version=1), r"`isocal_version` must be a string"),
    (lambda d: d['state'].update(scores='0.1'), r"`state.scores` must be a list of numbers"),
    (lambda d: d['state'].update(scores=[0.1, '0.4', 0.8]), r"`state.scores` must be a number"),
    (lambda d: d['state'].update(scores=[0.1, True, 0.8]), r"`state.scores` must be a number"),
    (lambda d: d['state'].update(scores=[0.1, 0.4]), r"`state` has `scores`, `counts`, `n_ones` of different"),
    (lambda d: d['state'].update(scores=[0.4, 0.1, 0.8]), r"`state.scores` must be finite and strictly increasing"),
    (lambda d: d['state'].update(scores=[0.1, 'nan', 0.8]), r"`state.scores` must be finite and strictly"),
    (lambda d: d['state'].update(counts=[1.0, 0.5, 1.0]), r"`state.counts` must be whole numbers >= 1"),
    (lambda d: d['state'].update(n_ones=[0.0, 3.0, 1.0]), r"`state.n_ones` must be whole numbers between 0"),
    (lambda d: d['state'].update(scores=[], counts=[], n_ones=[]), r"`state.scores` must not be empty"),
    (lambda d: d.update(state=[1]), r"`state` must be a JSON object"),
])
def test_bad_content_names_file_and_key(saved, edit, match):
    path, d = saved
    edit(d)
    with pytest.raises(ValueError, match=r"va\.json: " + match): VennAbers.load(write(path, d))
    with pytest.raises(PortableError, match=match): VennAbers.from_dict(d)


def test_cross_venn_abers_bad_fold_names_its_index(tmp_path):
    cv = CrossVennAbers().fit([0.1, 0.5, 0.3, 0.9], [0, 1, 0, 1], [0, 0, 1, 1])
    d = cv.to_dict()
    d['state']['folds'][1]['counts'] = [1.0, -1.0]
    with pytest.raises(ValueError, match=r"cv\.json: `state.folds\[1\].counts` must be whole numbers"):
        CrossVennAbers.load(write(tmp_path / 'cv.json', d))
    d['state']['folds'] = d['state']['folds'][:1]
    with pytest.raises(ValueError, match=r"`state.folds` must hold at least 2 folds"): CrossVennAbers.from_dict(d)


@pytest.mark.parametrize('cut', [0, 1, 10, -2])
def test_truncated_or_corrupt_file(saved, cut):
    path, _ = saved
    path.write_text(path.read_text()[:cut] + ('' if cut else ''))
    with pytest.raises(ValueError, match=r"va\.json: corrupt or truncated JSON"): VennAbers.load(path)


def test_bare_nan_and_binary_garbage_refused(saved):
    path, d = saved
    path.write_text(json.dumps(d).replace('0.1', 'NaN'))
    with pytest.raises(ValueError, match=r"va\.json: corrupt or truncated JSON \(bare NaN"): VennAbers.load(path)
    path.write_bytes(b'\x80\x04\x95pickle')
    with pytest.raises(ValueError, match=r"va\.json: not a UTF-8 JSON file"): VennAbers.load(path)
    path.write_text('[1, 2]')
    with pytest.raises(ValueError, match=r"va\.json: the top-level object must be a JSON object, got a list"): VennAbers.load(path)
    with pytest.raises(ValueError, match=r"missing\.json: cannot read the file"):
        VennAbers.load(path.parent / 'missing.json')


def test_unfitted_refused():
    with pytest.raises(ValueError, match='not fitted'): VennAbers().to_dict()
    with pytest.raises(ValueError, match='not fitted'): CrossVennAbers().save('unused.json')
    assert not os.path.exists('unused.json')


# ---- atomic save ----------------------------------------------------------------------------------------------

def test_failed_save_leaves_old_file_and_directory_intact(saved, monkeypatch):
    path, _ = saved
    other = path.parent / 'other.txt'
    other.write_text('keep me')
    old = path.read_bytes()

    def half_then_fail(fh, text):
        fh.write(text[:len(text) // 2])
        raise OSError('disk full')
    monkeypatch.setattr(portable, '_write_text', half_then_fail)
    new = VennAbers().fit([0.0, 1.0, 2.0], [1, 0, 1])
    with pytest.raises(OSError, match='disk full'): new.save(path)
    assert path.read_bytes() == old and other.read_text() == 'keep me'
    assert sorted(p.name for p in path.parent.iterdir()) == ['other.txt', 'va.json']
    monkeypatch.undo()
    new.save(path)
    assert VennAbers.load(path).n_samples_ == 3


def test_save_keeps_permissions(saved):
    path, _ = saved
    os.chmod(path, 0o640)
    VennAbers().fit([0.0, 1.0], [0, 1]).save(path)
    assert path.stat().st_mode & 0o777 == 0o640


# ---- files that are not plain targets (issue 30, "Files") -------------------------------------------------------

def read_fifo_in_thread(path, into):
    import threading
    def read(): into.append(open(path, 'rb').read())
    t = threading.Thread(target=read, daemon=True); t.start()
    return t


def test_save_into_a_fifo_writes_it_and_keeps_it(tmp_path):
    "A FIFO is written into, as the command line does, not replaced by a regular file"
    import stat
    fifo, got = tmp_path / 'pipe.json', []
    os.mkfifo(fifo)
    reader = read_fifo_in_thread(fifo, got)
    VennAbers().fit([0.1, 0.4, 0.8], [0, 1, 1]).save(fifo)
    reader.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(got[0])['class'] == 'VennAbers'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['pipe.json']


def null_device(path):
    "A character device node like /dev/null at `path` (root only: else the test is skipped)"
    import stat
    try: os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError) as e: pytest.skip(f'cannot make a device node here: {e}')
    return path


@pytest.mark.parametrize('through_link', [False, True])
def test_atomic_write_into_a_device_node_keeps_it(tmp_path, through_link):
    "A device node (a null device made in tmp_path) stays a device; a symbolic link to it stays a link"
    import stat
    dev = null_device(tmp_path / 'null')
    target = dev
    if through_link:
        target = tmp_path / 'link'
        target.symlink_to(dev)
    portable.atomic_write(target, 'hello\n')
    assert stat.S_ISCHR(os.lstat(dev).st_mode)
    if through_link: assert target.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({'null', target.name})


def test_save_through_a_symbolic_link_replaces_its_target(saved):
    "A link is written through: the file it names gets the new content, the link stays a link"
    path, _ = saved
    link = path.parent / 'link.json'
    link.symlink_to(path.name)
    VennAbers().fit([0.0, 1.0, 2.0], [1, 0, 1]).save(link)
    assert link.is_symlink() and VennAbers.load(path).n_samples_ == 3


def test_save_refuses_a_write_protected_file(saved):
    "A write-protected file is refused, as `cp` refuses it without -f (even as root), and kept as it was"
    path, _ = saved
    old = path.read_bytes()
    os.chmod(path, 0o444)
    with pytest.raises(PermissionError, match='write-protected'):
        VennAbers().fit([0.0, 1.0, 2.0], [1, 0, 1]).save(path)
    assert path.read_bytes() == old and path.stat().st_mode & 0o777 == 0o444
    assert sorted(p.name for p in path.parent.iterdir()) == ['va.json']


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    """SIGKILL leaves the temporary file of a write beside its target; the next write to that target removes it. A
    temporary file that another writer still holds (locked) is left alone."""
    import signal, subprocess, sys, fcntl
    target = tmp_path / 'out.json'
    code = ("import sys, time, isocal.portable as p\n"
            "def write(f):\n    f.write('partial'); f.flush(); print('writing', flush=True); time.sleep(600)\n"
            "p.replace_file(sys.argv[1], write, text=True)\n")
    proc = subprocess.Popen([sys.executable, '-c', code, str(target)], stdout=subprocess.PIPE, text=True)
    try: assert proc.stdout.readline() == 'writing\n'
    finally: proc.send_signal(signal.SIGKILL); proc.wait(); proc.stdout.close()
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith('.out.json.') and left[0].endswith('.tmp'), left
    busy = tmp_path / '.out.json.0123456789ab.tmp'   # another writer's, still being written: locked
    busy.write_text('busy')
    with open(busy) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        portable.atomic_write(target, 'new\n')
        assert sorted(p.name for p in tmp_path.iterdir()) == ['.out.json.0123456789ab.tmp', 'out.json']
    assert target.read_text() == 'new\n'


# ---- compact and gzip files ------------------------------------------------------------------------------------

def test_saved_file_is_compact_json(saved):
    "One line: no indentation, no spaces after separators (a model of 1M rows was 16 MB indented)"
    path, d = saved
    text = path.read_text()
    assert text.count('\n') == 1 and text.endswith('\n') and ', ' not in text and ': ' not in text
    assert json.loads(text) == d


def test_save_gzip_by_the_name(tmp_path):
    "A name ending in .gz is written gzip-compressed (reproducibly: no time stamp) and loaded back transparently"
    import gzip
    va = VennAbers().fit(np.linspace(0, 1, 200), np.arange(200) % 3 == 0)
    plain, packed = tmp_path / 'va.json', tmp_path / 'va.json.gz'
    va.save(plain); va.save(packed)
    raw = packed.read_bytes()
    assert raw[:2] == b'\x1f\x8b' and gzip.decompress(raw) == plain.read_bytes() and len(raw) < len(plain.read_bytes())
    va.save(packed)
    assert packed.read_bytes() == raw
    assert_same_bits(VennAbers.load(packed).predict_proba([0.3, 0.7]), va.predict_proba([0.3, 0.7]))
    assert type(portable.load(packed)) is VennAbers
    packed.write_bytes(raw[:len(raw) // 2])
    with pytest.raises(PortableError, match=r'va\.json\.gz: corrupt or truncated gzip'): portable.load(packed)


@pytest.mark.parametrize('text', ['[' * 100_000, '{"a":' * 100_000, '[' * 100_000 + ']' * 100_000])
def test_deeply_nested_json_is_a_malformed_file(tmp_path, text):
    "100k nested brackets: a PortableError naming the file, not a RecursionError"
    path = tmp_path / 'deep.json'
    path.write_text(text)
    for read in (portable.read_json, portable.load, VennAbers.load):
        with pytest.raises(PortableError, match=r'deep\.json: .*nested too deeply'): read(path)


def test_portable_does_not_import_sklearn():
    import subprocess, sys
    code = "import sys, isocal.portable; print(any(m.startswith('sklearn') for m in sys.modules))"
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == 'False'


# ---- IsotonicCalibrator ---------------------------------------------------------------------------------------

from hypothesis import assume  # noqa: E402

from isocal.convex import CustomLoss, Expectile, Lp, PseudoHuber  # noqa: E402
from isocal.isotonic import IsotonicCalibrator  # noqa: E402

iso_params = st.fixed_dictionaries({
    'increasing': st.sampled_from([True, False, 'auto']),
    'out_of_bounds': st.sampled_from(['nan', 'clip']),
    'ties': st.sampled_from(['primary', 'secondary', 'tertiary']),
    'interpolation': st.sampled_from(['linear', 'step', 'centered', 'strict']),
    'y_min': st.none() | st.floats(-2, 0.3), 'y_max': st.none() | st.floats(0.6, 3),
    'loss': st.sampled_from(['squared', 'logcosh', Expectile(0.3), PseudoHuber(0.5), Lp(1.5)])})
xy_rows = st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, -0.0, 1e-9, 3.0]) | st.floats(-5, 5),
                             st.floats(-1, 2), st.sampled_from([1.0, 0.5, 2.0, 0.0])), min_size=1, max_size=25)


@pytest.mark.filterwarnings('ignore:Confidence interval of the Spearman')
@given(iso_params, xy_rows, st.lists(st.floats(-6, 6) | st.sampled_from([0.25, -0.0, 3.0]), min_size=1, max_size=30))
def test_isotonic_round_trip(tmp_path_factory, params, rows, t):
    x, y, w = map(np.array, zip(*rows))
    assume(w.sum() > 0)
    try: cal = IsotonicCalibrator(**params).fit(x, y, sample_weight=w)
    except ValueError:                  # a documented refusal of the fit (e.g. tertiary ties with a convex loss)
        assume(False)
    back = file_round_trip(cal, tmp_path_factory.mktemp('iso'))
    assert_same_bits(back.predict(t), cal.predict(t))
    assert back.get_params() == cal.get_params() or repr(back.get_params()) == repr(cal.get_params())
    for attr in ('X_min_', 'X_max_', 'X_thresholds_', 'y_thresholds_'):
        assert_same_bits(getattr(back, attr), getattr(cal, attr))
    assert back.increasing_ == cal.increasing_


def test_isotonic_refuses_custom_loss():
    cal = IsotonicCalibrator(loss=Expectile(0.3)).fit([0.0, 1.0, 2.0], [0.0, 1.0, 0.5])
    cal.loss = CustomLoss(lambda z, y: z - y, name='mine')
    with pytest.raises(ValueError, match=r"`loss`=mine cannot be saved portably.*CustomLoss"): cal.to_dict()


def test_isotonic_unfitted_refused():
    with pytest.raises(ValueError, match='not fitted'): IsotonicCalibrator().to_dict()


@pytest.mark.parametrize('edit, match', [
    (lambda d: d['params'].update(loss='absolute'), r"`params.loss` is invalid: `loss` must be one of"),
    (lambda d: d['params'].update(loss={'class': 'CustomLoss', 'params': {}}), r"`params.loss.class` is not a loss"),
    (lambda d: d['params'].update(loss={'class': '__import__', 'params': {}}), r"`params.loss.class` is not a loss"),
    (lambda d: d['params'].update(loss={'class': 'Expectile', 'params': {'tau': 2.0}}),
     r"`params.loss.params` is invalid: `tau` must be in \(0, 1\)"),
    (lambda d: d['params'].update(loss={'class': 'Expectile', 'params': {}}),
     r"`params.loss.params` is missing the key\(s\) 'tau'"),
    (lambda d: d['params'].update(interpolation='cubic'), r"`params.interpolation` must be one of"),
    (lambda d: d['params'].update(increasing='yes'), r"`params.increasing` must be one of true, false, \"auto\""),
    (lambda d: d['params'].update(y_min=2.0, y_max=1.0), r"`params` is invalid: `y_min` \(2.0\) must not exceed"),
    (lambda d: d['params'].update(y_min='inf'), r"`params` is invalid: `y_min` must be a finite number"),
    (lambda d: d['state']['staircase'].update(levels=[1.0, 0.0]),
     r"`state.staircase` is invalid: `levels` must be non-decreasing"),
    (lambda d: d['state']['staircase'].update(x_lo=[0.0, 'nan']), r"`state.staircase` is invalid: `x_lo`"),
    (lambda d: d['state']['staircase'].update(interpolation='centered'), r"`state.staircase.interpolation` must"),
    (lambda d: d['state']['staircase'].pop('levels'), r"`state.staircase` is missing the key\(s\) 'levels'"),
    (lambda d: d['state'].update(X_min_=None), r"`state.X_min_` must be a number"),
])
def test_isotonic_bad_content(tmp_path, edit, match):
    d = IsotonicCalibrator(loss=Expectile(0.3)).fit([0.0, 1.0, 2.0], [0.0, 1.0, 0.5]).to_dict()
    edit(d)
    with pytest.raises(ValueError, match=r"iso\.json: " + match): IsotonicCalibrator.load(write(tmp_path / 'iso.json', d))


# ---- ThresholdLabeler -----------------------------------------------------------------------------------------

from isocal.labeler import ThresholdLabeler  # noqa: E402

label_sets = st.sampled_from([np.array([1, 2, 3]), np.array(['low', 'mid', 'high']), np.array([0.5, 1.5]),
                              np.array([False, True]), np.array([-3, 7, 9, 11], dtype=np.int16),
                              np.array(['b', 'a'], dtype=object)])


@given(label_sets, st.sampled_from(['absolute', 'squared', 'zero-one', 'matrix']), st.booleans(),
       st.lists(st.tuples(st.floats(-3, 3) | st.sampled_from([0.0, 1.0, -0.0]), st.integers(0, 9),
                          st.sampled_from([1.0, 0.25, 3.0])), min_size=1, max_size=30),
       st.lists(st.floats(-4, 4) | st.sampled_from([0.0, 1.0, -0.0, 3.0, -3.0]), min_size=1))
def test_labeler_round_trip(tmp_path_factory, classes, loss, give_classes, rows, t):
    K = len(classes)
    if loss == 'matrix': loss = np.abs(np.subtract.outer(np.arange(K), np.arange(K))) ** 1.5 + 0.125
    s, idx, w = map(np.array, zip(*rows))
    y = classes[idx % K]
    assume(give_classes or len(np.unique(y)) >= 2)
    lab = ThresholdLabeler(loss=loss, classes=classes if give_classes else None).fit(s, y, sample_weight=w)
    back = file_round_trip(lab, tmp_path_factory.mktemp('lab'))
    np.testing.assert_array_equal(back.predict(t), lab.predict(t))
    assert back.predict(t).dtype == lab.predict(t).dtype or lab.classes_.dtype == object
    assert_same_bits(back.thresholds_, lab.thresholds_)
    np.testing.assert_array_equal(back.classes_, lab.classes_)
    if not isinstance(loss, str): assert_same_bits(back.loss, loss)


def test_labeler_with_model_refused():
    from sklearn.linear_model import LinearRegression
    X, y = np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([1, 1, 2, 2])
    lab = ThresholdLabeler(model=LinearRegression().fit(X, y)).fit(X, y)
    with pytest.raises(ValueError, match=r"with a `model` \(LinearRegression\) cannot be saved portably"):
        lab.to_dict()


def test_labeler_unportable_labels_refused():
    lab = ThresholdLabeler().fit([0.0, 1.0], [1, 2])
    lab.classes_ = np.array([object(), object()], dtype=object)
    with pytest.raises(ValueError, match=r"`classes_` cannot be saved portably"): lab.to_dict()


@pytest.mark.parametrize('edit, match', [
    (lambda d: d['state'].update(thresholds_=[0.5]), r"`state.thresholds_` must hold 2 thresholds"),
    (lambda d: d['state'].update(thresholds_=[0.5, 'nan']), r"`state.thresholds_` must hold 2 thresholds"),
    (lambda d: d['state']['classes_'].update(dtype='object'), r"`state.classes_.dtype` must be one of"),
    (lambda d: d['state']['classes_'].update(values=['a', 2, 'c']), r"`state.classes_.values` must all be of dtype str"),
    (lambda d: d['state']['classes_'].update(dtype='uint8', values=[1, 2, 300]),
     r"`state.classes_.values` is invalid"),
    (lambda d: d['state']['classes_'].update(dtype='float16', values=[1, 2, 1e10]),
     r"`state.classes_.values` must be float16 values"),
    (lambda d: d['state']['classes_'].update(values=['a', 'a', 'c']), r"`state.classes_` must hold at least 2 distinct"),
    (lambda d: d['params'].update(loss=[[0.0, 1.0], [1.0]]), r"`params.loss` must be a rectangular list of lists"),
    (lambda d: d['params'].update(loss=3), r"`params.loss` must be a list of lists of numbers"),
    (lambda d: d['params'].update(n_jobs=1.5), r"`params.n_jobs` must be an integer"),
    (lambda d: d['params'].update(model=None), r"`params` has unknown key\(s\) 'model'"),
])
def test_labeler_bad_content(tmp_path, edit, match):
    d = ThresholdLabeler().fit([0.1, 0.5, 0.9], ['a', 'b', 'c']).to_dict()
    edit(d)
    with pytest.raises(ValueError, match=r"lab\.json: " + match): ThresholdLabeler.load(write(tmp_path / 'lab.json', d))


# ---- VennAbersCalibrator: refused -----------------------------------------------------------------------------

def test_venn_abers_calibrator_refused(tmp_path):
    from sklearn.naive_bayes import GaussianNB
    from isocal.calibration import VennAbersCalibrator
    X = np.r_[np.zeros(10), np.ones(10)][:, None] + np.arange(20)[:, None] * 0.01
    y = np.r_[np.zeros(10), np.ones(10)].astype(int)
    for est in (None, GaussianNB()):
        cal = VennAbersCalibrator(est, random_state=0).fit(X, y)
        name = 'LogisticRegression' if est is None else 'GaussianNB'
        with pytest.raises(ValueError, match=rf"cannot be saved or loaded portably: it holds fitted {name} "
                                             r"classifiers \(`estimators_`\).*does not pickle"):
            cal.to_dict()
        path = tmp_path / 'cal.json'
        path.write_text('old')
        with pytest.raises(ValueError, match='portably'): cal.save(path)
        assert path.read_text() == 'old' and [p.name for p in tmp_path.iterdir()] == ['cal.json']
    d = VennAbers().fit([0.1, 0.2], [0, 1]).to_dict()
    d.update({'class': 'VennAbersCalibrator'})
    with pytest.raises(ValueError, match=r"cal\.json: VennAbersCalibrator cannot be saved or loaded portably"):
        portable.load(write(tmp_path / 'cal.json', d))


def test_generic_load_ignores_user_classes_of_the_same_name(saved):
    "A class defined outside isocal (here with isocal's name) is never what `isocal.portable.load` builds."
    path, _ = saved

    class VennAbers(portable.Portable):         # noqa: F811 (deliberately shadowing the name)
        pass
    import isocal.venn_abers
    assert type(portable.load(path)) is isocal.venn_abers.VennAbers
    with pytest.raises(ValueError, match=r"`state` has unknown key"): VennAbers.load(path)


def test_generic_load_finds_multiclass(tmp_path):
    "`isocal.portable.load` imports isocal.multiclass from its fixed table to read a MulticlassCalibrator file."
    import subprocess, sys
    from isocal.multiclass import MulticlassCalibrator
    P = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6], [0.5, 0.3, 0.2]])
    MulticlassCalibrator().fit(P, [0, 1, 2, 1]).save(tmp_path / 'mc.json')
    code = ("import sys, isocal.portable as p; m = p.load(sys.argv[1]); "
            "assert type(m).__name__ == 'MulticlassCalibrator', m; print(m.predict_proba([[0.7, 0.2, 0.1]]).tolist())")
    out = subprocess.run([sys.executable, '-c', code, str(tmp_path / 'mc.json')], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    cal = MulticlassCalibrator.load(tmp_path / 'mc.json')
    assert json.loads(out.stdout) == cal.predict_proba([[0.7, 0.2, 0.1]]).tolist()
