"""pytest plugin (entry point `pytest11`): `pytest --cglint` checks every TensorFlow custom
gradient the tests call, as `cglint trace -- pytest` does, inside the session.

Without `--cglint` (or `--cglint-strict`) it only adds those options: nothing is imported,
patched or reported. With it, the tracer is installed before conftest files and test modules are
imported; the terminal summary lists per test which custom gradients were checked and the
verdicts (merged with the static findings of their files); `--cglint-strict` makes a `mismatch`
or `error` fail the run. Under pytest-xdist (`-n`), the workers send their events to the
controller, which reports and decides the exit status for the whole run.
"""

from __future__ import annotations

import pytest

_STATE: dict = {}


def pytest_addoption(parser):
    group = parser.getgroup("cglint", "custom-gradient checks (cglint)")
    group.addoption("--cglint", action="store_true", default=False,
                    help="check every TensorFlow custom gradient the tests call against autodiff")
    group.addoption("--cglint-strict", action="store_true", default=False,
                    help="like --cglint, and fail the run on a mismatch or error verdict")
    group.addoption("--cglint-calls", type=int, default=1, metavar="N",
                    help="eager calls checked per function and input signature (default: 1)")


def _enabled(config) -> bool:
    return bool(config.getoption("cglint", False) or config.getoption("cglint_strict", False))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    ns = early_config.known_args_namespace
    if getattr(ns, "cglint", False) or getattr(ns, "cglint_strict", False):
        _start(max(1, getattr(ns, "cglint_calls", 1) or 1))


def pytest_configure(config):
    if _enabled(config) and "events" not in _STATE:  # e.g. loaded with -p after conftests
        _start(max(1, config.getoption("cglint_calls") or 1))


def _tolerances() -> dict:
    """[tool.cglint.runtime] rtol, atol, probes and order of the nearest pyproject.toml, as --runtime."""
    try:
        from cglint import config as cgconfig

        rt = cgconfig.load(None).runtime
        return {"rtol": rt.rtol, "atol": rt.atol, "probes": rt.probes, "order": rt.order}
    except Exception:
        return {}


def _start(calls: int) -> None:
    from cglint.trace.instrument import install

    events: list[dict] = []
    tracer = install(calls, _tolerances())
    tracer.sinks.append(events.append)
    _STATE.update(events=events, tracer=tracer)


_WORKER_KEY = "cglint_events"


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist, in the controller: a worker's events join the controller's, which decides
    the verdicts and the exit status for the whole run."""
    if "events" not in _STATE:
        return
    import json

    from cglint.trace import report

    try:
        events = json.loads(getattr(node, "workeroutput", {}).get(_WORKER_KEY) or "[]")
    except (ValueError, RecursionError, AttributeError, TypeError):
        events = []
    if isinstance(events, list):
        _STATE["events"].extend(e for e in events if report.valid_event(e))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    if "events" not in _STATE:
        return
    from cglint.trace import report

    _STATE["tracer"].finish()  # signatures seen only under tf.function, on random inputs
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: the controller reports for everyone
        import json

        workeroutput[_WORKER_KEY] = json.dumps(_STATE["events"], default=str)
        return
    try:
        from cglint import config as cgconfig

        settings = cgconfig.load(str(session.config.rootpath))
    except Exception:
        settings = None
    functions = report.group(_STATE["events"])
    results, runtime = report.build(functions, settings, cwd=session.config.invocation_params.dir)
    _STATE.update(results=results, runtime=runtime)
    if session.config.getoption("cglint_strict") and report.failing(runtime) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if "runtime" not in _STATE:
        return
    from cglint.report import Context, render
    from cglint.trace import report

    tr = terminalreporter
    runtime = _STATE["runtime"]
    tr.section("cglint: custom gradients")
    per_test: dict[str, list[str]] = {}
    for r in runtime:
        for test in r.get("tests") or ["(outside any test)"]:
            per_test.setdefault(test, []).append(f"{r['function']} ({r['path']}:{r['line']}): {r['verdict']}")
    for test, lines in per_test.items():
        tr.write_line(f"{test}:")
        for line in lines:
            tr.write_line(f"    {line}")
    if runtime:
        tr.write_line("")
        for line in render("text", _STATE["results"], Context(runtime=runtime)).rstrip("\n").splitlines():
            tr.write_line(line)
    tr.write_line(report.summary_line(runtime).replace("cglint trace:", "cglint:"))
    if config.getoption("cglint_strict") and report.failing(runtime):
        tr.write_line("cglint: --cglint-strict: failing the run on the verdicts above", red=True)
