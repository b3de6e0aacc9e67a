"""The build folders of a Runner's cache_dir, where each candidate's worker
may write (its sandbox's one write grant): one per source, named by the
source's hash, so no candidate can plant files in another's build; a
"start" spare's fresh folder, made before its source is known, which the
next source without a folder adopts through a link; the sweep of the fresh
folders a killed trainer left; and the environment that points a worker's
temporary files and compiler caches into its folder."""
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import threading

# a spare's fresh folder: the process that made it, and a random part
_SPARE = re.compile(r"spare-(\d+)-[0-9a-f]{24}")
# in it, a file this process holds a lock on while the folder is its
# spare's (a pid alone does not tell: another container or host sharing
# cache_dir has its own pids); a candidate never writes in an unadopted one
_OWNER = "owner.lock"
_held, _held_lock = {}, threading.Lock()  # folder -> the locked descriptor


def _name(cache_dir, source):
    return os.path.join(cache_dir, hashlib.sha256(source.encode()).hexdigest()[:24])


def source_folder(cache_dir, source):
    """The build folder of a source, made here (with its tmp/)."""
    ext = _name(cache_dir, source)
    try:
        os.makedirs(os.path.join(ext, "tmp"), exist_ok=True)
    except OSError:
        # a link to a spare's folder someone removed: made anew (another
        # Runner on this cache_dir may have done so first)
        if os.path.islink(ext) and not os.path.exists(ext):
            try:
                os.unlink(ext)
            except (FileNotFoundError, IsADirectoryError):
                pass
        os.makedirs(os.path.join(ext, "tmp"), exist_ok=True)
    return ext


# in cache_dir: a worker outside the "start" sandbox ran there ("init", or
# none). Its candidate's threads started before its sandbox have the user's
# file access, so any folder of that cache_dir (a fresh spare's, the
# reference's) may hold what they left: from then on a "start" Runner there
# loads nothing from a Triton cache before the isolation filter (no warm of
# the driver and the library's kernels in ready, nothing planted). Never
# removed: a cache_dir of its own brings that speed back.
_UNSANDBOXED = ".kreward-unsandboxed-workers"
# the cache_dirs this process marked (their real paths): a candidate of an
# "init" worker, with the user's file access, could remove the file
_marked, _marked_lock = set(), threading.Lock()


def mark_unsandboxed(cache_dir):
    """Marks cache_dir as written by workers outside the "start" sandbox
    (again at each such worker's start: the file may have been removed)."""
    os.makedirs(cache_dir, exist_ok=True)
    with _marked_lock:
        _marked.add(os.path.realpath(cache_dir))
    try:
        os.close(os.open(os.path.join(cache_dir, _UNSANDBOXED),
                         os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644))
    except FileExistsError:
        pass
    except OSError:
        if not os.path.lexists(os.path.join(cache_dir, _UNSANDBOXED)):
            raise


def unsandboxed(cache_dir):
    """Whether workers outside the "start" sandbox have run on cache_dir
    (this process's or another's)."""
    if os.path.lexists(os.path.join(cache_dir, _UNSANDBOXED)):
        return True
    with _marked_lock:
        return os.path.realpath(cache_dir) in _marked


def any_unsandboxed():
    """Whether this process ran workers outside the "start" sandbox on any
    cache_dir (their candidates' threads, with the user's file access,
    could write a folder of every other cache_dir too)."""
    with _marked_lock:
        return bool(_marked)


def has_folder(cache_dir, source):
    """Whether source has a build folder (or a link to a spare's) now."""
    return os.path.lexists(_name(cache_dir, source))


def fresh_folder(cache_dir):
    """A build folder for a "start" spare started before its source is
    known: new, empty, named by no source (adopt links the source's name to
    it when one takes it), and by this process (sweep_orphan_spares)."""
    name = f"spare-{os.getpid()}-{secrets.token_hex(12)}"
    # made under a name no sweep reads, its lock taken, then renamed into
    # place: a sweep never meets it without its lock held (another
    # trainer's, in another pid namespace, would judge its pid dead)
    making, ext = os.path.join(cache_dir, ".making-" + name), os.path.join(cache_dir, name)
    fd = -1
    try:
        os.makedirs(os.path.join(making, "tmp"))
        fd = os.open(os.path.join(making, _OWNER), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(making, ext)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        shutil.rmtree(making, ignore_errors=True)
        raise
    with _held_lock:
        _held[ext] = fd
    return ext


def _release(ext):
    with _held_lock:
        fd = _held.pop(ext, None)
    if fd is not None:
        os.close(fd)


def adopt(cache_dir, spare_ext, source):
    """Gives a "start" spare's fresh folder to source: its name (the
    source's hash, as source_folder names it) becomes a link to it, and the
    worker loads the source under that name (torch writes the paths it
    builds with into build.ninja: a later worker of the same source, under
    the same name, finds its builds current). Returns the name; None when
    the source has a folder already (its earlier builds are in it) or the
    link cannot be made."""
    name = _name(cache_dir, source)
    try:
        # relative: both stand in cache_dir (a relative cache_dir would
        # make an absolute-looking target dangle), and moving it keeps them
        os.symlink(os.path.basename(spare_ext), name)
    except OSError:
        return None
    _release(spare_ext)  # linked: never swept again
    return name


def discard(spare_ext):
    """Removes an unused spare's fresh folder (it ran no candidate code)."""
    if spare_ext:
        shutil.rmtree(spare_ext, ignore_errors=True)
        _release(spare_ext)


def worker_env(ext):
    """A worker's temporary files and compiler caches, inside its folder."""
    return {"TMPDIR": os.path.join(ext, "tmp"), "TRITON_HOME": ext,
            "TRITON_CACHE_DIR": os.path.join(ext, "triton"),
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(ext, "inductor")}


def _take_orphan(path, pid):
    """A spare folder whose owner is gone, its lock now held by this
    process: the locked descriptor (-1 for a folder without a lock, an
    older version's, whose pid is not alive here), or None where its owner
    lives (its lock held by any process anywhere on this kernel) or it
    cannot be told."""
    try:
        fd = os.open(os.path.join(path, _OWNER), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None if _alive(pid) else -1
    except OSError:
        return None  # (unreadable: leave it)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError:
        os.close(fd)
        return None


def _linked(cache_dir):
    """The folder names that a link in cache_dir names (spares sources took)."""
    try:
        names = os.listdir(cache_dir)
    except OSError:
        return set()
    taken = set()
    for n in names:
        try:
            taken.add(os.path.basename(os.readlink(os.path.join(cache_dir, n))))
        except OSError:  # not a link
            pass
    return taken


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's: it exists
        pass
    return True


def sweep_orphan_spares(cache_dir):
    """Removes the fresh folders of "start" spares that no source took (no
    link in cache_dir names them) and whose Runner's process is gone (no
    one holds their lock): a trainer killed before close() leaves one per
    warm Runner, and nothing would ever remove it. A folder of a live
    process (this one's other Runners, another trainer's, in another
    container on the same cache) stays, and so does one a source took
    (its builds are that source's cache). Returns how many went."""
    try:
        names = os.listdir(cache_dir)
    except OSError:
        return 0
    taken = _linked(cache_dir)
    gone = 0
    for n in names:
        m = _SPARE.fullmatch(n)
        path = os.path.join(cache_dir, n)
        if not m or n in taken or os.path.islink(path):
            continue
        with _held_lock:  # this process's own (where flock is per process: NFS)
            if path in _held:
                continue
        fd = _take_orphan(path, int(m.group(1)))
        if fd is None:
            continue
        try:
            # the links read again with its lock held: an adoption links the
            # source's name before its owner lets the lock go, so a folder
            # adopted since the first reading is seen here
            if n in _linked(cache_dir):
                continue
            shutil.rmtree(path, ignore_errors=True)
            gone += not os.path.exists(path)
        finally:
            if fd >= 0:
                os.close(fd)
    return gone


def clear_stale_locks(ext):
    """Removes torch's build locks (`<ext>/<name>/lock`, its FileBaton) that a
    worker killed mid-build left: the next load of the same source would
    wait on one until its own deadline. Only once every process of that
    worker is gone (a live build holds its lock). The folder is the
    candidate's, so nothing here follows a link: each level is opened with
    O_NOFOLLOW and the lock unlinked relative to it (a link named `lock`
    goes, never what it points at). Returns how many went."""
    gone = 0
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        # (the folder itself is the library's: a source's name may be its
        # link to an adopted spare's folder; below it, the candidate's)
        top = os.open(os.path.realpath(ext), flags)
    except OSError:
        return 0
    try:
        for name in os.listdir(top):
            try:
                sub = os.open(name, flags, dir_fd=top)
            except OSError:  # not a folder, or a link
                continue
            try:
                os.unlink("lock", dir_fd=sub)
                gone += 1
            except OSError:
                pass
            finally:
                os.close(sub)
    finally:
        os.close(top)
    return gone
