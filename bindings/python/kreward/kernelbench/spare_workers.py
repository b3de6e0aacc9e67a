"""A slot's spare worker (Processes' mixin): the next candidate's worker
started ahead (while the candidate before it runs, or once it is done),
waited for before a timed phase where nothing freezes it, ended, and in
flight kept under the lane's cap (in_flight.LaneSpares: a place taken
before its process starts, given back once a candidate takes it or it
ends) or handed to another problem's slot of the lane
(LaneSpares.hand_over). Starting a worker, its folder and sandbox are
processes.py's."""
import time

from . import folders
from .build_env import needs_build
from .worker_process import WorkerDied, WorkerProtocolError, WorkerTimeout, printable


def _give_back_place(spare):
    """A spare taken by a candidate, or ended (its process gone): the place
    it held in its lane's cap given back (in flight: in_flight.LaneSpares).
    Once: a place given back again frees nothing."""
    place = getattr(spare, "lane_place", None)
    if place is not None:
        place.give_back()


class SpareWorkers:
    """Processes' spare: self.spare, spare_source (the source a "start"
    spare was started for), spare_folder (its fresh folder, no source
    named), lane_spares (in flight: the lane's cap), keep_spare and
    spare_ahead (the Runner's settings)."""

    def start_spare(self, next_source=None, ahead=False):
        """The next candidate's worker, started now: any source's in the
        "init" sandbox (it gets its write folder at load); in the "start"
        one next_source's where that source needs its own folder
        (_needs_own_folder), else one with a fresh folder that the next
        source without a folder of its own takes (a new candidate, as
        nearly every one in training is). ahead: asked while a candidate
        runs, after its load (only where spare_ahead is on): its ready is
        waited for before that candidate's timed batches (spare_ready).
        In flight, none where the lane has no place for it (lane_spares:
        the next candidate's worker then starts at its turn)."""
        if not self.keep_spare or self.spare is not None or (ahead and not self.spare_ahead):
            return
        place = None
        if self.lane_spares is not None:
            # a full lane would end another problem's idle spare to start
            # this one: that spare, where it fits, is this slot's instead
            if self.lane_spares.full() and self.lane_spares.hand_over(self, next_source):
                return
            place = self.lane_spares.take(self)
            if place is None:
                return
        try:
            w, source, folder = self._spawn_spare(next_source)
        except BaseException:
            if place is not None:
                place.give_back()
            raise
        # the place goes with the process (given back where it is taken or
        # ended): a close() from another thread frees the place of the spare
        # it ends, never that of one still starting
        w.beside, w.lane_place = ahead, place
        self.spare, self.spare_source, self.spare_folder = w, source, folder

    def _spawn_spare(self, next_source):
        """A spare's worker, the source it was started for and its fresh
        folder (start_spare says which it gets)."""
        if self.sandbox != "start":
            return self._spawn(), None, None
        if next_source is not None and self._needs_own_folder(next_source):
            return self._spawn(next_source), next_source, None
        ext = folders.fresh_folder(self.cache_dir)
        try:
            return self._spawn(ext=ext, launchers=True), None, ext
        except BaseException:
            folders.discard(ext)
            raise

    def _needs_own_folder(self, source):
        """Whether a "start" spare for `source` must start in the source's
        own folder: one it has (an earlier worker's, the compile stage's
        build: adopt gives no name in use) or one the compile stage will
        write before its turn (a source that builds). Any other source, as
        nearly every new candidate, takes a fresh folder's spare at its
        turn: a folder no candidate can have written, so that spare's ready
        warms the library's kernels (a source's folder may hold another
        worker's modules, loaded by nothing before the isolation filter:
        its first verify batch paid that warm, 0.6-0.9 s of verify on an
        H100 at 5403e83)."""
        return needs_build(source) or folders.has_folder(self.cache_dir, source)

    def spare_ready(self):
        """Waits for the spare's ready reply (kept by its handle for the
        candidate that takes it), at most until its start's limit
        (timeout_s from its start): the evaluation asks before its
        candidate's first timed batch, so a spare started ahead is never
        starting during a timed phase (its own, the attribution's or the
        baseline's). None, or why there is no spare now: one that failed or
        took too long is ended (the next candidate starts a worker of its
        own), never the candidate's outcome. In flight nothing asks: the
        gate freezes a spare still starting (evaluation.py)."""
        w = self.spare
        if w is None:
            return None
        try:
            ready = w.receive_ready(max(w.started + self.timeout_s - time.monotonic(), 0.1))
            why = None if ready["ok"] else f"its ready failed: {printable(ready['error'])[:400]}"
        except (WorkerDied, WorkerTimeout, WorkerProtocolError) as e:
            why = printable(e)[:400]
        if why:
            self.end_spare()
        return why

    def end_spare(self):
        """Ends the spare and removes its fresh folder, if it has one (it ran
        no candidate code); in flight its place goes back to the lane."""
        spare = self.spare
        if spare is not None:
            spare.end()
        folders.discard(self.spare_folder)
        self.spare, self.spare_source, self.spare_folder = None, None, None
        _give_back_place(spare)

    # ---- a spare handed to another problem's slot of the lane (in_flight.LaneSpares.hand_over)
    def _start_spec(self):
        """What a worker's start fixed that another slot's workers must
        share for it to take this slot's spare."""
        return (self.device, self.sandbox, self.cache_dir, self.inputs_from, self.staged, self.attribution,
                self.cuda_arch, self.pch_dir, self.use_zygote, self.ipc_why)

    def spare_fits(self, taker, source=None):
        """Whether this slot's spare could be taker's (another Processes,
        another problem's): started for no source (in the "start" sandbox a
        fresh folder's, which no candidate has written: a source's folder
        stays with its source; in "init" any, its folder comes at load),
        by the same start, and with an input region and a device buffer at
        least as large as taker's workers get; never for a source that needs
        a folder of its own in the "start" sandbox (_needs_own_folder). What ready did in it (CUDA,
        the libraries' warm-up, the library's kernels and launchers in its
        folder) is the same for every problem: the problem comes with load."""
        w = self.spare
        if w is None or not w.alive() or self._start_spec() != taker._start_spec():
            return False
        if self.sandbox == "start" and (self.spare_source is not None or not self.spare_folder):
            return False
        if self.sandbox == "start" and source is not None and taker._needs_own_folder(source):
            # (a fresh folder's spare cannot take a source with a folder of
            # its own: it would wait for its ready, then be ended unused)
            return False
        if taker.inputs_from == "caller":
            if w.region is None or len(w.region) < taker.region_bytes:
                return False
            if taker.staged:
                # (one without a buffer, where taker's workers get one, would
                # stage its candidate's batches through the host)
                if w.shared is None and taker.ipc_why is None:
                    return False
                if w.shared is not None and w.shared.nbytes < taker._shared_bytes():
                    return False
        return True

    def give_spare(self):
        """This slot's spare and its fresh folder, no longer this slot's
        (take_spare gives them to another; its lane place goes with it)."""
        w, folder = self.spare, self.spare_folder
        self.spare, self.spare_source, self.spare_folder = None, None, None
        return w, folder

    def take_spare(self, w, folder):
        """Another slot's spare (give_spare), this slot's from now on: its
        replies bounded by this problem's outputs, its launch time measured
        again before its load (its ready ran beside other work), its place
        in the lane's cap held for this slot."""
        w.max_payload = self._payload_bound()
        w.beside = True
        place = getattr(w, "lane_place", None)
        if place is not None:
            place.holder = self
        self.spare, self.spare_source, self.spare_folder = w, None, folder

    @property
    def starts_ahead(self):
        """Whether an evaluation starts the next candidate's worker while its
        own candidate runs (start_spare ahead, then spare_ready)."""
        # not in the "init" sandbox: there a spare runs unsandboxed until its
        # own load, and beside a running candidate it could be traced or
        # its memory read where Yama and Landlock are missing (review
        # helper-15); it starts after the candidate's tree has ended
        return bool(self.keep_spare and self.spare_ahead and self.sandbox != "init")
