"""The device the tests/device tensors live on: the CPU, or MULTIDRAFT_TEST_DEVICE (e.g. ``cuda``) to
run the same tests on an accelerator (``MULTIDRAFT_TEST_DEVICE=cuda pytest tests/device``)."""
import os

import pytest

DEVICE = os.environ.get("MULTIDRAFT_TEST_DEVICE", "cpu")


@pytest.fixture(autouse=True)
def default_device():
    """Factory calls without a device (torch.tensor, torch.randn, ...) make tensors on DEVICE."""
    torch = pytest.importorskip("torch")
    previous = torch.get_default_device()
    torch.set_default_device(DEVICE)
    yield torch.device(DEVICE)
    torch.set_default_device(previous)


@pytest.fixture(autouse=True)
def device_path(monkeypatch):
    """CPU tensors here take exactly the path of an accelerator's tensors (not the host path that
    multidraft._device.CPU_ON_HOST gives them in use)."""
    monkeypatch.setattr("multidraft._device.CPU_ON_HOST", False)
