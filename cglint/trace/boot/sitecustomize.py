"""Put on PYTHONPATH by `cglint trace`; Python imports it at start-up in every interpreter the
command starts (the command itself, `pytest`'s console script, subprocesses, xdist workers).

Why a sitecustomize and not only an import hook: an import hook has to be installed by code
that runs in the process before the program imports TensorFlow, and for an arbitrary command
(`pytest`, a console script, `python -m pkg`) the only such code Python runs by itself is
`sitecustomize`. It installs the import hook (`cglint.trace.instrument`), which patches
TensorFlow's custom_gradient module when the program imports it — so a program that never
imports TensorFlow pays nothing and TensorFlow's own import is unchanged.

Only the `cglint` package is imported from cglint's installation (its directory is put on
`sys.path` for that import and taken off again), so nothing else of cglint's environment leaks
into the program's. A `sitecustomize` this one shadows is run afterwards.
"""


def _install():
    import os
    import sys

    root = os.environ.get("CGLINT_TRACE_PKG")
    if not root or not os.environ.get("CGLINT_TRACE_DIR"):
        return
    sys.path.insert(0, root)
    try:
        from cglint.trace.instrument import install_from_environment

        install_from_environment()
    except Exception:
        pass  # tracing must never stop the program
    finally:
        try:
            sys.path.remove(root)
        except ValueError:
            pass


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
