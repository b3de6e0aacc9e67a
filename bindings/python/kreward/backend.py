"""One reward backend, chosen by argument or environment: this machine's
workers (backends/local.py Evaluator), a `kreward serve` URL (backends/http.py
Client) or a Ray cluster (backends/ray.py RayPool). All three implement the
Evaluator protocol (backends/base.py): evaluate(problem, source),
evaluate_completion(problem, completion), evaluate_batch(problems, sources),
evaluate_async(problem, source), score_of(report), no_code(why) and close();
the reports they return read alike (verdict, reward, to_dict, close).

    ev = kreward.backend.resolve()            # KREWARD_URL, KREWARD_RAY or local
    ev = kreward.backend.resolve("http://rewards:8000")
    ev = kreward.backend.resolve("ray")       # the running Ray cluster

Problems of either kind (kreward.problems): a path or the problem's JSON or
text works everywhere (a path is read here and sent inline to a server or
actor); a registered name works with a server or Ray (their problem
directories) and, for KernelBench files, locally once registered."""
import os

from .backends.base import is_backend as _is_backend

# the environment a trainer's reward process reads
URL_ENV, RAY_ENV, BACKEND_ENV = "KREWARD_URL", "KREWARD_RAY", "KREWARD_BACKEND"


def resolve(backend=None, **options):
    """The backend for `backend`:
    - an object with the Evaluator's methods: itself;
    - "http://..." or "https://...": a Client (options: token, reward,
      preset, fallback, timeout, max_wait);
    - "ray", "ray:auto", "ray:ADDRESS" or "ray://HOST:PORT": a RayPool over
      that cluster (options: RayPool's);
    - "local": an Evaluator (options: Evaluator's);
    - "standin": the test double that stands in for the GPU
      (backends/standin.py: verdicts written in the candidates; options:
      reward, fallback, preset): for testing a trainer's wiring, never for
      training;
    - None: $KREWARD_BACKEND if set (any of the above), else $KREWARD_URL if
      set, else $KREWARD_RAY ("1"/"auto" or an address) if set, else local."""
    if backend is not None and not isinstance(backend, str):
        if _is_backend(backend):
            return backend
        raise TypeError(f"a backend is a URL, 'ray[:ADDRESS]', 'local' or an object with "
                        f"evaluate/evaluate_batch/score_of, not {type(backend).__name__}")
    if backend is None:
        if os.environ.get(BACKEND_ENV):
            backend = os.environ[BACKEND_ENV]
        elif os.environ.get(URL_ENV):
            backend = os.environ[URL_ENV]
        elif os.environ.get(RAY_ENV) and os.environ[RAY_ENV] not in ("0", ""):
            ray_env = os.environ[RAY_ENV]
            backend = "ray" if ray_env in ("1", "auto") else "ray:" + ray_env
        else:
            backend = "local"
    if backend.startswith(("http://", "https://")):
        from .backends.http import Client
        return Client(backend, **options)
    if backend == "ray" or backend.startswith(("ray:", "ray://")):
        from .backends.ray import RayPool
        address = "auto" if backend in ("ray", "ray:auto") else (
            backend if backend.startswith("ray://") else backend[len("ray:"):])
        return RayPool.from_cluster(address, **options)
    if backend == "local":
        from .backends.local import Evaluator
        return Evaluator(**options)
    if backend == "standin":
        from .backends.standin import StandIn
        return StandIn(**{k: v for k, v in options.items() if k in ("reward", "fallback", "preset")})
    raise ValueError(f"backend {backend!r}: an http(s):// URL, 'ray[:ADDRESS]', 'local' or "
                     "'standin'")
