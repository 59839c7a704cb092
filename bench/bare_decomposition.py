"""A floor for issue 28's first-call target: the smallest threshold decomposition, with none of isocal's certification.

`bench/convex.py --sections compile` compiles this module's `bare_fit` on an empty Numba cache next to
`isocal.convex`, so that the first call's compile time can be read against what any decomposition engine with the
same losses costs before it certifies anything. It is a reference, not an alternative: it sums in plain double
precision, decides every pass on that rounded sum (no double-double, no exact sums for close calls, no frozen sums, no
staircase or cusp handling), trusts Newton steps blindly within the bracket, and so can return levels off by more
than the rounding of their block's sums; nothing in isocal imports it.

The engine is the one 02c derives, with isocal's own loss switch (`_d12`): a segment s..e-1 with fitted values in
(lo, hi] takes one Newton step on its pooled derivative, then a pass at that threshold z finds the largest cut k
maximising the prefix sums of w l'(z; y); the segment splits at k (or shrinks to one side of z) until (lo, hi] holds
one double.
"""
import os

import numpy as np
from numba import njit

from isocal.derivatives import _d12   # isocal's own loss switch, inlined as in its kernels


@njit(cache=True)
def _moments(code, params, y, w, s, e, z):
    "(Σ w l', Σ w l'') over s..e-1 at z."
    D = H = 0.0
    for i in range(s, e):
        d, h = _d12(code, params, z, y[i])
        D += w[i] * d
        H += w[i] * h
    return D, H


@njit(cache=True)
def _best_cut(code, params, y, w, s, e, z):
    "The largest k in s..e maximising Σ_{s<=i<k} w l'(z; y_i), in plain double precision."
    P = best = 0.0
    kb = s
    for i in range(s, e):
        d, _ = _d12(code, params, z, y[i])
        P += w[i] * d
        if P >= best:
            best, kb = P, i + 1
    return kb


@njit(cache=True)
def bare_fit(code, params, y, w, lo, hi):
    "Increasing fit of y (weights w) with levels in (lo, hi]: the decomposition above, depth first."
    x = np.empty_like(y)
    stack = np.empty((64, 4))
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = 0.0, y.shape[0], lo, hi
    top = 1
    while top > 0:
        if top == stack.shape[0]:
            stack = np.concatenate((stack, np.empty_like(stack)))
        row = stack[top - 1]
        s, e, lo, hi = int(row[0]), int(row[1]), row[2], row[3]
        z = 0.5 * lo + 0.5 * hi
        if z <= lo or z >= hi:
            x[s:e] = hi
            top -= 1
            continue
        D, H = _moments(code, params, y, w, s, e, z)
        if H > 0.0 and lo < z - D / H < hi:
            z = z - D / H
        k = _best_cut(code, params, y, w, s, e, z)
        if k == e: row[3] = z
        elif k == s: row[2] = z
        else:
            row[0], row[2] = k, z
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = s, k, lo, z
            top += 1
    return x


FIRST_CALL = rf'''
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import numpy as np
from bare_decomposition import bare_fit
from isocal.derivatives import _PSEUDO_HUBER
x = bare_fit(_PSEUDO_HUBER, np.array([1.0]), np.array([3., 1., 2.]), np.ones(3), 0.5, 3.0)
assert np.allclose(x, 2.0), x
'''
