"""A real JupyterLab in headless Chromium, for tests that look at what a person sees.

- ``chromium``: the path of the system's Chromium (Debian's ``chromium`` package). Where
  it is missing the browser tests skip, saying so -- except in CI (``CI`` set), where
  they fail: CI installs it (``.ci/run``).
- ``lab``: ``jupyter lab`` on a free loopback port with a random token, in a fresh
  folder with its own Jupyter config, data, runtime and settings directories (widget
  state saved with notebooks, as a user may have it) and its own memory directory.
- ``page``: a Playwright page in a fresh Chromium profile (``executable_path``: no
  browser download). When the test fails, a full-page screenshot is saved to
  ``tests/browser/artifacts/`` (git-ignored), and so is every shot the test takes.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(__file__).parent / "artifacts"
#: Flags that work on these machines (no sandbox as root, no network calls of its own).
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the browser tests (.ci/run installs it)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium() -> str:
    path = os.environ.get("JUPYTER_AGENT_CHROMIUM") or shutil.which("chromium") \
        or shutil.which("chromium-browser")
    if not path:
        _missing("Chromium is not installed (Debian: apt-get install chromium); "
                 "the browser tests need it")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _missing("the playwright package is not installed (pip install '.[test]')")
    return str(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Lab:
    """A running JupyterLab: its URL, token, notebook folder and memory directory."""

    url: str
    token: str
    root: Path
    memory_dir: Path
    settings_dir: Path

    def open_url(self, path: str) -> str:
        return f"{self.url}/lab/tree/{path}?token={self.token}"

    def write_notebook(self, name: str, cells: list[str]) -> Path:
        notebook = {
            "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None,
                       "outputs": [], "source": source} for source in cells],
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                        "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5,
        }
        path = self.root / name
        path.write_text(json.dumps(notebook), encoding="utf-8")
        return path


def _settings(directory: Path, plugin: str, values: dict[str, Any]) -> None:
    package, name = plugin.rsplit(":", 1)
    path = directory / package / f"{name}.jupyterlab-settings"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values), encoding="utf-8")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, chromium: str) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("lab")
    root, memory = base / "notebooks", base / "memory"
    root.mkdir()
    settings = base / "settings"
    _settings(settings, "@jupyter-widgets/jupyterlab-manager:plugin", {"saveState": True})
    # every cell stays rendered: off-screen cells skipped by content-visibility have no
    # innerText, and which cells are off-screen depends on how far Run All has scrolled
    _settings(settings, "@jupyterlab/notebook-extension:tracker",
              {"autoStartDefaultKernel": True, "windowingMode": "none"})
    _settings(settings, "@jupyterlab/apputils-extension:notification",
              {"fetchNews": "false", "checkForUpdates": False})
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "JPY_SESSION_NAME")}
    env.update(JUPYTER_CONFIG_DIR=str(base / "config"), JUPYTER_DATA_DIR=str(base / "data"),
               JUPYTER_RUNTIME_DIR=str(base / "runtime"), JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
               JUPYTER_AGENT_MEMORY_DIR=str(memory), JUPYTER_PLATFORM_DIRS="1")
    port, token = _free_port(), secrets.token_hex(16)
    log = (base / "lab.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--ServerApp.open_browser=False", "--allow-root"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("jupyter lab did not start:\n" +
                                       (base / "lab.log").read_text()) from None
                time.sleep(0.5)
        yield Lab(url, token, root, memory, settings)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser_context(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=chromium, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900})
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser_context: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    page = browser_context.new_page()
    page.set_default_timeout(60_000)
    yield page
    report = getattr(request.node, "report_call", None)
    if report is None or report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-failure.png"), full_page=True)
    page.close()

