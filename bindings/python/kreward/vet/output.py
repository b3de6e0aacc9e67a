"""A vetting run's folder:

  vet.jsonl     one record per problem: appended as each is done (the
                run's log, which a resumed run reads back), rewritten in
                name order with the final judgement at the end
  summary.md    the summary table (what `kreward problems vet` prints)
  kept/         the kept problems' files, at their names: a KernelBench
  refused/      folder (or a folder of kreward problems) a pipeline can
                use as is; refused/ holds the rest, reasons in vet.jsonl

A folder that holds something else is refused rather than written into;
a `.kreward-vet` file marks the folder as a vetting run's."""
import json
import os
import shutil
import threading

from .files import MARK


class RunFolder:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.log = os.path.join(self.path, "vet.jsonl")
        if os.path.isdir(self.path) and os.listdir(self.path) and \
                not os.path.exists(os.path.join(self.path, MARK)):
            raise ValueError(f"{self.path}: the folder holds files of something else; vetting "
                             "writes kept/ and refused/ in a folder of its own (a new one, or "
                             "one an earlier vetting run made)")
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ValueError(f"{self.path}: a file, not a folder for a vetting run")
        os.makedirs(self.path, exist_ok=True)
        with open(os.path.join(self.path, MARK), "w") as f:
            f.write("a kreward problems vet run's folder\n")
        self._lock = threading.Lock()

    def earlier(self):
        """{(path, sha256, measure key): record} from the log; a line cut
        short by an interrupted run is dropped."""
        out = {}
        try:
            with open(self.log) as f:
                for line in f:
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(r, dict) and {"path", "sha256", "measure_key"} <= r.keys():
                        out[(r["path"], r["sha256"], r["measure_key"])] = r
        except FileNotFoundError:
            pass
        return out

    def start(self, keep):
        """Begins the log with the records kept from an earlier run."""
        tmp = self.log + ".tmp"
        with open(tmp, "w") as f:
            for r in keep:
                f.write(json.dumps(r) + "\n")
        os.replace(tmp, self.log)

    def append(self, record):
        with self._lock, open(self.log, "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()

    def finish(self, records, summary):
        tmp = self.log + ".tmp"
        with open(tmp, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        os.replace(tmp, self.log)
        with open(os.path.join(self.path, "summary.md"), "w") as f:
            f.write(summary)
        self._split(records)

    def _split(self, records):
        for sub in ("kept", "refused"):
            shutil.rmtree(os.path.join(self.path, sub), ignore_errors=True)
        for r in records:
            dst = os.path.join(self.path, "kept" if r["kept"] else "refused", r["problem"])
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.isdir(r["path"]):
                # links stay links (one to / or ~ is not copied in), nothing but files and folders
                shutil.copytree(r["path"], dst, symlinks=True,
                                ignore=lambda d, names: [n for n in names if n == "__pycache__" or
                                                         not (os.path.islink(os.path.join(d, n)) or
                                                              os.path.isfile(os.path.join(d, n)) or
                                                              os.path.isdir(os.path.join(d, n)))])
            elif os.path.exists(r["path"]):
                shutil.copy2(r["path"], dst)
