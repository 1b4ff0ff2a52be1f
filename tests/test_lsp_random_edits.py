"""The language server under 2,000 random incremental edits (issue 14): a real LSP client
(pytest-lsp) against `python -m cglint lsp`, with Neovim 0.11's capabilities plus diagnostic refresh (pull diagnostics)
and UTF-16 positions, where surrogate pairs are two code units.

The edits are what a careless or buggy client sends: random ranges, positions past the end of a
line or of the document, ranges that start or end inside a surrogate pair, inserted text with
lone surrogates, line breaks of every kind and the characters only `str.splitlines` breaks at.
Every few edits a hover, a code action or a diagnostic pull; each must be answered, and every
pull must equal a full lint (`engine.lint_source`) of the text the client holds. The client's
text is kept the way an editor whose strings are UTF-16 (VS Code, every JavaScript client)
keeps it: as code units, so an edit inside a pair splits it, as the spec's positions say.
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import re
import sys
from array import array
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pytest_lsp import LanguageClient, client_capabilities

from cglint import engine
from cglint.lsp import text as txt

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
EDITS = 2000
REQUEST_EVERY = 8  # one request per 8 edits: 250 requests, hover / code action / pull in turn
TIMEOUT = 20  # seconds one request may take before the server counts as not answering

# Small on purpose: 2,000 edits must stay within seconds. A custom gradient with a finding
# (CG005) and a fix, astral characters (two UTF-16 units each) in a comment and a string.
SEED = ('import tensorflow as tf  # 🙂 𝔘\n'
        '\n'
        '\n'
        '@tf.custom_gradient\n'
        'def op(x):\n'
        '    y = tf.math.tan(x)  # 𝒙 → 𝒚\n'
        '    label = "😀 grad"\n'
        '\n'
        '    def grad(dy):\n'
        '        return dy * tf.math.cos(y)\n'
        '\n'
        '    return y, grad\n')
TYPED = ["a", "x", "y", "dy", " ", "    ", "(", ")", ":", ",", ".", "=", "#", '"', "tf.", "return ",
         "def ", "@tf.custom_gradient\n", "\n", "\r\n", "\r", "\t", "\x0c", "\u2028", "\x85",
         "😀", "𝔘", "é", "\ud83d", "\ude00", "x\udfffy", "  # noqa: CG005", "lambda dy: dy"]


# -- the client's document: UTF-16 code units -----------------------------------------------

def to_units(text: str) -> str:
    """`text` as a string of UTF-16 code units (an astral character becomes its two
    surrogates), so that indexing counts what LSP positions count."""
    return "".join(map(chr, array("H", text.encode("utf-16-le", "surrogatepass"))))


def from_units(units: str) -> str:
    """The document those code units spell (valid pairs joined again, lone halves kept)."""
    return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


class Document:
    """What the client holds, edited as the LSP spec says: lines end at \\n, \\r\\n or \\r; a
    character past the end of its line means the end of the line, a line past the last one
    the end of the document."""

    def __init__(self, text: str) -> None:
        self.units = to_units(text)

    @property
    def text(self) -> str:
        return from_units(self.units)

    def lines(self) -> list[tuple[int, int]]:
        """(start, end without the line break) of each line, in code units."""
        out, start = [], 0
        for m in re.finditer(r"\r\n|\r|\n", self.units):
            out.append((start, m.start()))
            start = m.end()
        out.append((start, len(self.units)))
        return out

    def offset(self, line: int, character: int) -> int:
        lines = self.lines()
        if line >= len(lines):
            return len(self.units)
        start, end = lines[line]
        return min(start + character, end)

    def apply(self, start: tuple[int, int], end: tuple[int, int], new: str) -> None:
        a, b = self.offset(*start), self.offset(*end)
        self.units = self.units[:a] + to_units(new) + self.units[b:]


def random_position(rng: random.Random, doc: Document) -> tuple[int, int]:
    lines = doc.lines()
    r = rng.random()
    if r < 0.05:  # past the last line
        return len(lines) + rng.randrange(3), rng.randrange(5)
    line = rng.randrange(len(lines))
    start, end = lines[line]
    if r < 0.15:  # past the end of the line
        return line, end - start + 1 + rng.randrange(20)
    pairs = [i - start for i in range(start, end) if 0xD800 <= ord(doc.units[i]) < 0xDC00]
    if pairs and r < 0.35:  # between the two halves of a surrogate pair
        return line, rng.choice(pairs) + 1
    return line, rng.randrange(end - start + 1)


def random_change(rng: random.Random, doc: Document) -> tuple[tuple[int, int], tuple[int, int], str]:
    if rng.random() < 0.04:  # back to the seed (an undo): the whole document, as one range
        return (0, 0), (len(doc.lines()) + 1, 0), SEED
    a = random_position(rng, doc)
    r = rng.random()
    if r < 0.45:  # type
        return a, a, rng.choice(TYPED)
    if r < 0.75:  # delete a few characters, maybe across a line break
        return a, (a[0], a[1] + rng.randint(1, 3)) if rng.random() < 0.8 else (a[0] + 1, 0), ""
    if r < 0.97:  # replace a short range
        return a, (a[0], a[1] + rng.randint(0, 6)), "".join(rng.choice(TYPED) for _ in range(rng.randint(1, 3)))
    a, b = sorted([a, random_position(rng, doc)])  # any range: delete or replace it
    return a, b, rng.choice(["", *TYPED])


def position(p: tuple[int, int]) -> lsp.Position:
    return lsp.Position(line=p[0], character=p[1])


# -- the server ---------------------------------------------------------------------------------

@pytest_asyncio.fixture
async def client(tmp_path):
    client = LanguageClient(converter_factory=default_converter)
    await client.start_io(sys.executable, "-m", "cglint", "lsp", env={**ENV, "XDG_CACHE_HOME": str(tmp_path)})
    capabilities = client_capabilities("neovim@0.11.0")
    capabilities.general.position_encodings = [lsp.PositionEncodingKind.Utf16]
    # Pull mode is for clients that can be refreshed (Neovim after 0.11).
    capabilities.workspace.diagnostics = lsp.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    await client.initialize_session(lsp.InitializeParams(capabilities=capabilities, root_uri=tmp_path.as_uri()))
    yield client
    await client.shutdown_session()
    await client.stop()


def expected(text: str, path: str) -> list[tuple]:
    """A full lint of `text`, as LSP diagnostics in UTF-16 positions."""
    index = txt.LineIndex(text)
    out = []
    for d in engine.lint_source(text, path).diagnostics:
        a = index.from_cglint(d.line, d.column, txt.UTF16)
        b = index.from_cglint(d.end_line, d.end_column, txt.UTF16)
        out.append((d.code, a.line, a.character, b.line, b.character, d.editor_message))
    return sorted(out)


def got(items) -> list[tuple]:
    return sorted((d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character,
                   d.message) for d in items)


@pytest.mark.asyncio
async def test_two_thousand_random_edits_leave_it_answering_and_right(client, tmp_path):
    rng = random.Random(14)
    path = tmp_path / "ops.py"  # never written: the server lints the buffer
    uri = path.as_uri()
    doc = Document(SEED)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=doc.text)))
    last: list[lsp.Diagnostic] = []
    pulls = 0
    kinds = ["pull", "hover", "action"]
    reset = False
    codes: collections.Counter = collections.Counter()
    for n in range(1, EDITS + 1):
        a, b, new = random_change(rng, doc)
        doc.apply(a, b, new)
        reset = reset or new == SEED
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=n + 1),
            [lsp.TextDocumentContentChangePartial(range=lsp.Range(position(a), position(b)), text=new)]))
        if n % REQUEST_EVERY and n != EDITS:
            continue
        # A pull soon after each return to the seed, so findings other than CG000 are compared too.
        kind = "pull" if n == EDITS or reset else kinds[(n // REQUEST_EVERY) % 3]
        reset = False
        where = f"after edit {n} ({kind}); the client holds:\n{doc.text!r}"
        if kind == "pull":
            report = await asyncio.wait_for(client.text_document_diagnostic_async(
                lsp.DocumentDiagnosticParams(lsp.TextDocumentIdentifier(uri))), TIMEOUT)
            last = list(report.items)
            pulls += 1
            assert got(last) == expected(doc.text, str(path)), where
            codes.update(d.code for d in last)
        elif kind == "hover":
            hover = client.text_document_hover_async(lsp.HoverParams(
                lsp.TextDocumentIdentifier(uri), position(random_position(rng, doc))))
            await asyncio.wait_for(hover, TIMEOUT)  # an answer (None or a hover), not silence
        else:
            start, end = sorted([random_position(rng, doc), random_position(rng, doc)])
            actions = await asyncio.wait_for(client.text_document_code_action_async(lsp.CodeActionParams(
                lsp.TextDocumentIdentifier(uri), lsp.Range(position(start), position(end)),
                lsp.CodeActionContext(diagnostics=last))), TIMEOUT)
            assert actions is None or isinstance(actions, (list, tuple)), where
    assert pulls > 80 and codes["CG000"] > 20 and codes["CG005"] > 5, (pulls, codes)  # broken and whole texts
    assert not [m for m in client.log_messages if m.type == lsp.MessageType.Error], client.log_messages


@pytest.mark.parametrize("start,end,new,after", [
    ((0, 2), (0, 2), "X", "a\ud83dX\ude00b"),  # typed between the halves: the pair is split
    ((0, 2), (0, 3), "", "a\ud83db"),  # the low half deleted: the high one stays, alone
    ((0, 1), (0, 2), "", "a\ude00b"),  # the high half deleted
    ((0, 2), (0, 2), "\ude00\ud83d", "a😀😀b"),  # halves that meet again are one character
    ((0, 40), (9, 0), "!", "a😀b!"),  # past the line's end and past the document's
])
def test_an_edit_inside_a_surrogate_pair_splits_it_as_the_client_does(start, end, new, after):
    text = "a😀b"
    got = txt.apply_change(text, txt.Position(*start), txt.Position(*end), new, txt.UTF16)
    assert got == after
    doc = Document(text)
    doc.apply(start, end, new)
    assert doc.text == after  # the test's client model agrees
