"""The optional C reader of SGLang log lines (decodescope/serverstats/_fastlog.c): built when
a C compiler is there; without one the install goes on (a warning) and `decodescope log`
reads those lines in Python, with the same output. Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("decodescope.serverstats._fastlog", ["decodescope/serverstats/_fastlog.c"], optional=True)])
