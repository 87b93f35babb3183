"""The one logistic fit (gateway.query.logistic) against scikit-learn, its reference: hansa fits
without it (no scikit-learn in the default install); scikit-learn is a test dependency."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from hansa.gateway.query.logistic import balanced_weights, fit_logistic


def _rows(seed: int, n: int = 400, d: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    logits = x @ rng.normal(size=d) + 0.3 * rng.normal(size=n) - 0.8
    return x, (rng.random(n) < 1 / (1 + np.exp(-logits)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_balanced_fit_reaches_scikit_learns_optimum(seed: int) -> None:
    x, y = _rows(seed)
    coef, bias = fit_logistic(x, y, l2=1.0, sample_weight=balanced_weights(y))
    ref = LogisticRegression(C=1.0, class_weight="balanced", tol=1e-10, max_iter=10_000).fit(x, y)
    assert np.allclose(coef, ref.coef_[0], atol=1e-5) and bias == pytest.approx(float(ref.intercept_[0]), abs=1e-5)


def test_unweighted_fit_with_a_stronger_penalty_reaches_scikit_learns_optimum() -> None:
    x, y = _rows(7)
    coef, bias = fit_logistic(x, y, l2=4.0)
    ref = LogisticRegression(C=0.25, tol=1e-10, max_iter=10_000).fit(x, y)
    assert np.allclose(coef, ref.coef_[0], atol=1e-5) and bias == pytest.approx(float(ref.intercept_[0]), abs=1e-5)


def test_balanced_weights_give_each_class_half_the_total_weight() -> None:
    y = np.array([True, False, False, False])
    w = balanced_weights(y)
    assert w[y].sum() == pytest.approx(w[~y].sum()) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="both classes"):
        balanced_weights(np.array([True, True]))
