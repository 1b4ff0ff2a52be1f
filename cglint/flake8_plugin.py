"""cglint as a flake8 plugin (entry point `flake8.extension`, code prefix `CG`).

`flake8 --select CG` reports what `cglint` reports: the same engine, rules and positions, run
on the lines flake8 has already read (so stdin and coding cookies work as flake8 handles them;
the file is not read again). Suppressions are read by the CLI's one parser (`noqa.apply`):
line `# noqa` comments as the CLI reads them (flake8's own reading is case-sensitive on codes
and would miss `# NOQA: cg005`, which the CLI honours), file-level `# cglint: noqa` and the
`# cglint: disable=...` blocks, which flake8 does not know. With `flake8 --disable-noqa` the
line comments are left alone, as flake8 leaves its own.

flake8 hands an `ast` tree over as well; it is unused (cglint works on libcst's tree), but
asking for it is what makes flake8 treat this as a tree plugin. A file flake8 cannot parse
is reported by flake8 itself as E999 and no plugin runs on it, so CG000 only appears here in
the rare case of a file Python parses but libcst does not.
"""

from __future__ import annotations

import ast
import os
from typing import Any, Iterator

from cglint import __version__


class Plugin:
    name = "cglint"
    version = __version__

    # Configuration per directory, looked up once per flake8 process.
    _settings_by_dir: dict[str, Any] = {}
    disable_noqa = False  # flake8 --disable-noqa

    @classmethod
    def parse_options(cls, options: Any) -> None:
        cls.disable_noqa = bool(getattr(options, "disable_noqa", False))

    def __init__(self, tree: ast.AST, lines: list[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        from cglint import engine, noqa

        from cglint.config import ConfigError

        try:
            rules = self._rules()
        except ConfigError as exc:
            # A broken [tool.cglint] stops `cglint` with one line and exit 2; flake8 cannot
            # stop for a plugin, so each file gets that line as a finding (never a pass).
            yield 1, 0, f"CG000 cannot read the cglint configuration: {' '.join(str(exc).split())}", type(self)
            return
        source = "".join(self.lines)
        result = engine.lint_source(source, self.filename, rules, apply_noqa=False)
        # The CLI's parser for every directive, so both honour the same spellings.
        kept, _ = (noqa.apply(result.diagnostics, source, (), line_noqa=not self.disable_noqa)
                   if result.diagnostics else ([], []))
        for d in kept:  # one line, the title: the details are `cglint`'s text output and `--explain`
            yield d.line, d.column - 1, f"{d.code} {' '.join(d.title.split())}", type(self)

    def _rules(self) -> Any:
        """The rules `cglint` would run on this file: [tool.cglint] in the nearest
        pyproject.toml (the CLI's configuration). flake8's --select/--ignore then filter as for
        any plugin."""
        from cglint import config

        directory = os.path.dirname(os.path.abspath(self.filename))
        if directory not in self._settings_by_dir:
            try:
                self._settings_by_dir[directory] = config.load(directory)
            except config.ConfigError as exc:  # read once per directory, said for every file
                self._settings_by_dir[directory] = exc
        settings = self._settings_by_dir[directory]
        if isinstance(settings, config.ConfigError):
            raise settings
        return list(settings.rules_for(self.filename))
