"""Which modules are TensorFlow for a file: `[tool.cglint] tensorflow-aliases`, modules that
re-export TensorFlow (`lingvo.compat`, a project's `from mypkg import tf_compat as tf`).

The CLI reads its configuration once and sets it here for the run (`use`); other hosts (the
language server, the flake8 plugin, library calls) get the nearest configuration of each file's
directory, as the CLI would find it: looked up again when a configuration file above the
directory changes (`config.config_key`), so a long-lived host never lints with stale aliases."""

from __future__ import annotations

import os

_override: tuple[str, ...] | None = None
_by_directory: dict[str, tuple[tuple, tuple[str, ...]]] = {}  # directory -> (config key, aliases)


def use(aliases: tuple[str, ...] | None) -> None:
    """The aliases every file of this run uses (None: look them up per directory again)."""
    global _override
    _override = tuple(aliases) if aliases is not None else None


def tensorflow_aliases(path: str | None) -> tuple[str, ...]:
    if _override is not None:
        return _override
    real = path and not path.startswith("<") and path != "-"
    directory = os.path.dirname(os.path.abspath(path)) if real else os.getcwd()
    from cglint import config

    key = config.config_key(directory)
    hit = _by_directory.get(directory)
    if hit is None or hit[0] != key:
        try:
            aliases = config.load(directory).tensorflow_aliases
        except (config.ConfigError, OSError):
            aliases = ()  # a broken configuration is the CLI's to report
        hit = _by_directory[directory] = (key, aliases)
    return hit[1]
