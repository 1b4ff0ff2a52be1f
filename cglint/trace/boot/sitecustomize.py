"""Put on PYTHONPATH by `cglint trace`; Python imports it at start-up in every interpreter the
command starts (the command itself, `pytest`'s console script, subprocesses, xdist workers).

Why a sitecustomize and not only an import hook: an import hook has to be installed by code
that runs in the process before the program imports TensorFlow, and for an arbitrary command
(`pytest`, a console script, `python -m pkg`) the only such code Python runs by itself is
`sitecustomize`. It installs the import hook (`cglint.trace.instrument`), which patches
TensorFlow's custom_gradient module when the program imports it — so a program that never
imports TensorFlow pays nothing and TensorFlow's own import is unchanged.

Nothing of cglint's environment is put on the program's `sys.path`: the instrumentation is one
module loaded by path, and the numeric check is imported from cglint's directory only when a
custom gradient is called (`instrument._import_check`). A `sitecustomize` this one shadows is
run afterwards.
"""


def _install():
    import importlib.util
    import os
    import sys

    root = os.environ.get("CGLINT_TRACE_PKG")
    if not root or not os.environ.get("CGLINT_TRACE_DIR"):
        return
    # The instrumentation is loaded by path under its own name, without importing the `cglint`
    # package: pytest warns about plugin packages imported before it starts (cglint has one).
    # A later `import cglint.trace.instrument` (the pytest plugin) finds this same module.
    name = "cglint.trace.instrument"
    try:
        spec = importlib.util.spec_from_file_location(name, os.path.join(root, "cglint", "trace", "instrument.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        module.install_from_environment()
    except Exception:
        sys.modules.pop(name, None)  # tracing must never stop the program


def _chain():
    """Runs the next `sitecustomize` on sys.path (e.g. a distribution's), which this one hides."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception:
        pass


_install()
_chain()
