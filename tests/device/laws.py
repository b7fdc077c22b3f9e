"""Helpers shared by the device tests."""
import numpy as np


def normalised(values) -> np.ndarray:
    """``values`` as a float64 law: divided by their sum."""
    values = np.asarray(values, dtype=np.float64)
    return values / values.sum()
