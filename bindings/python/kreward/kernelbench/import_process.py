"""One process for all of an import's runs of the problem file: the probes
(probe.py) and the soundness check (soundness_check.py), in turn, over
pipes. Each was a process of its own, each importing torch (2-3 s on 2
idle cores, 12 s under a load of 11: three of them were a third of an
upstream level 1 import's time). The process enters the file's sandbox
before the file first runs and answers on a channel of its own
(file_process.py), as each of them did. What a file could do to the
process it runs in, it could do before too: the soundness check's
process ran the file (its Reference) before checking it.

A run that times out or dies (out of memory) costs the process: the
caller's next request starts a fresh one, as each call did before.

The process is forked from the caller's zygote where there is one
(zygote.py: torch imported there, CUDA never; 2-3 s of every problem's
import was this process's own torch import), else started by exec; either
way it enters the file's sandbox before the file first runs, the only
thread of a fresh session.

The process's own side is import_child.py (it uses the probes and the
soundness check, which use the importer, which uses this: kept apart, no
import circle)."""
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading


_CHILD = "kreward.kernelbench.import_child"
KILL_WAIT_S = 5.0  # how long close() waits for a forked import's parent to reap it
_MAIN = f"from {_CHILD} import main; main()"


class ImportProcess:
    """The caller's side: .probes(reqs, timeout_s) and .soundness(data,
    timeout_s), answers as run_probes and json_process.call gave them."""

    def __init__(self, path, zygote=True):
        """zygote: fork the process from the caller's zygote where one can
        start (False: always by exec)."""
        self.path = os.path.abspath(path)
        self.proc = None
        self.started = 0  # processes started, for the tests
        self.use_zygote = zygote
        self.zygote_why = None  # why the last start was by exec, if it was

    def _start(self):
        from ..json_process import _PACKAGE_ROOT, library_env
        pythonpath = [_PACKAGE_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        # the file never needs a GPU; it enters its sandbox through libkreward
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(pythonpath), CUDA_VISIBLE_DEVICES="",
                   **library_env())
        self.stderr = tempfile.TemporaryFile()
        self.proc = self._fork(env, pythonpath) if self.use_zygote else None
        if self.proc is None:
            # -c, not -m: the package's __init__ imports this module, and runpy
            # warned so on stderr, whose last lines are the caller's error text
            self.proc = subprocess.Popen([sys.executable, "-c", _MAIN, self.path],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self.stderr, text=True, env=env, start_new_session=True)
        self.started += 1
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True).start()

    def _fork(self, env, pythonpath):
        """The process forked from the zygote (its pipes made here), or None
        with zygote_why set: no zygote here, or it failed this spawn."""
        from .worker_process import worker_environment
        from .zygote import ZygoteLost, ZygoteUnavailable, shared_zygote
        try:
            z = shared_zygote(worker_environment())
            z.wait_started()  # (its torch import: the pipes below are made after it)
        except (ZygoteUnavailable, OSError) as e:
            self.zygote_why = f"{type(e).__name__}: {e}"[:400]
            return None
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        st_r, st_w = os.pipe()
        try:
            proc = z.spawn_import(_CHILD, self.path, env, pythonpath, in_r, out_w, self.stderr.fileno(),
                                  st_w)
        except (ZygoteUnavailable, ZygoteLost, OSError) as e:
            for fd in (in_w, out_r, st_r):
                os.close(fd)
            self.zygote_why = f"{type(e).__name__}: {e}"[:400]
            return None
        finally:
            for fd in (in_r, out_w, st_w):
                os.close(fd)
        self.zygote_why = None
        return _ForkedImport(proc, os.fdopen(in_w, "w"), os.fdopen(out_r, "r"), st_r)

    @staticmethod
    def _read(proc, lines):
        for line in proc.stdout:
            if line.startswith("{"):
                lines.put(line)
        lines.put(None)  # the process ended

    def _answers(self, request, n, timeout_s, what):
        """n answer lines to request, or an error for each one missing."""
        import time
        if self.proc is None:
            self._start()
        deadline = time.monotonic() + timeout_s
        out = []
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            while len(out) < n:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
                if line is None:
                    break
                answer = json.loads(line)
                if not answer.get("ready"):
                    out.append(answer)
        except queue.Empty:
            self.close()
            return out + [{"ok": False, "error": f"{what} ran over {timeout_s} s"}] * (n - len(out))
        except (BrokenPipeError, OSError):
            pass
        if len(out) < n:  # the process ended before answering
            why = f"{what} exited {self._end()}: {self._stderr_tail()}"
            out += [{"ok": False, "error": why}] * (n - len(out))
        return out

    def probes(self, reqs, timeout_s=300):
        return self._answers({"probes": reqs}, len(reqs), timeout_s, "the probe")

    def soundness(self, data, timeout_s=300):
        answer = self._answers({"soundness": data}, 1, timeout_s, "the soundness check")[0]
        if answer.get("ok") is False and "error" in answer:
            return {"error": answer["error"]}
        return answer

    def _end(self):
        code = self.proc.wait()
        self.proc = None
        return code

    def _stderr_tail(self):
        self.stderr.seek(0)
        lines = self.stderr.read().decode(errors="replace").strip().splitlines()
        return " | ".join(lines[-3:])

    def close(self):
        """Ends the process (its whole session: a compiler the file started
        must not outlive it)."""
        if self.proc is None:
            return
        if isinstance(self.proc, _ForkedImport):
            self.proc.kill()  # (its group, then its waiting parent)
        else:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except (OSError, AttributeError):
                pass
        self.proc = None


class _ForkedImport:
    """An import process forked from the zygote, as ImportProcess uses a
    Popen: stdin, stdout, poll(), wait() and kill(); pid its waiting
    parent's (zygote_main._import_child), which writes the import
    process's pid and then its exit status to the status pipe; returncode
    that status (-1 where none came: the parent was killed)."""

    def __init__(self, leader, stdin, stdout, status_fd):
        self.leader, self.stdin, self.stdout = leader, stdin, stdout
        self.pid = leader.pid
        os.set_blocking(status_fd, False)  # (a fork of the caller may hold its other end)
        self._status_fd, self._said = status_fd, b""
        self.child, self._code, self.returncode = None, None, None

    def _read(self, wait_s=0.0):
        """What the parent wrote so far; up to wait_s for its first line."""
        from .zygote_main import ready
        if self._status_fd is None:
            return
        if wait_s and self.child is None:
            ready([self._status_fd], timeout_s=wait_s)
        while True:
            try:
                chunk = os.read(self._status_fd, 256)
            except BlockingIOError:
                break
            if not chunk:
                break
            self._said += chunk
        for line in self._said.split(b"\n")[:-1]:
            try:
                if line.startswith(b"pid "):
                    self.child = int(line[4:])
                elif line.strip():
                    self._code = int(line)
            except ValueError:
                pass

    def poll(self):
        if self.returncode is None and self.leader.poll() is not None:
            self._read()
            os.close(self._status_fd)
            self._status_fd = None
            self.returncode = self._code if self._code is not None else -1
        return self.returncode

    def wait(self, timeout=None):
        self.leader.wait(timeout)
        return self.poll()

    def kill(self):
        """Ends the import process and its group: SIGTERM to its waiting
        parent, which kills the group of its own unreaped child (so the
        number is never another's), reaps it and exits; SIGKILL to the
        parent if it has not within KILL_WAIT_S (the import process then
        dies with it: PR_SET_PDEATHSIG)."""
        if self.leader.poll() is None:
            self.leader.send_signal(signal.SIGTERM)
            try:
                self.leader.wait(KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
        self.leader.kill()

    def __del__(self):
        if getattr(self, "_status_fd", None) is not None:
            try:
                os.close(self._status_fd)
            except OSError:
                pass
