"""The peers' own test suites, run against isocal: "drop-in" means the peer's own tests pass.

What runs
* scikit-learn's `sklearn/tests/test_isotonic.py`, with `IsotonicRegression` rebound to
  `isocal.isotonic.IsotonicCalibrator`;
* SciPy's `scipy/optimize/tests/test_isotonic_regression.py`, with `isotonic_regression` rebound to
  `isocal.pava.isotonic_regression`.
Both files are read from the installed packages at test time; none of the peers' test code is copied here, so
upgrading scikit-learn or SciPy runs their new tests against isocal.

How, and why this way
Each peer file is executed as a fresh, private module object (`importlib.util.module_from_spec` on the installed
file; it is not put in `sys.modules`, so nothing else sees the rebinding). Once its own imports have run, the peer's
name is rebound in that module's globals, which is where the peer's test functions look it up when called. Every
`test*` function and every `test*` method of a `Test*` class becomes one case of `test_peer` per combination of its
`pytest.mark.parametrize` marks, expanded here in pytest's order and with pytest-style ids
(`sklearn::test_isotonic_dtype[float32]`); the peer's other marks (`skipif`, `filterwarnings`, ...) are carried
over. This is simpler and sturdier than running pytest in a subprocess on the installed file: no second interpreter,
no dependence on the peers' conftest files or on the peers' pytest configuration, tracebacks point into the peer's
file, and each case can carry its own `xfail(strict=True)`. The one thing it does not provide is pytest fixtures: a
peer test asking for one makes collection fail loudly (see `_function_cases`) rather than being dropped silently.

Selection
`EXCLUDED` lists the peer tests that do not exercise the substituted API (they test a private helper of the peer, or
another public function of the peer that isocal does not replace), each with its reason; `test_included_peer_tests_
use_isocal` checks that every other peer test does reference the rebound name, so none passes vacuously.
`EXPECTED_DIFFERENCES` lists every remaining failing case with its reason; those cases are `xfail(strict=True)`, so a
difference that disappears fails the suite until its entry is removed. `test_lists_name_existing_peer_tests` keeps
both lists from going stale when a peer renames or drops a test.
"""
import importlib.util
import inspect
import itertools
from dataclasses import dataclass, field

import pytest

import isocal.isotonic
import isocal.pava

PEERS = {   # short name: (installed test module, {peer name: isocal object put in its place})
    'sklearn': ('sklearn.tests.test_isotonic', {'IsotonicRegression': isocal.isotonic.IsotonicCalibrator}),
    'scipy': ('scipy.optimize.tests.test_isotonic_regression',
              {'isotonic_regression': isocal.pava.isotonic_regression}),
}

# Peer tests (function names) that do not belong here: they never touch the substituted API.
EXCLUDED = {
    'sklearn::test_check_increasing_small_number_of_samples': "tests sklearn.isotonic.check_increasing, scikit-learn's "
        "Spearman helper; isocal does not replace it (IsotonicCalibrator(increasing='auto') calls it)",
    'sklearn::test_check_increasing_up': "tests sklearn.isotonic.check_increasing (not replaced by isocal)",
    'sklearn::test_check_increasing_up_extreme': "tests sklearn.isotonic.check_increasing (not replaced by isocal)",
    'sklearn::test_check_increasing_down': "tests sklearn.isotonic.check_increasing (not replaced by isocal)",
    'sklearn::test_check_increasing_down_extreme': "tests sklearn.isotonic.check_increasing (not replaced by isocal)",
    'sklearn::test_check_ci_warn': "tests sklearn.isotonic.check_increasing (not replaced by isocal)",
    'sklearn::test_isotonic_ymin_ymax': "tests only the function sklearn.isotonic.isotonic_regression(y, "
        "sample_weight, y_min, y_max, increasing), whose API isocal does not offer (isocal.pava.isotonic_regression "
        "is SciPy's API; its y_min/y_max are IsotonicCalibrator's, run by the other tests here)",
    'sklearn::test_fast_predict': "calls the private IsotonicRegression._build_y/_build_f to build its reference",
    'sklearn::test_make_unique_dtype': "tests the private helper sklearn.isotonic._make_unique",
    'sklearn::test_make_unique_tolerance': "tests the private helper sklearn.isotonic._make_unique",
    'scipy::TestIsotonicRegression::test_simple_pava': "tests SciPy's private C++ kernel "
        "scipy.optimize._pava_pybind.pava (in-place buffers)",
}

# Every case that still fails, with the reason: xfail(strict=True).
_WORDING = ("raises the peer's exception type (ValueError) for the same input, worded isocal's way: the message names "
            "the argument the user passed, in backticks, and what is wrong with it (isocal's convention for bad "
            "input); the peer's `pytest.raises(match=...)` regex matches only the peer's own wording. ")
_SCIPY_SHAPE = _WORDING + "isocal names the argument that is not one-dimensional or has the wrong length: "
EXPECTED_DIFFERENCES = {
    'sklearn::test_assert_raises_exceptions': _WORDING + "'length mismatch: `sample_weight` has 2, the data has 3', "
        "'length mismatch: `X` has 3, `y` has 2', '`X` must be 1-D or a single column (n, 1), got shape (3, 10)'; "
        "transform of 2-D input before fit raises NotFittedError (a ValueError), fittedness being checked first",
    'sklearn::test_isotonic_regression_oob_raise': _WORDING + "'`T` has -10.0 at index 0, outside the fitted range "
        "[0.0, 6.0] (out_of_bounds='raise')' (`T` is predict's argument)",
    'sklearn::test_isotonic_2darray_more_than_1_feature': _WORDING + "'`X` (fit) / `T` (predict, transform) must be "
        "1-D or a single column (n, 1), got shape (10, 2)'",
    **{f'sklearn::test_get_feature_names_out[{shape}]': "the output feature is named after the estimator's class, "
       "as scikit-learn names it ('isotonicregression0'); isocal's class is IsotonicCalibrator, hence "
       "'isotoniccalibrator0'" for shape in ('1d', '2d')},
    'scipy::TestIsotonicRegression::test_raise_error[y0-None-array has incorrect number of dimensions: 2; expected 1]':
        _SCIPY_SHAPE + "'`y` must be one-dimensional, got shape (1, 2)'",
    'scipy::TestIsotonicRegression::test_raise_error[y1-w1-Input arrays y and w must have one dimension of equal '
    'length]': _SCIPY_SHAPE + "'`weights` must be one-dimensional, got shape (1, 2)'",
    'scipy::TestIsotonicRegression::test_raise_error[y2-w2-Input arrays y and w must have one dimension of equal '
    'length]': _SCIPY_SHAPE + "'length mismatch: `weights` has 1, the data has 2'",
    'scipy::TestIsotonicRegression::test_raise_error[1-w3-Input arrays y and w must have one dimension of equal '
    'length]': _SCIPY_SHAPE + "'`y` must be one-dimensional, got shape ()'",
    'scipy::TestIsotonicRegression::test_raise_error[y4-1-Input arrays y and w must have one dimension of equal '
    'length]': _SCIPY_SHAPE + "'`weights` must be one-dimensional, got shape ()'",
    'scipy::TestIsotonicRegression::test_raise_error[y5-w5-Weights w must be strictly positive]': "deliberate: "
        "isocal.pava.isotonic_regression accepts zero weights (documented): a zero-weight sample does not affect the "
        "fit and takes the level of the block on its left (of the first block if it has none), so weights from a "
        "mask or from counts that can be 0 need no filtering; only negative, non-finite or all-zero weights raise",
}


# ================================================================================ loading and expanding the peers

def load_peer(module_name, substitutes):
    "A private copy of the installed test module `module_name` with the names in `substitutes` rebound."
    spec = importlib.util.find_spec(module_name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    missing = [name for name in substitutes if not hasattr(module, name)]
    if missing: raise RuntimeError(f"{module_name} no longer imports {missing}: the substitution would be a no-op")
    for name, obj in substitutes.items(): setattr(module, name, obj)
    return module


_ParameterSet = type(pytest.param())


def _param_id(value, argname, index, ids_function=None):
    "pytest's id of one parameter value: from the peer's `ids` function if it gives one, else automatic."
    custom = ids_function(value) if ids_function is not None else None
    if custom is not None: return str(custom)
    if isinstance(value, str): return value.encode('unicode_escape').decode('ascii')
    if value is None or isinstance(value, (bool, int, float, complex)): return str(value)
    if isinstance(getattr(value, '__name__', None), str): return value.__name__
    return f'{argname}{index}'


def _argnames(mark):
    names = mark.args[0]
    return [s.strip() for s in names.split(',') if s.strip()] if isinstance(names, str) else list(names)


def _parametrize_options(mark):
    "(argument dict, id, marks) for each value of one `parametrize` mark."
    names = _argnames(mark)
    ids = mark.kwargs.get('ids', mark.args[2] if len(mark.args) > 2 else None)
    ids_function = ids if callable(ids) else None
    single = isinstance(mark.args[0], str) and len(names) == 1     # pytest's force_tuple: values are not tuples
    for i, value in enumerate(mark.args[1]):
        if isinstance(value, _ParameterSet): values, marks, pid = value.values, list(value.marks), value.id
        else: values, marks, pid = ((value,) if single else tuple(value)), [], None
        if pid is None and ids is not None and ids_function is None: pid = ids[i]
        if pid is None: pid = '-'.join(_param_id(v, n, i, ids_function) for n, v in zip(names, values))
        yield dict(zip(names, values)), str(pid), marks


@dataclass
class PeerCase:
    "One parameter combination of one peer test: `run()` calls it (on a fresh instance of its class, if any)."
    peer: str
    test: str            # 'test_x' or 'TestX::test_x', as in pytest's node id
    func: object
    cls: object = None
    kwargs: dict = field(default_factory=dict)

    def run(self):
        if self.cls is None: return self.func(**self.kwargs)
        instance = self.cls()
        if hasattr(instance, 'setup_method'): instance.setup_method(self.func)
        try: self.func(instance, **self.kwargs)
        finally:
            if hasattr(instance, 'teardown_method'): instance.teardown_method(self.func)


def _marks_of(obj):
    "The marks set on a function, class or module (a module's `pytestmark` may be a single mark)."
    marks = getattr(obj, 'pytestmark', [])
    return list(marks) if isinstance(marks, (list, tuple)) else [marks]


def _function_cases(peer, module, test, func, cls=None):
    "The pytest.param of each parametrize combination of `func`, with the peer's other marks carried over."
    marks = _marks_of(func)
    parametrize = [m for m in marks if m.name == 'parametrize']
    others = _marks_of(module) + _marks_of(cls) + [m for m in marks if m.name != 'parametrize']
    argnames = {n for m in parametrize for n in _argnames(m)}
    wanted = [p for p in inspect.signature(func).parameters if p != 'self' and p not in argnames]
    if wanted:
        raise RuntimeError(f"{peer}::{test} needs the pytest fixtures {wanted}, which test_peer_suites.py does not "
                           "provide: provide them there or exclude the test with a reason")
    for combo in itertools.product(*(list(_parametrize_options(m)) for m in parametrize)):
        kwargs = {k: v for args, _, _ in combo for k, v in args.items()}
        suffix = '-'.join(pid for _, pid, _ in combo)
        case_id = f"{peer}::{test}" + (f"[{suffix}]" if combo else '')
        case_marks = others + [m for _, _, ms in combo for m in ms]
        if case_id in EXPECTED_DIFFERENCES:
            case_marks.append(pytest.mark.xfail(strict=True, reason=EXPECTED_DIFFERENCES[case_id]))
        yield pytest.param(PeerCase(peer, test, func, cls, kwargs), id=case_id, marks=case_marks)


def _defined_here(obj, module): return getattr(obj, '__module__', None) == module.__name__


def peer_tests(peer, module):
    "(test name, function, class or None) of every test pytest would collect from `module`, in file order."
    for name, obj in vars(module).items():
        if name.startswith('test') and inspect.isfunction(obj) and _defined_here(obj, module):
            yield name, obj, None
        elif name.startswith('Test') and inspect.isclass(obj) and _defined_here(obj, module):
            for mname, meth in vars(obj).items():
                if mname.startswith('test') and inspect.isfunction(meth): yield f"{name}::{mname}", meth, obj


MODULES = {peer: load_peer(module_name, subs) for peer, (module_name, subs) in PEERS.items()}
ALL_TESTS = {f"{peer}::{test}": (peer, test, func, cls)
             for peer, module in MODULES.items() for test, func, cls in peer_tests(peer, module)}
CASES = [case for key, (peer, test, func, cls) in ALL_TESTS.items() if key not in EXCLUDED
         for case in _function_cases(peer, MODULES[peer], test, func, cls)]


# ================================================================================ the peers' tests

@pytest.mark.parametrize('case', CASES)
def test_peer(case):
    case.run()


# ================================================================================ keeping the lists honest

def _names_used(code):
    "Global names read by `code` and the functions, lambdas and comprehensions nested in it."
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const): names |= _names_used(const)
    return names


def test_included_peer_tests_use_isocal():
    "Every peer test that is run reads a rebound name (else it would test the peer, not isocal)."
    for key, (peer, test, func, cls) in ALL_TESTS.items():
        if key in EXCLUDED: continue
        module, substitutes = MODULES[peer], PEERS[peer][1]
        assert all(getattr(module, name) is obj for name, obj in substitutes.items())
        assert _names_used(func.__code__) & set(substitutes), f"{key} does not use {set(substitutes)}: exclude it"


def test_lists_name_existing_peer_tests():
    case_ids = {case.id for case in CASES}
    assert len(case_ids) == len(CASES), "two peer cases share an id"
    assert set(EXCLUDED) <= set(ALL_TESTS), f"stale EXCLUDED entries: {set(EXCLUDED) - set(ALL_TESTS)}"
    stale = set(EXPECTED_DIFFERENCES) - case_ids
    assert not stale, f"EXPECTED_DIFFERENCES names cases that no longer exist (or are excluded): {stale}"
    assert len(CASES) > len(ALL_TESTS) - len(EXCLUDED), "parametrized peer tests were not expanded"
