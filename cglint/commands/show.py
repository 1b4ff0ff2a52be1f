"""`cglint show` (`--show-settings`, `--show-files`): what a run would use, and exit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cglint.commands.common import EXIT_CLEAN


def settings(path: str, settings, args) -> int:
    """--show-settings: what applies to `path` after the configuration and the command line."""
    def show(value) -> str:
        if isinstance(value, (tuple, list)):
            return "[" + ", ".join(f'"{v}"' for v in value) + "]"
        return "none" if value is None else f'"{value}"' if isinstance(value, (str, Path)) else str(value).lower()

    rows = {
        "config_file": settings.config_file, "root": settings.root, "select": settings.codes_for(path),
        "exclude": settings.exclude, "extend_exclude": settings.extend_exclude,
        "force_exclude": settings.force_exclude, "baseline": None if args.no_baseline else (args.baseline or settings.baseline),
        "tensorflow_aliases": settings.tensorflow_aliases,
    }
    print(f'Resolved settings for: "{path}"\n')
    for key, value in rows.items():
        print(f"{key} = {show(value)}")
    for pattern, codes in sorted(settings.per_file_ignores.items()):
        print(f'per_file_ignores."{pattern}" = {show(codes)}')
    for key, value in dataclasses.asdict(settings.runtime).items():
        print(f"runtime.{key} = {show(value)}")
    return EXIT_CLEAN


def files(paths: list[str], settings) -> int:
    """--show-files: the files a run would check, one a line."""
    from cglint import files as discovery

    for path in sorted(discovery.discover(paths, settings.is_excluded, settings.force_exclude)):
        print(path)
    return EXIT_CLEAN
