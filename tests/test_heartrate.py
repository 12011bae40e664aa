import numpy as np
import pytest

from hbtool.analyzers import heart_rate


def test_heart_rate_window_definition():
    t = np.arange(0, 2.0, 0.1)  # 10 beats/s
    hr = heart_rate(t, w=10)
    assert np.isnan(hr[:10]).all()
    np.testing.assert_allclose(hr[10:], 10.0)


def test_heart_rate_too_few_beats_is_all_nan():
    assert np.isnan(heart_rate([0.0, 0.1, 0.2], w=10)).all()
    assert heart_rate([], w=10).size == 0


def test_heart_rate_repeated_timestamps_are_nan_not_inf():
    t = np.array([0.0] * 12 + [1.0])
    hr = heart_rate(t, w=2)
    assert not np.isinf(hr).any()
    assert np.isnan(hr[2:12]).all()
    assert hr[12] == pytest.approx(2.0)


def test_heart_rate_rejects_bad_window():
    with pytest.raises(ValueError):
        heart_rate([0.0, 1.0], w=0)
