"""Shared test set-up: the `slow` marker and the path of the shared data."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = pathlib.Path(os.environ.get("T2T_SHARED_DATA", ROOT.parent / "shared" / "data"))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the slow end-to-end tests (CI does)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"the shared data folder is missing: {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def multi30k_data_dir(shared_data, tmp_path_factory):
    """The full Multi30k datagen, run once per session (slow tests share it).

    Returns (data_dir, seconds the datagen took).
    """
    import time

    import problems  # noqa: F401  (registration)
    from t2t_revival.registry import problems as registered

    data_dir = tmp_path_factory.mktemp("multi30k_data")
    start = time.time()
    registered.get("translate_ende_multi30k")(download=False).generate_data(
        str(data_dir), str(shared_data / "multi30k"))
    return data_dir, time.time() - start
