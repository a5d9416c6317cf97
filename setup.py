"""The optional C reader of SGLang log lines (decodescope/serverstats/_fastlog.c): built when
a C compiler is there; without one the install goes on (a warning) and `decodescope log`
reads those lines in Python, with the same output. Everything else is in pyproject.toml."""

from glob import glob

from setuptools import Extension, setup

# one translation unit: _fastlog.c includes its parts, _fastlog_*.h
setup(ext_modules=[Extension("decodescope.serverstats._fastlog", ["decodescope/serverstats/_fastlog.c"],
                             depends=sorted(glob("decodescope/serverstats/_fastlog_*.h")), optional=True)])
