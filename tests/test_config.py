"""tp.config reads its defaults from the environment."""

import importlib

import tripy.config as config


def _reloaded(monkeypatch, **env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        return importlib.reload(config)
    finally:
        monkeypatch.undo()


def test_defaults(monkeypatch):
    monkeypatch.delenv("TRIPY_EXTRA_ERROR_INFORMATION", raising=False)
    monkeypatch.delenv("TRIPY_DEVICE", raising=False)
    fresh = importlib.reload(config)
    assert fresh.enable_input_validation is True
    assert fresh.extra_error_information == []
    assert fresh.default_device is None


def test_environment_overrides(monkeypatch):
    fresh = _reloaded(monkeypatch, TRIPY_EXTRA_ERROR_INFORMATION="all, ir", TRIPY_DEVICE="cpu")
    assert fresh.extra_error_information == ["all", "ir"]
    assert fresh.default_device == "cpu"
    importlib.reload(config)
