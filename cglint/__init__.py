"""cglint: a linter for TensorFlow custom gradients.

How a file becomes a diagnostic:
  files.py      finds the files and skips those that cannot hold a custom gradient (text prefilter)
  quickscan.py  Python's fast parser: is there a TensorFlow site at all, and in which statements?
  model.py      parses those statements with libcst into GradientSite objects (the only tree walk)
  rules/        one module per rule (rules/cg005_output_derivative.py): asks the model, yields Findings
  engine.py     file -> prefilter -> quick scan -> model -> rules -> noqa -> Diagnostics
  report/       text, concise, json, sarif, github, junit; cli.py parses arguments, picks the exit code
  fix.py        applies the rules' libcst fixes; lsp/ and flake8_plugin.py reuse the engine

Importing cglint never imports TensorFlow: only cglint.runtime does, lazily.
"""

__version__ = "0.1.0"
# Where the rules are documented; SARIF output links each rule here (`#cg005-output-derivative`).
DOCS_URL = "https://pypi.org/project/cglint/"
