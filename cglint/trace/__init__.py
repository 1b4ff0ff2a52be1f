"""`cglint trace -- COMMAND` and the pytest plugin's engine: runtime checks of the custom
gradients a program really calls (`instrument` runs inside the program, `report` and `command`
in cglint's own process)."""
