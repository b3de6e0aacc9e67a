"""Errors: every negative status from libkreward becomes a KrewardError."""
from . import _lib


class KrewardError(Exception):
    """A libkreward call failed.

    code: the status (negative KR_E* value); name: its symbol, e.g. "KR_EPARSE";
    message: what failed and why; detail: the long form where there is one
    (a compile log, the offending text)."""

    def __init__(self, code, message="", detail=""):
        self.code = code
        self.name = _lib.text(_lib.fn.status_name(code))
        self.message = message or _lib.text(_lib.fn.strerror(code))
        self.detail = detail
        super().__init__(f"{self.name}: {self.message}")


def check(rc, ctx_handle=None):
    if rc >= 0:
        return rc
    msg = detail = ""
    if ctx_handle:
        msg = _lib.text(_lib.fn.context_errmsg(ctx_handle))
        detail = _lib.text(_lib.fn.context_errdetail(ctx_handle))
    raise KrewardError(rc, msg, detail)
