from cglint.cli import entry

entry()
