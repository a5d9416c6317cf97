"""report: the same numbers in the terminal, JSON, markdown and HTML."""
