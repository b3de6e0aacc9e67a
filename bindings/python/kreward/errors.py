"""Errors: every negative status from libkreward becomes a KrewardError
(raised by the errcheck each function gets in _lib's table)."""


class KrewardError(Exception):
    """A libkreward call failed.

    code: the status (negative KR_E* value); name: its symbol, e.g. "KR_EPARSE";
    message: what failed and why (the context's error text, else the
    status's); detail: the long form where there is one (a compile log, the
    offending text); report: for an engine verb (verify, benchmark, evaluate),
    the report it wrote, which says what happened (verdict error, message)."""

    def __init__(self, code, message="", detail="", report=None):
        from . import _lib  # _lib raises these: imported late, no import circle
        self.code = code
        self.name = _lib.text(_lib.fn.status_name(code))
        self.message = message or _lib.text(_lib.fn.strerror(code))
        self.detail = detail
        self.report = report
        super().__init__(f"{self.name}: {self.message}")
