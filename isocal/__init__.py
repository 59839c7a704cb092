__version__ = "0.0.1"
"""isocal: isotonic calibration, exact and fast.

The main API is importable from the package itself, `from isocal import isotonic_regression, IsotonicCalibrator,
VennAbers`, and `import isocal` stays fast: each name is imported from its module on first use (PEP 562), so Numba,
scikit-learn and matplotlib load only when a name that needs them is touched. `dir(isocal)` and `isocal.__all__` list
every name; type checkers and IDEs see them through the imports under `TYPE_CHECKING`.

This file is the one module of the package written by hand (nbdev exports every other one from `nbs/`).
"""
from importlib import import_module
from typing import TYPE_CHECKING

_HOME = {
    'isotonic_regression': 'pava', 'IsotonicResult': 'pava', 'Staircase': 'pava', 'fit_staircase': 'fit',
    'IsotonicCalibrator': 'isotonic',
    'isotonic_convex': 'convex', 'anytime_isotonic': 'convex', 'get_loss': 'convex',
    'OnlineIsotonic': 'online',
    'VennAbers': 'venn_abers', 'CrossVennAbers': 'venn_abers', 'VennAbersCalibrator': 'calibration',
    'MulticlassCalibrator': 'multiclass',
    'forward_predict': 'forward', 'loo_predictions': 'forward', 'excess_loo': 'forward',
    'optimal_thresholds': 'thresholds', 'ThresholdLabeler': 'labeler',
    'aum_line_search': 'aum', 'aum_gradient_descent': 'aum',
    'log_loss': 'metrics', 'brier_score': 'metrics', 'expected_calibration_error': 'metrics',
    'reliability_diagram': 'metrics', 'calibration_report': 'metrics',
    'corp_recalibrate': 'diagnostics', 'score_decomposition': 'diagnostics', 'miscalibration_test': 'diagnostics',
    'corp_reliability_diagram': 'diagnostics',
    'load': 'portable',
}
__all__ = sorted(_HOME)


def __getattr__(name):
    "Import a top-level name from its module on first use, then keep it here."
    if name not in _HOME: raise AttributeError(f"module 'isocal' has no attribute {name!r}")
    value = getattr(import_module(f'.{_HOME[name]}', __name__), name)
    globals()[name] = value
    return value


def __dir__(): return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .aum import aum_gradient_descent, aum_line_search
    from .calibration import VennAbersCalibrator
    from .convex import anytime_isotonic, get_loss, isotonic_convex
    from .diagnostics import corp_recalibrate, corp_reliability_diagram, miscalibration_test, score_decomposition
    from .fit import fit_staircase
    from .forward import excess_loo, forward_predict, loo_predictions
    from .isotonic import IsotonicCalibrator
    from .labeler import ThresholdLabeler
    from .metrics import brier_score, calibration_report, expected_calibration_error, log_loss, reliability_diagram
    from .multiclass import MulticlassCalibrator
    from .online import OnlineIsotonic
    from .pava import IsotonicResult, Staircase, isotonic_regression
    from .portable import load
    from .thresholds import optimal_thresholds
    from .venn_abers import CrossVennAbers, VennAbers
