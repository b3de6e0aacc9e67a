"""Jobs the client names (KernelGYM's task_id) or asks not to wait for:
kept by id so /status/{id} and /results/{id} can answer later.

Bounded: past max_tasks, the oldest finished tasks are forgotten (a
pending task never is: the queue bound keeps their number below
max_queue). A task resubmitted under the id of a kept one returns the kept
one (KernelGYM's server does the same unless force_refresh), which makes a
client's retry after a lost response free."""
import collections
import time


class Task:
    __slots__ = ("id", "submitted", "completed", "future", "text", "fetched")

    def __init__(self, task_id, future):
        self.id, self.future = task_id, future
        self.submitted, self.completed = time.time(), None
        self.text, self.fetched = None, False

    @property
    def done(self):
        return self.text is not None


class TaskStore:
    def __init__(self, max_tasks=100_000):
        self.max_tasks = max_tasks
        self._tasks = collections.OrderedDict()

    def __len__(self):
        return len(self._tasks)

    def get(self, task_id):
        return self._tasks.get(task_id)

    def add(self, task_id, future):
        """Keeps a job's future under its id (event loop only)."""
        task = Task(task_id, future)
        self._tasks.pop(task_id, None)
        self._tasks[task_id] = task

        def done(fut, task=task):
            if not fut.cancelled():
                task.text, task.completed = fut.result(), time.time()
        future.add_done_callback(done)
        self._evict()
        return task

    def _evict(self):
        over = len(self._tasks) - self.max_tasks
        if over <= 0:
            return
        for task_id in [t.id for t in self._tasks.values() if t.done][:over]:
            del self._tasks[task_id]

    def unfetched(self):
        """Finished tasks whose report no client has read yet."""
        return sum(1 for t in self._tasks.values() if t.done and not t.fetched)
