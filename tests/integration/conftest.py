import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Everything under tests/integration talks to real services.
    for item in items:
        if "/tests/integration/" in str(item.path) and not item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.integration)
