import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cairn  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("CAIRN_ENDPOINT"):
        skip = pytest.mark.skip(reason="CAIRN_ENDPOINT is not set (internal/node's TestPythonSDK runs these against a node)")
        for item in items:
            item.add_marker(skip)


@pytest.fixture
def space():
    c = cairn.Client()
    name = "shop-" + uuid.uuid4().hex[:12]
    c.create_space(name)
    c.close()
    return name
