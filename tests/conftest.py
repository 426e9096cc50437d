"""Fresh random inputs for every test, with the seed reported on failure."""

import random

import pytest
import torch


@pytest.fixture(autouse=True)
def fresh_seed(request):
    seed = random.SystemRandom().randrange(2**31)
    torch.manual_seed(seed)
    request.node.user_properties.append(("torch_seed", seed))
    yield seed


def pytest_runtest_makereport(item, call):
    if call.excinfo is not None:
        for key, value in item.user_properties:
            if key == "torch_seed":
                item.add_report_section(call.when, "seed", f"torch.manual_seed({value}) reproduces this run")
