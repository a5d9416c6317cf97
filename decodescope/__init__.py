"""decodescope: why LLM decode runs this fast, and what would move it."""

__version__ = "0.1.0"
