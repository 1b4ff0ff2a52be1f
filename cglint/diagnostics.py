"""What rules report and what the engine hands to the formatters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # libcst is imported only when a file is parsed (see cglint.rules)
    import libcst as cst

if TYPE_CHECKING:
    from cglint.model import GradientSite


# How far a fix can be trusted, as ruff's `Applicability`: `safe` fixes keep the behaviour the
# user intended and `--fix` applies them; `unsafe` ones need review and only `--unsafe-fixes`
# applies them; `display-only` ones are shown (JSON, SARIF, editors' hover text) and never applied.
SAFE, UNSAFE, DISPLAY_ONLY = "safe", "unsafe", "display-only"
APPLICABILITIES = (SAFE, UNSAFE, DISPLAY_ONLY)


class Fix:
    """A rule's proposed change: replace each node (found by identity in the parsed module) by
    its replacement, with an applicability and a one-line description (its message).

    Built as `Fix(edits, applicability=UNSAFE, description=...)`; the older
    `Fix(edits=..., safe=..., description=...)` (or positionally `Fix(edits, safe, description)`)
    still works, and `fix.safe` reads as before."""

    __slots__ = ("edits", "applicability", "description")

    def __init__(self, edits: list[tuple[cst.CSTNode, cst.CSTNode]], safe: bool | None = None,
                 description: str = "", *, applicability: str | None = None) -> None:
        if applicability is None:
            if safe is None:
                raise TypeError("Fix needs an applicability (or `safe`)")
            applicability = SAFE if safe else UNSAFE
        elif applicability not in APPLICABILITIES:
            raise ValueError(f"unknown fix applicability {applicability!r}")
        elif safe is not None and safe != (applicability == SAFE):
            raise ValueError(f"Fix(safe={safe}) contradicts applicability {applicability!r}")
        self.edits = edits
        self.applicability = applicability
        self.description = description

    @property
    def safe(self) -> bool:
        return self.applicability == SAFE

    @property
    def message(self) -> str:
        return self.description

    def applies(self, unsafe: bool = False) -> bool:
        """The one predicate for "fixable": whether `--fix` (with `--unsafe-fixes` when
        `unsafe`) applies this fix. Text `[*]`, `--statistics`, the summary, JSON's `fixable`
        and the editor's preferred quick fix all ask it."""
        return self.applicability == SAFE or (unsafe and self.applicability == UNSAFE)

    def __repr__(self) -> str:
        return f"Fix({len(self.edits)} edits, {self.applicability}, {self.description!r})"

    def apply(self, module: cst.Module) -> cst.Module:
        return module.visit(_replacer(dict((id(old), new) for old, new in self.edits)))


def _replacer(by_id: dict[int, cst.CSTNode]) -> cst.CSTTransformer:
    import libcst as cst

    class _Replace(cst.CSTTransformer):
        def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
            return by_id.get(id(original), updated)

    return _Replace()


@dataclass
class Finding:
    """A rule's report, before the engine turns the node into a position."""

    node: cst.CSTNode
    message: str
    fix: Fix | None = None
    # The custom-gradient site the finding is about (None for module-level findings such as
    # CG000 or CG013's unwrapped functions); `Rule.check` fills it in for `check_site` rules.
    site: GradientSite | None = None


TITLE_WIDTH = 88  # a message longer than this is shown as a title line and detail lines


def split_message(message: str) -> tuple[str, list[str]]:
    """A message as a short title and detail clauses, for text output and editors: the title
    ends at the first `: ` or `; ` outside code, quotes and brackets (what is wrong; the rest
    says what TensorFlow does and what to do), each further `; ` starts a detail clause.
    Messages short enough for one line stay whole. JSON and SARIF keep the whole message."""
    if len(message) <= TITLE_WIDTH:
        return message, []
    parts: list[str] = []
    depth, code, quoted, start = 0, False, False, 0
    for i, ch in enumerate(message):
        if ch == "`":
            code = not code
        elif code:
            continue
        elif ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif not depth and message.startswith(("; ", ": "), i) and (ch == ";" or not parts):
            parts.append(message[start:i])
            start = i + 2
    parts.append(message[start:])
    parts = [p.strip() for p in parts if p.strip()]
    return parts[0], parts[1:]


@dataclass
class Diagnostic:
    path: str
    line: int  # 1-based
    column: int  # 1-based
    end_line: int
    end_column: int  # 1-based, exclusive
    code: str
    name: str
    severity: str
    message: str
    runtime: dict[str, Any] | None = field(default=None, compare=False)
    fix: Fix | None = field(default=None, compare=False, repr=False)
    cell: int | None = None  # notebooks: the 1-based cell; `line`s are then lines of that cell

    @property
    def location(self) -> str:
        """`path:line:col`, or `nb.ipynb:cell 3:4:9` in a notebook."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.column}"

    @property
    def title(self) -> str:
        """The message's first line (`split_message`)."""
        return self._split()[0]

    @property
    def details(self) -> list[str]:
        """The message's detail clauses after the title (`split_message`)."""
        return self._split()[1]

    @property
    def editor_message(self) -> str:
        """The title and each detail clause on its own line (what editors show)."""
        return "\n".join([self.title, *self.details])

    def _split(self) -> tuple[str, list[str]]:
        if self.code == "CG000":  # the parser's or reader's own words: `cannot parse: <why>` is one thought
            return self.message, []
        return split_message(self.message)

    def is_fixable(self, unsafe: bool = False) -> bool:
        """Whether `--fix` (`--unsafe-fixes` with `unsafe`) fixes this finding: `Fix.applies`."""
        return self.fix is not None and self.fix.applies(unsafe)

    @property
    def fixable(self) -> bool:
        return self.is_fixable(False)

    def to_dict(self, unsafe: bool = False, edits: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The JSON object. `fixable` is `is_fixable(unsafe)`; `fix` is null or
        `{"applicability", "message", "edits"}` (`edits` as text replacements when the caller
        could compute them, see `cglint.fix.json_edits`)."""
        out = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "fixable": self.is_fixable(unsafe),
            "fix": None if self.fix is None else {
                "applicability": self.fix.applicability,
                "message": self.fix.description,
                "edits": edits if edits is not None else [],
            },
        }
        if self.cell is not None:
            out["cell"] = self.cell
        if self.runtime is not None:
            out["runtime"] = self.runtime
        return out


@dataclass
class FileResult:
    path: str
    source: str
    diagnostics: list[Diagnostic]
    parsed: bool  # False when the prefilter skipped the file or it did not parse
    module: cst.Module | None = field(default=None, repr=False)  # the parsed module, for fixes
    model: Any = field(default=None, repr=False)  # its ModuleModel, for the runtime planner
    # `line: text` notes about the file that are not findings (e.g. unknown codes in `# noqa`).
    warnings: list[str] = field(default_factory=list)
    notebook: Any = field(default=None, repr=False)  # a cglint.notebook.Notebook for `.ipynb` files
    # The other project files the findings depend on (imported modules), by content hash.
    dependencies: dict[str, str] = field(default_factory=dict, repr=False)
