"""cglint: a linter for TensorFlow custom gradients.

How a file becomes a diagnostic:
  files.py   finds the files and skips those that cannot hold a custom gradient (text prefilter)
  model.py   parses one file with libcst into GradientSite objects (the only tree walk)
  rules/     one module per rule; each asks the model questions and yields Diagnostics
  engine.py  file -> model -> rules -> noqa suppressions -> diagnostics
  report/    text and json output; cli.py parses arguments and picks the exit code

Importing cglint never imports TensorFlow: only cglint.runtime does, lazily.
"""

__version__ = "0.1.0"
# Where the rules are documented; SARIF output links each rule here (`#cg005-output-derivative`).
DOCS_URL = "https://pypi.org/project/cglint/"
