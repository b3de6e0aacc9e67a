"""The HTTP routes of `kreward serve` (docs/serve.md), on Starlette.

native      POST /v1/evaluate, /v1/evaluate/batch; GET /v1/jobs/{id},
            /v1/status, /v1/problems, /health, /metrics
KernelGYM   POST /evaluate, /evaluate/batch; GET /status/{id}, /results/{id}
OpenRLHF    POST /openrlhf   (--remote_rm_url http://HOST:PORT/openrlhf)
slime       POST /slime      (--rm-url http://HOST:PORT/slime)

Reports go out as the library wrote them (the JSON text of kr_report_json
spliced into the response, never parsed and re-encoded on the native
routes). Bad input is a 4xx naming what is wrong; a full queue is 429 with
Retry-After; a draining server is 503 with Retry-After."""
import asyncio
import json
import time
import uuid

from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ..problems import looks_like_kernelbench
from ..openrlhf_answer import response_of
from . import formats, jobs
from .engine import Draining, QueueFull
from .jobs import BadRequest
from .middleware import BearerToken, LimitBody

JSON = "application/json"


def error(status, message, headers=None):
    return JSONResponse({"error": message, "detail": message}, status_code=status, headers=headers)


async def body_of(request):
    limit, chunks, seen = request.app.state.server.options.max_body, [], 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > limit:
            raise BadRequest(f"request body over the limit of {limit} bytes", 413)
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        return json.loads(raw)
    except ValueError as e:
        raise BadRequest(f"malformed JSON: {e}") from e


def handle(fn):
    """Maps the engine's and the parser's refusals to HTTP answers."""
    async def endpoint(request):
        try:
            return await fn(request, request.app.state.server)
        except BadRequest as e:
            return error(e.status, str(e))
        except QueueFull as e:
            return error(429, str(e), {"Retry-After": str(e.retry_after)})
        except Draining:
            return error(503, "the server is shutting down; retry on another replica",
                         {"Retry-After": "5"})
    endpoint.__name__ = fn.__name__
    return endpoint


def _obj(d, what="the request body"):
    if not isinstance(d, dict):
        raise BadRequest(f"{what}: a JSON object")
    return d


def _list(d, key, what=""):
    v = d.get(key)
    if not isinstance(v, list) or not v:
        raise BadRequest(f"{what}{key}: a non-empty list")
    return v


def _batch_size(server, n):
    if n > server.options.max_batch:
        raise BadRequest(f"a batch of {n} jobs; the limit is {server.options.max_batch}", 413)


# ---- native ----

async def _make(server, d, defaults=None, where=""):
    """jobs.make in a worker thread: resolving a KernelBench problem the first
    time imports it (probes in subprocesses), which the event loop must not
    wait for."""
    return await asyncio.to_thread(jobs.make, server, d, defaults, where)


async def _make_all(server, items):
    """Jobs for [(spec, defaults, where)], all or none (the first bad one
    refuses the request), built in one worker thread."""
    return await asyncio.to_thread(lambda: [jobs.make(server, d, defaults, where)
                                            for d, defaults, where in items])


async def v1_evaluate(request, server):
    d = _obj(await body_of(request))
    job = await _make(server, d)
    if d.get("wait", True) is False:
        task_id = d.get("id") or uuid.uuid4().hex
        server.tasks.add(task_id, server.engine.submit([job])[0])
        return JSONResponse({"id": task_id, "status": "pending"}, status_code=202)
    text = (await server.engine.run([job]))[0]
    return Response(text, media_type=JSON)


async def v1_evaluate_batch(request, server):
    d = _obj(await body_of(request))
    defaults = {k: d[k] for k in ("problem", "reward", "preset") if k in d}
    if "jobs" in d:
        specs = _list(d, "jobs")
    elif "completions" in d or "sources" in d:
        key = "completions" if "completions" in d else "sources"
        field = key[:-1]
        problems = d.get("problems")
        items = _list(d, key)
        if problems is not None and (not isinstance(problems, list) or len(problems) != len(items)):
            raise BadRequest(f"problems: a list as long as {key}")
        specs = [{field: c, **({"problem": problems[i]} if problems else {})}
                 for i, c in enumerate(items)]
    else:
        raise BadRequest("a batch needs \"jobs\" (job objects), or \"completions\"/\"sources\" "
                         "with \"problem\" or \"problems\"")
    _batch_size(server, len(specs))
    built = await _make_all(server, [(s, defaults, f"jobs[{i}]: ") for i, s in enumerate(specs)])
    texts = await server.engine.run(built)
    return Response('{"reports": [' + ",".join(texts) + "]}", media_type=JSON)


async def v1_job(request, server):
    task = server.tasks.get(request.path_params["id"])
    if task is None:
        return error(404, f"no job {request.path_params['id']!r}")
    if not task.done:
        return JSONResponse({"id": task.id, "status": "pending"})
    task.fetched = True
    return Response(f'{{"id": {json.dumps(task.id)}, "status": "done", "report": {task.text}}}',
                    media_type=JSON)


async def v1_status(request, server):
    e = server.engine
    status = await asyncio.to_thread(server.rail.status)
    return JSONResponse({"pool": status.get("pool"), "kernelbench": status.get("kernelbench"),
                         "rail": status["rail"], "compile_only": server.compile_only,
                         "queue": {"inflight": e.inflight, "max": e.max_queue,
                                   "draining": e.draining},
                         "tasks": len(server.tasks), "counters": dict(e.counters),
                         "verdicts": dict(e.verdicts)})


async def v1_problems(request, server):
    return JSONResponse({"problems": server.registry.names()})


async def health(request, server):
    e = server.engine
    return JSONResponse({"status": "draining" if e.draining else "ok", "mode": server.mode,
                         "compile_only": server.compile_only, "inflight": e.inflight},
                        status_code=503 if e.draining else 200)


def not_judged_error(rows):
    """503 for a request with candidates that were not judged (the OpenRLHF
    and slime routes' answers are numbers, and none is given for those):
    which ones and why, so the trainer's log says it."""
    detail = "; ".join(f"[{i}] {verdict}: {why}" for i, verdict, why in rows[:8])
    return error(503, f"not judged: {len(rows)} candidate(s) of this request could not be "
                      f"judged here, and a reward is never given for what was not judged "
                      f"({detail})", {"Retry-After": "30"})


async def metrics(request, server):
    e = server.engine
    lines = [
        "# TYPE kreward_jobs_inflight gauge", f"kreward_jobs_inflight {e.inflight}",
        "# TYPE kreward_queue_capacity gauge", f"kreward_queue_capacity {e.max_queue}",
        "# TYPE kreward_jobs_accepted_total counter",
        f"kreward_jobs_accepted_total {e.counters['accepted']}",
        "# TYPE kreward_jobs_reported_total counter",
        f"kreward_jobs_reported_total {e.counters['reported']}",
        "# TYPE kreward_requests_rejected_total counter",
        f'kreward_requests_rejected_total{{reason="queue_full"}} {e.counters["rejected_full"]}',
        f'kreward_requests_rejected_total{{reason="draining"}} {e.counters["rejected_draining"]}',
        "# TYPE kreward_job_seconds_total counter", f"kreward_job_seconds_total {e.job_seconds}",
        "# TYPE kreward_reports_total counter",
    ]
    lines += [f'kreward_reports_total{{verdict="{v}"}} {n}' for v, n in sorted(e.verdicts.items())]
    return PlainTextResponse("\n".join(lines) + "\n",
                             media_type="text/plain; version=0.0.4")


# ---- KernelGYM ----

# KernelGYM's own client (hkust-nlp/KernelGYM, drkernel/kernel/rewards/
# reward_client.py) sends the whole KernelBench problem file as
# reference_code, the ModelNew module as kernel_code, and options of its
# own evaluation: how many correctness and timed trials (kreward decides
# its own: every case on fresh inputs, batches sized to the clock), the
# backend (cuda or triton: both are ModelNew modules here), a timeout (the
# scheduler's deadlines hold), flags its own server drops. entry_point
# names the reference's class: Model is the format's, and the only one.
# What else a task carries is read by nothing here.


def _kernelgym_job(server, d, where=""):
    d = _obj(d, f"{where}a task")
    task_id = d.get("task_id")
    if not isinstance(task_id, str) or not 1 <= len(task_id) <= 100:
        raise BadRequest(f"{where}task_id: 1 to 100 characters")
    code = d.get("kernel_code")
    if not isinstance(code, str) or not code.strip():
        raise BadRequest(f"{where}kernel_code: required")
    entry = d.get("entry_point", "Model")
    if entry != "Model":
        raise BadRequest(f"{where}entry_point: {entry!r}: the reference must be the file's class "
                         "Model (KernelBench's format)")
    if "problem" in d:
        problem = d["problem"]
    elif isinstance(d.get("reference_code"), str) and d["reference_code"].strip():
        problem = d["reference_code"]
        if not looks_like_kernelbench(problem):
            raise BadRequest(f"{where}reference_code: not a KernelBench problem file (it needs a "
                             "top-level `class Model(` and `def get_inputs(`)")
    else:
        raise BadRequest(f"{where}reference_code: required (the KernelBench problem file), or "
                         "problem (a registered name or a kreward problem's JSON)")
    # a fenced completion is reduced to its code; plain code is taken as is
    field = "completion" if "```" in code else "source"
    spec = {"problem": problem, field: code, "reward": d.get("reward"),
            "preset": d.get("preset"), "name": task_id}
    return task_id, bool(d.get("force_refresh", False)), jobs.make(server, spec, where=where)


def _kernelgym_result(server, task):
    task.fetched = True
    return formats.kernelgym(task.id, json.loads(task.text), task.submitted, task.completed)


async def _kernelgym_run(server, items):
    """Tasks for (task_id, force_refresh, job): kept ones reused, the others
    submitted together (all or none: QueueFull refuses the lot)."""
    tasks, todo = [], []
    for task_id, refresh, job in items:
        kept = server.tasks.get(task_id)
        if kept is not None and not refresh:
            tasks.append(kept)
        else:
            tasks.append(None)
            todo.append((len(tasks) - 1, task_id, job))
    futures = server.engine.submit([job for _, _, job in todo]) if todo else []
    for (i, task_id, _), fut in zip(todo, futures):
        tasks[i] = server.tasks.add(task_id, fut)
    await asyncio.gather(*[t.future for t in tasks])
    await asyncio.sleep(0)  # the store's done-callbacks run before we read the tasks
    return tasks


async def kg_evaluate(request, server):
    d = await body_of(request)
    item = await asyncio.to_thread(_kernelgym_job, server, d)
    task = (await _kernelgym_run(server, [item]))[0]
    return JSONResponse(_kernelgym_result(server, task))


async def kg_evaluate_batch(request, server):
    d = _obj(await body_of(request))
    batch_id = d.get("batch_id")
    if not isinstance(batch_id, str) or not batch_id:
        raise BadRequest("batch_id: required")
    specs = _list(d, "tasks")
    _batch_size(server, len(specs))
    items = await asyncio.to_thread(
        lambda: [_kernelgym_job(server, t, f"tasks[{i}]: ") for i, t in enumerate(specs)])
    ids = [i[0] for i in items]
    if len(set(ids)) != len(ids):
        raise BadRequest("tasks: task_id values must differ within a batch")
    submitted = formats.iso(time.time())
    results = [_kernelgym_result(server, t) for t in await _kernelgym_run(server, items)]
    failed = sum(r["status"] != "completed" for r in results)
    return JSONResponse({"batch_id": batch_id, "total_tasks": len(results),
                         "completed_tasks": len(results) - failed, "failed_tasks": failed,
                         "results": results, "batch_status": "completed",
                         "submitted_at": submitted,
                         "completed_at": formats.iso(time.time())})


async def kg_status(request, server):
    task = server.tasks.get(request.path_params["id"])
    if task is None:
        return error(404, f"Task {request.path_params['id']} not found")
    if not task.done:
        return JSONResponse({"task_id": task.id, "status": "processing"})
    status = json.loads(task.text).get("verdict") not in formats.UNSCORED
    return JSONResponse({"task_id": task.id, "status": "completed" if status else "failed",
                         "progress": 100.0})


async def kg_results(request, server):
    task = server.tasks.get(request.path_params["id"])
    if task is None or not task.done:
        return error(404, f"Task {request.path_params['id']} not found"
                     + (" (still running)" if task is not None else ""))
    return JSONResponse(_kernelgym_result(server, task))


# ---- OpenRLHF, slime ----

async def openrlhf(request, server):
    d = _obj(await body_of(request))
    queries = _list(d, "query")
    labels = d.get("labels")
    if not isinstance(labels, list) or len(labels) != len(queries):
        raise BadRequest("labels: the problems, a list as long as query")
    prompts = d.get("prompts")
    if prompts is not None and (not isinstance(prompts, list) or len(prompts) != len(queries)):
        raise BadRequest("prompts: a list as long as query")
    _batch_size(server, len(queries))
    built = await _make_all(server, [({"problem": label, "completion": response_of(
        q, prompts[i] if prompts else None)}, None, f"query[{i}]: ")
        for i, (q, label) in enumerate(zip(queries, labels))])
    reports = [json.loads(t) for t in await server.engine.run(built)]
    missing = formats.not_judged(reports)
    if missing:
        return not_judged_error(missing)
    return JSONResponse(formats.openrlhf(reports, server.rewards.bounds(None)))


async def slime(request, server):
    d = _obj(await body_of(request))
    if "response" not in d:
        raise BadRequest("response: required (the model's completion)")
    meta = d.get("metadata") if isinstance(d.get("metadata"), dict) else {}
    problem = meta.get("problem", d.get("label"))
    if problem is None:
        raise BadRequest("label: the problem (a registered name or its JSON)")
    job = await _make(server, {"problem": problem, "completion": d["response"]})
    report = json.loads((await server.engine.run([job]))[0])
    missing = formats.not_judged([report])
    if missing:
        return not_judged_error(missing)
    detail = request.query_params.get("detail", "") not in ("", "0", "false")
    return JSONResponse(formats.slime(report, detail))


ROUTES = [
    ("/v1/evaluate", v1_evaluate, ["POST"]),
    ("/v1/evaluate/batch", v1_evaluate_batch, ["POST"]),
    ("/v1/jobs/{id}", v1_job, ["GET"]),
    ("/v1/status", v1_status, ["GET"]),
    ("/v1/problems", v1_problems, ["GET"]),
    ("/health", health, ["GET"]),
    ("/metrics", metrics, ["GET"]),
    ("/evaluate", kg_evaluate, ["POST"]),
    ("/evaluate/batch", kg_evaluate_batch, ["POST"]),
    ("/status/{id}", kg_status, ["GET"]),
    ("/results/{id}", kg_results, ["GET"]),
    ("/openrlhf", openrlhf, ["POST"]),
    ("/slime", slime, ["POST"]),
]


def create_app(server):
    app = Starlette(routes=[Route(p, handle(f), methods=m) for p, f, m in ROUTES])
    app.state.server = server
    return LimitBody(BearerToken(app, server.options.token), server.options.max_body)
