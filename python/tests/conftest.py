"""The tests run against a real node: CAIRN_ENDPOINT, CAIRN_ACCESS_KEY and
CAIRN_SECRET_KEY name it (internal/node's TestPythonSDK starts one and
runs them). Each test gets a space of its own."""

import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import cairn  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("CAIRN_ENDPOINT"):
        skip = pytest.mark.skip(reason="CAIRN_ENDPOINT is not set (internal/node's TestPythonSDK runs these against a node)")
        for item in items:
            if "offline" not in item.keywords:
                item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "offline: needs no node")


@pytest.fixture
def client():
    c = cairn.Client()
    yield c
    c.close()


@pytest.fixture
def space(client):
    name = "py-" + uuid.uuid4().hex[:12]
    client.create_space(name)
    return name
