class DecodescopeError(Exception):
    """A user-facing error: says what is wrong and how to fix it."""

    def __init__(self, what: str, fix: str = ""):
        super().__init__(what)
        self.what = what
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.what}\n  fix: {self.fix}" if self.fix else self.what
