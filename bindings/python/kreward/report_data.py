"""A report that arrived as JSON (from `kreward serve` or a Ray actor):
the read side of kreward.Report (verdict, flags, metrics, texts, reward,
to_dict, to_json) over the report format of docs/report-format.md, so
trainer code reads a remote report as it reads a local one. It holds no
library handle: close() is a no-op kept for the same code paths."""
import json

from .pool import UNSCORED


class ReportData:
    __slots__ = ("_d", "_text")

    def __init__(self, data):
        if isinstance(data, (str, bytes)):
            self._text = data if isinstance(data, str) else data.decode()
            self._d = json.loads(self._text)
        else:
            self._d, self._text = data, None
        if not isinstance(self._d, dict) or "verdict" not in self._d:
            raise ValueError("not a kreward report (no verdict)")

    @property
    def verdict(self):
        return self._d["verdict"]

    @property
    def passed(self):
        return self.verdict == "passed"

    @property
    def flags(self):
        return list(self._d.get("flags", []))

    def metrics(self):
        return {k: v for k, v in self._d.get("metrics", {}).items()}

    def __getitem__(self, key):
        m = self._d.get("metrics", {})
        if key not in m:
            raise KeyError(key)
        v = m[key]
        return float("nan") if v is None else v  # JSON writes NaN as null

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def text(self, key):
        return self._d.get("texts", {}).get(key)

    @property
    def feedback(self):
        return self.text("feedback")

    @property
    def message(self):
        return self.text("message")

    @property
    def reward(self):
        """The total reward, None when the report was never scored (as
        Report.reward)."""
        r = self._d.get("reward")
        if self.verdict in UNSCORED or not isinstance(r, dict) or not r.get("terms"):
            return None
        return r.get("total")

    def to_dict(self):
        return self._d

    def to_json(self):
        if self._text is None:
            self._text = json.dumps(self._d, indent=2)
        return self._text

    def close(self):
        pass

    @property
    def closed(self):
        return False

    def __repr__(self):
        return f"<kreward.ReportData {self.verdict} reward={self.reward}>"
