"""`cstparse.parse_module` is `libcst.parse_module`: the same tree (`deep_equals`), the same code
and the same module settings, whether the module is parsed in pieces or whole, and libcst's
node validation is back on afterwards. Pieces of one line are forced so that every top-level
statement boundary of the corpus (fixtures, rule examples, TensorFlow modules) is a cut."""

from __future__ import annotations

import ast
import threading

import libcst as cst
import pytest

from cglint import cstparse
from test_cstwalk import CORPUS


def _same(text: str, piece_lines: int = 1) -> cst.Module:
    whole = cst.parse_module(text)
    got = cstparse.parse_module(text, ast.parse(text), piece_lines=piece_lines)
    assert got.code == text
    assert got.deep_equals(whole), f"trees differ for:\n{text}"
    for attr in ("default_indent", "default_newline", "has_trailing_newline", "encoding"):
        assert getattr(got, attr) == getattr(whole, attr), attr
    return got


@pytest.mark.parametrize("name,text", CORPUS, ids=[n for n, _ in CORPUS])
def test_pieces_parse_as_the_whole(name: str, text: str) -> None:
    try:
        ast.parse(text)
        cst.parse_module(text)
    except (SyntaxError, cst.ParserSyntaxError):
        pytest.skip("not a module both parsers take")
    _same(text)


def test_the_corpus_is_really_cut() -> None:
    cut = [name for name, text in CORPUS if _parses(text) and cstparse._in_pieces(text, ast.parse(text), 1) is not None]
    assert len(cut) >= 0.9 * len(CORPUS)


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
        cst.parse_module(text)
        return True
    except (SyntaxError, cst.ParserSyntaxError):
        return False


SHAPES = {
    "comments between statements": "import a\n# one\n\n# two\nx = 1\n\n\n# three\ndef f():\n    return 1\n",
    "indented comments after a block": "def f():\n    pass\n    # mine\n\n  # odd\n# next's\ny = 2\n",
    "trailing lines at the end": "x = 1\ny = 2\n\n# end\n\n",
    "no final newline": "x = 1\ny = 2",
    "semicolons and continuations": "a = 1; b = 2\nc = (1,\n     2)\nd = 3 + \\\n    4\ne = 5\n",
    "decorators with comments": "@dec\n# between\n@other(1)\ndef f():\n    pass\nclass C:\n    x = 1\n",
    "crlf": "x = 1\r\ndef f():\r\n    return 2\r\n\r\ny = 3\r\n",
    "two-space indent and a line-only piece": "def f():\n  return 1\nx = [\n    1]\ndef g():\n  return 2\n",
    "tabs": "def f():\n\treturn 1\nx = 1\nif x:\n\ty = 2\n",
    "module docstring and future import": '"""Doc.\n\n  indented\n"""\nfrom __future__ import annotations\nx: int = 1\n',
    "compound statements": "if a:\n    b\nelif c:\n    d\nelse:\n    e\ntry:\n    f\nexcept E:\n    g\nwhile h:\n    i\nfor j in k:\n    pass\nwith l as m:\n    pass\n",
    "form feed": "x = 1\n\x0c\ndef f():\n    return 1\n",
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shapes(name: str) -> None:
    _same(SHAPES[name])


def test_mixed_settings_are_parsed_whole() -> None:
    # Pieces that infer different indentation or newlines are not joined (their blocks would
    # print with the wrong module default): the whole parse decides, with the same result.
    for text in ("def f():\n  return 1\ndef g():\n    return 2\n", "x = 1\ny = 2\r\nz = 3\r\n"):
        assert cstparse._in_pieces(text, ast.parse(text), 1) is None
        _same(text)


def test_a_short_module_is_parsed_whole() -> None:
    text = "x = 1\ny = 2\n"
    assert cstparse._cuts(text, ast.parse(text), cstparse.PIECE_LINES) is None


def test_validation_is_back_afterwards() -> None:
    cstparse.parse_module("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")
    with pytest.raises(cst.ParserSyntaxError):
        cstparse.parse_module("x = (\n")
    with pytest.raises(cst.CSTValidationError):  # also after a parse that failed
        cst.Name("not a name")


def test_validation_is_back_after_concurrent_parses() -> None:
    text = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(300))
    tree = ast.parse(text)  # once: CPython 3.11's ast.parse is not safe to run from threads at once
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                cstparse.parse_module(text, tree)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


def test_a_module_with_non_ascii_keeps_libcsts_check() -> None:
    # libcst's identifier check lags Unicode: its verdict is kept (the engine reports it as
    # CG000), since every later libcst visit of the tree would raise it anyway.
    with pytest.raises(cst.CSTValidationError):
        cstparse.parse_module("x = 1\n\U00013b4f = 1\n")
    assert cstparse.parse_module("s = 'héllo'\n").code == "s = 'héllo'\n"
