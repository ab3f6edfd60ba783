"""The notebooks as a designer sees them: JupyterLab headless, each notebook opened in headless Chromium.

Opened untrusted (JupyterLab started by hand on a fresh checkout), a widget reads "run the notebook ... to use it",
never its repr `VBox(children=...`. Trusted, as `make lab` makes them, every widget is drawn from the state saved
in the notebook. Then the notebook runs (on the small parameters of tests/notebooks/test_notebooks.py, injected into
a copy: the committed notebooks are never written), no cell may show an error or a widget that failed to render, and the
main widgets are used: the rule builder refuses a rule without type and saves one, the simulator simulates, the
replay explorer replays, the liability comparison compares; each must show a new result. Screenshots go to
reports/screenshots/ (<notebook>-untrusted.png, -before.png, -after.png; each main widget -saved, -before, -after).

Chromium is Debian's (`/usr/bin/chromium`, or `REWARDS_LAB_CHROMIUM`; `make setup` installs it), driven by
Playwright for Python (a dev dependency; Playwright's own browsers are never downloaded). Without Chromium or
Playwright the test fails, as `make test` installs both; `REWARDS_LAB_SKIP_BROWSER=1` turns that into a skip that
says why, for machines that cannot have them.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import nbformat
import pytest

from rewards_lab.lab import report
from tests.notebooks.test_notebooks import SMALL

SCREENSHOTS = report.REPORTS / "screenshots"
SKIP_VARIABLE = "REWARDS_LAB_SKIP_BROWSER"
CHROMIUM = os.environ.get("REWARDS_LAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
NOTEBOOKS = report.notebooks()

# What a widget looks like when it was not drawn: its text repr, or the manager's messages.
WIDGET_AS_TEXT = re.compile(r"\b(VBox|HBox|Box|Button|Dropdown|Output|HTML|Image)\(children=|\bVBox\(|\bHBox\(")
WIDGET_ERROR = "[style*='#b00']"  # a widget's error message (rewards_lab.lab.widgets.error_html)
WIDGET_FAILED = ("Error displaying widget", "Loading widget...", "Failed to load model class")

# The state of the notebook in the page: is the kernel idle, how many code cells ran, are any still queued.
NOTEBOOK_STATE = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    if (!panel || !panel.content || !panel.sessionContext || !panel.sessionContext.session) return null;
    const kernel = panel.sessionContext.session.kernel;
    const cells = panel.content.widgets.filter((cell) => cell.model.type === 'code');
    return {
        status: kernel ? kernel.status : 'none',
        code: cells.length,
        ran: cells.filter((cell) => cell.model.executionCount !== null).length,
        queued: cells.filter((cell) => cell.promptNode && cell.promptNode.textContent.includes('*')).length,
    };
}"""


def _need_chromium() -> None:
    reason = None
    if not Path(CHROMIUM).exists():
        reason = f"chromium not found ({CHROMIUM}): `make setup` installs it (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "playwright is not installed: `make setup` installs it (the dev extra of pyproject.toml)"
    if reason is None:
        return
    if os.environ.get(SKIP_VARIABLE):
        pytest.skip(f"{reason}; skipped because {SKIP_VARIABLE} is set")
    pytest.fail(f"{reason} (set {SKIP_VARIABLE}=1 to skip the browser test on a machine without it)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Lab:
    """A JupyterLab server on 127.0.0.1 with a token, serving a copy of the notebooks."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root = root
        self.home = home
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        settings = home / "settings"
        # No virtual scrolling (every cell in the page, so every output can be checked), no news or update checks.
        _write_json(settings / "@jupyterlab/notebook-extension/tracker.jupyterlab-settings", {"windowingMode": "none"})
        _write_json(
            settings / "@jupyterlab/apputils-extension/notification.jupyterlab-settings",
            {"fetchNews": "false", "checkForUpdates": False},
        )
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "IPYTHONDIR": str(home / "ipython"),
            "REWARDS_LAB_ROOT": str(report.ROOT),  # the notebooks' data/ files, from the copy
            "PYTHONPATH": os.pathsep.join(filter(None, [str(report.ROOT), os.environ.get("PYTHONPATH")])),
        }
        command = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: the commands, the kernel's status
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={home / 'workspaces'}",
            *(["--allow-root"] if os.geteuid() == 0 else []),
        ]
        self.log = (home / "jupyterlab.log").open("w")
        self.process = subprocess.Popen(command, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.http = httpx.Client(base_url=self.base, params={"token": self.token}, timeout=10)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited: {(home / 'jupyterlab.log').read_text()[-3000:]}")
            try:
                if self.http.get("/api/status").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer: {(home / 'jupyterlab.log').read_text()[-3000:]}")

    def trust(self, notebook: str) -> None:
        """Sign the notebook for this server's user, as `make lab` does with `jupyter trust` (JupyterLab draws
        widgets, a renderer it deems unsafe, only in trusted notebooks)."""
        from nbformat.sign import NotebookNotary

        path = self.root / notebook
        NotebookNotary(data_dir=str(self.home / "data")).sign(nbformat.read(path, as_version=4))

    def url(self, notebook: str) -> str:
        return f"{self.base}/lab/tree/{notebook}?token={self.token}&reset"

    def shut_down_kernels(self) -> None:
        for session in self.http.get("/api/sessions").json():
            self.http.delete(f"/api/sessions/{session['id']}")

    def stop(self) -> None:
        self.http.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def _copy_with_small_parameters(target: Path) -> None:
    """The committed notebooks with their stored outputs and widget state, the small parameters injected after
    their `parameters` cell (as papermill does): what is opened is what was committed, only quicker to run."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    target.mkdir()
    for path in NOTEBOOKS:
        node = load_notebook_node(str(path))  # as papermill reads it (every cell with its tags)
        if SMALL.get(path.name):
            node = parameterize_notebook(node, SMALL[path.name], kernel_name=report.KERNEL, language="python")
        nbformat.write(node, target / path.name)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    _need_chromium()
    home = tmp_path_factory.mktemp("jupyterlab")
    _copy_with_small_parameters(home / "notebooks")
    server = Lab(home / "notebooks", home)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(lab: Lab) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def _widgets_displayed(path: Path) -> int:
    return len(report.displayed_widgets(nbformat.read(path, as_version=4)))


def _texts(page: Any, selector: str) -> list[str]:
    texts: list[str] = page.locator(selector).all_inner_texts()
    return texts


def _assert_widgets_drawn(page: Any, expected: int, when: str) -> None:
    """Every displayed widget drawn as a widget: none as its text repr, none failed or still loading."""
    outputs = " ".join(_texts(page, ".jp-OutputArea-output"))
    as_text = WIDGET_AS_TEXT.findall(" ".join(_texts(page, ".jp-OutputArea-output pre")))
    assert not as_text, f"{when}: widgets shown as text: {as_text[:3]}"
    failed = [message for message in WIDGET_FAILED if message in outputs]
    assert not failed, f"{when}: {failed}"
    drawn = page.locator(".jp-OutputArea-output > .jupyter-widgets.widget-vbox").count()
    assert drawn == expected, f"{when}: {drawn} widgets drawn, {expected} displayed"


def _errors(page: Any) -> list[str]:
    """Error outputs (tracebacks) and anything written to stderr, as a reader would see them."""
    selectors = [
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
        ".jp-OutputArea-output.jp-OutputArea-executeResult.jp-mod-error",
        ".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']",
        ".jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']",
    ]
    return [text[:600] for selector in selectors for text in _texts(page, selector)]


def _wait(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _run_all(page: Any, timeout: float) -> None:
    """Run ▸ Run All Cells, then wait until the kernel is idle with every code cell run (or one failed)."""
    _wait(lambda: (page.evaluate(NOTEBOOK_STATE) or {}).get("status") == "idle", 90, "the kernel to start")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

    def done() -> bool:
        state = page.evaluate(NOTEBOOK_STATE)
        if state is None or state["status"] != "idle" or state["queued"]:
            return False
        return bool(state["ran"] == state["code"] or _errors(page))

    _wait(done, timeout, "the notebook to run")


def _cell_output(page: Any, code: str) -> Any:
    """The output area of the code cell whose source contains `code`."""
    cell = page.locator(".jp-CodeCell").filter(has=page.locator(".jp-InputArea", has_text=code))
    return cell.locator(".jp-OutputArea").first


def _field(area: Any, label: str) -> Any:
    """The input of the widget labelled `label` (exactly) in the output area."""
    return area.locator(".widget-inline-hbox", has=area.page.get_by_text(label, exact=True)).locator("input").first


def _plots(area: Any) -> list[Any]:
    """The widget's plot images on show, each loaded (a broken image has no natural width)."""
    shown = [image for image in area.locator("img").all() if image.is_visible()]
    return [image for image in shown if image.evaluate("(img) => img.complete && img.naturalWidth > 0")]


def _use(area: Any, button: str, done: Callable[[str, str], bool], shot: str) -> str:
    """Click `button` in the widget, wait until its text (before, now) is `done`; a screenshot before and after."""
    area.scroll_into_view_if_needed()
    before = area.inner_text()
    area.screenshot(path=SCREENSHOTS / f"{shot}-before.png")
    area.locator(".widget-button", has_text=button).first.click()

    def finished() -> str | None:
        now: str = area.inner_text()
        return now if now != before and done(before, now) else None

    after: str = _wait(finished, 90, f"{shot}: a result after clicking {button!r}")
    area.screenshot(path=SCREENSHOTS / f"{shot}-after.png")
    shown = area.locator(WIDGET_ERROR).all_inner_texts()
    assert not shown, f"{shot}: {shown}"
    return after


def _drive_01(page: Any) -> None:
    """The rule builder saves a new rule into the draft (its list grows); the simulator shows an outcome."""
    builder = _cell_output(page, "RuleBuilder(spring)")
    builder.scroll_into_view_if_needed()
    builder.locator(".widget-button", has_text="save to draft").first.click()  # no event type: refused, and said
    _wait(lambda: builder.locator(WIDGET_ERROR).count() == 1, 30, "the rule builder's error for a rule without type")
    builder.screenshot(path=SCREENSHOTS / "01_design_and_simulate-rule_builder-refused.png")
    _field(builder, "event type").fill("review.posted")
    _field(builder, "fixed").fill("3.00")
    shot = "01_design_and_simulate-rule_builder"
    after = _use(builder, "save to draft", lambda _, now: "added to the draft" in now, shot)
    rules = re.compile(r"\((\d+) rules\)")
    assert [int(n) for n in rules.findall(after)] == [5], after[-800:]  # 4 in the draft, one saved
    simulator = _cell_output(page, "Simulator(spring")
    shot = "01_design_and_simulate-simulator"
    after = _use(simulator, "simulate", lambda _, now: "issues" in now and "matched" in now, shot)
    assert "order.completed" in after


def _drive_02(page: Any) -> None:
    """The replay explorer and the liability comparison each show a summary and their plots, drawn."""
    for code, button, name in [
        ("ReplayExplorer(spring", "replay", "replay_explorer"),
        ("LiabilityComparison(spring", "compare", "liability_comparison"),
    ]:
        area = _cell_output(page, code)
        plotted = len(_plots(area))

        def drawn(_: str, __: str, area: Any = area, plotted: int = plotted) -> bool:
            return len(_plots(area)) > plotted

        _use(area, button, drawn, f"02_replay_and_forecast-{name}")


DRIVE: dict[str, Callable[[Any], None]] = {
    "01_design_and_simulate.ipynb": _drive_01,
    "02_replay_and_forecast.ipynb": _drive_02,
}
SAVED = {  # the widgets drawn from their saved state, by the code of their cell
    "01_design_and_simulate.ipynb": {"rule_builder": "RuleBuilder(spring)", "simulator": "Simulator(spring"},
    "02_replay_and_forecast.ipynb": {
        "replay_explorer": "ReplayExplorer(spring",
        "liability_comparison": "LiabilityComparison(spring",
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_the_notebook_in_a_browser_before_and_after_running_it(lab: Lab, browser: Any, notebook: Path) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    stem = notebook.stem
    context = browser.new_context(viewport={"width": 1400, "height": 1800})
    page = context.new_page()
    page_errors: list[str] = []
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    expected = _widgets_displayed(notebook)
    try:
        if expected:
            # Untrusted (opened without `make lab`): JupyterLab cannot draw the widgets; a sentence stands in.
            page.goto(lab.url(notebook.name))
            page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=60_000)
            _wait(lambda: (page.evaluate(NOTEBOOK_STATE) or {}).get("status") == "idle", 90, "the kernel to start")
            texts = " ".join(_texts(page, ".jp-OutputArea-output"))
            assert not WIDGET_AS_TEXT.findall(texts), "untrusted: widgets shown as their repr"
            assert texts.count("widget: run the notebook (Run ▸ Run All Cells) to use it") == expected, texts[-2000:]
            page.get_by_text("widget: run the notebook").first.scroll_into_view_if_needed()
            page.screenshot(path=SCREENSHOTS / f"{stem}-untrusted.png")
        lab.trust(notebook.name)
        page.goto(lab.url(notebook.name))
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=60_000)
        _wait(
            lambda: page.locator(".jp-OutputArea-output > .jupyter-widgets.widget-vbox").count() >= expected,
            60,
            f"{expected} widgets drawn from the saved state",
        )
        page.screenshot(path=SCREENSHOTS / f"{stem}-before.png")
        _assert_widgets_drawn(page, expected, "before running")
        for name, code in SAVED.get(notebook.name, {}).items():
            _cell_output(page, code).screenshot(path=SCREENSHOTS / f"{stem}-{name}-saved.png")

        _run_all(page, timeout=180)
        errors = _errors(page)
        page.screenshot(path=SCREENSHOTS / f"{stem}-after.png")
        assert not errors, errors
        _wait(
            lambda: page.locator(".jp-OutputArea-output > .jupyter-widgets.widget-vbox").count() >= expected,
            60,
            f"{expected} widgets drawn after the run",
        )
        _assert_widgets_drawn(page, expected, "after running")
        if notebook.name in DRIVE:
            DRIVE[notebook.name](page)
            assert not _errors(page)
            page.screenshot(path=SCREENSHOTS / f"{stem}-after.png")
        assert not page_errors, page_errors
    finally:
        context.close()
        lab.shut_down_kernels()
