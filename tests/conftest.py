"""Every test runs on the CPU unless it is marked cuda, so the suite's result does not depend on the
machine; a cuda test runs on the GPU and is skipped without one."""

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: runs on a GPU, skipped without one")


@pytest.fixture(autouse=True)
def cpu_unless_marked_cuda(request, monkeypatch):
    if request.node.get_closest_marker("cuda"):
        if not HAS_CUDA:
            pytest.skip("needs a GPU")
        return
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # and so do the scripts a test starts
