"""Errors: every negative status from libkreward becomes a KrewardError
(raised by the errcheck each function gets in _lib's table)."""


class KrewardError(Exception):
    """A libkreward call failed.

    code: the status (negative KR_E* value); name: its symbol, e.g. "KR_EPARSE";
    message: what failed and why (the context's error text, else the
    status's); detail: the long form where there is one (a compile log, the
    offending text); report: for an engine verb (verify, benchmark, evaluate),
    the report it wrote, which says what happened (verdict error, message)."""

    # (name, text) of a status: set by _lib once the library's functions are
    # bound (kr_status_name, kr_strerror), so that this module needs nothing
    # of the binding (_lib raises these errors: it imports this module)
    describe = staticmethod(lambda code: (f"status {code}", ""))

    def __init__(self, code, message="", detail="", report=None):
        self.code = code
        self.name, text = KrewardError.describe(code)
        self.message = message or text
        self.detail = detail
        self.report = report
        super().__init__(f"{self.name}: {self.message}")
