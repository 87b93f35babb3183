"""L2-regularized logistic regression by Newton's method: the one fit behind the gate's and
abstention's calibration (calibration.py) and the learned router (learned/model.py).

Why hand-written and not scikit-learn: both fits have a handful of standardized features and at
most ~100k rows, where Newton's method (IRLS) on this convex objective converges in a few steps to
the exact optimum, deterministically (the same rows give the same weights, bit for bit); and
scikit-learn with SciPy was ~195 MB of the default install's 1,031 MiB for these ~20 lines (issue
33's ≤ 1 GB install). The objective is scikit-learn's `LogisticRegression(C=1/l2)`:
0.5·l2·|w|² + Σ sᵢ·logloss(xᵢ·w + b, yᵢ), the bias not penalized, with optional sample weights sᵢ
("balanced": n / (2·count of the row's class)); tests/gateway/query/test_logistic.py checks it
reaches scikit-learn's weights.
"""
from __future__ import annotations

import numpy as np

STEPS = 50
TOLERANCE = 1e-10


def balanced_weights(y: np.ndarray) -> np.ndarray:
    """scikit-learn's class_weight="balanced": each class weighs as much in all as the other."""
    labels = np.asarray(y, dtype=bool)
    n, positives = len(labels), int(labels.sum())
    if positives in (0, n):
        raise ValueError("balanced weights need both classes")
    return np.where(labels, n / (2.0 * positives), n / (2.0 * (n - positives)))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0,
                 sample_weight: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """(weights, bias) minimizing the objective above on rows `x` (already standardized) and 0/1 labels `y`."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, d = x.shape
    s = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    a = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    penalty = np.full(d + 1, float(l2))
    penalty[-1] = 0.0
    for _ in range(STEPS):
        p = 1.0 / (1.0 + np.exp(-(a @ w)))
        grad = a.T @ (s * (p - y)) + penalty * w
        hess = (a * (s * p * (1 - p))[:, None]).T @ a + np.diag(penalty) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.max(np.abs(step))) < TOLERANCE:
            break
    return w[:-1], float(w[-1])
