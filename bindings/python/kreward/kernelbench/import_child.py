"""The import process's own side (import_process.py starts it and is the
caller's side): the file's sandbox entered before the file first runs, then
the probes (probe.py) and the soundness check (soundness_check.py) on
request.

    python -c "from kreward.kernelbench.import_child import main; main()" FILE
then one JSON request a line on stdin: {"probes": [request, ...]} (one
answer line each, probe.py's) or {"soundness": data} (one answer line,
soundness_check.check's); {"ready": true} first, once torch is in."""
import json
import sys



def main():
    path = sys.argv[1]
    from .file_process import answer_channel, confine
    out = answer_channel()
    confine(path, gpu=False)  # before the file first runs
    import torch  # noqa: F401 - before "ready": the caller's clock for the first request starts here

    from . import probe, soundness_check
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        if "probes" in request:
            probe.answer_all(path, request["probes"], out)
            continue
        try:
            answer = soundness_check.check(request["soundness"])
        except Exception as e:  # noqa: BLE001 - the caller records why, as json_process did
            text = str(e).splitlines()[0][:300] if str(e) else ""
            answer = {"error": f"{type(e).__name__}: {text}"}
        out.write("\n" + json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
