"""Report a training program's metrics to `expctl run` (docs/program.md), and read a store's runs
into pandas for analysis (docs/analysis.md). Standard library only, until an analysis call
imports pandas.

    import expctl
    params = expctl.params()            # program.params of the spec ({} outside expctl)
    ...
    expctl.log(step, loss=loss.item(), samples=len(batch))

    table = expctl.runs(status="completed")        # a DataFrame, one row per run
    curve = expctl.series(table.id[0], "loss")     # rank, step, value at full resolution

Outside `expctl run` (no EXPCTL_METRICS_FD) every call is a no-op, so the same script still runs
under torchrun or plain python; so is every call in a process whose descriptor EXPCTL_METRICS_FD
is not the pipe expctl made (EXPCTL_METRICS_PIPE names it), e.g. a subprocess of the rank. Each record is one JSON line of at most 4096 bytes, written with
one os.write, so several threads or processes of a rank may log at once.

While the program's main thread makes progress, a daemon thread tells expctl so (a heartbeat
every few seconds, naming the line the main thread is at). A main thread stuck in one place -
a collective that never returns, a deadlock - stops the heartbeats, and expctl names the rank as
hung after distributed.timeout_s.

At exit it tells expctl which modules under the folder the program started in were imported, so
that a local module whose content is not in the spec hash (no program.files pattern covers it)
is named at the end of the run.
"""

import atexit
import json
import math
import os
import stat
import sys
import threading
import time

__all__ = ["log", "params", "heartbeat", "active", "seed", "run_id", "checkpoint_dir", "resuming", "rank",
           "runs", "series", "compare"]

_PIPE_BUF = 4096
_HEARTBEAT_EVERY_S = 2.0
_fd = None
_lock = threading.Lock()


def _metrics_fd():
    global _fd
    if _fd is None:
        text = os.environ.get("EXPCTL_METRICS_FD", "")
        _fd = _verified_metrics_fd(int(text)) if text.isdigit() else -1
    return _fd


def _verified_metrics_fd(fd):
    """`fd` when it is the pipe `expctl run` made for this rank, else -1 (with one warning).

    The launcher names the pipe in EXPCTL_METRICS_PIPE ("device:inode"); a process that inherited
    the variables but not the pipe - a subprocess, a multiprocessing spawn child - finds another
    file at that number, and writing there would corrupt it. The pipe found is made
    close-on-exec: programs this process starts do not get it unless it hands it on
    (subprocess's pass_fds)."""
    try:
        info = os.fstat(fd)
    except OSError:
        info = None
    if info is None or not stat.S_ISFIFO(info.st_mode) or \
            os.environ.get("EXPCTL_METRICS_PIPE") != "%d:%d" % (info.st_dev, info.st_ino):
        sys.stderr.write("expctl: warning: descriptor %d is not the metrics pipe of `expctl run` (this process "
                         "inherited EXPCTL_METRICS_FD but not the pipe): expctl.log does nothing here\n" % fd)
        return -1
    os.set_inheritable(fd, False)
    return fd


def active():
    """True when running under `expctl run` (metrics go to expctl)."""
    return _metrics_fd() >= 0


def _write(record):
    fd = _metrics_fd()
    if fd < 0:
        return
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
    if len(line) > _PIPE_BUF:
        raise ValueError("expctl.log: the record is %d bytes, over the %d-byte limit of one atomic write; "
                         "log fewer or shorter fields" % (len(line), _PIPE_BUF))
    try:
        os.write(fd, line)
    except OSError:
        pass  # expctl is gone (the run is being stopped): training code must not fail for it


def _number(name, value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return float(value)  # floats, numpy scalars, one-element tensors
    except (TypeError, ValueError):
        raise TypeError("expctl.log: %s must be a number, got %r" % (name, type(value).__name__))


def log(step, **metrics):
    """Records one step of this rank: `step` (an int >= 0) and numeric metrics, e.g. loss=0.5,
    samples=64 (samples in this step: expctl derives samples_per_sec). NaN and inf are kept."""
    if not active():
        return
    record = {"step": int(step)}
    for name, value in metrics.items():
        record[name] = _number(name, value)
    record["time"] = time.time()
    _write(record)
    _beat.progress()


def heartbeat(where=None):
    """Says the rank is alive (e.g. during a long evaluation); `where` is shown if it hangs later."""
    if active():
        _write({"heartbeat": str(where) if where is not None else ""})


def params():
    """program.params of the spec as a dict ({} outside expctl)."""
    path = os.environ.get("EXPCTL_PARAMS_FILE")
    if not path:
        return {}
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def seed():
    """The spec's seed (0 outside expctl)."""
    return int(os.environ.get("EXPCTL_SEED", "0"))


def rank():
    """This process's global rank (RANK, 0 when unset)."""
    return int(os.environ.get("RANK", "0"))


def run_id():
    """The run's id, or None outside expctl."""
    return os.environ.get("EXPCTL_RUN_ID")


def checkpoint_dir():
    """Where the program keeps its checkpoints for `expctl resume`, or None outside expctl."""
    return os.environ.get("EXPCTL_CHECKPOINT_DIR")


def resuming():
    """True when `expctl resume` restarted the program: load the newest checkpoint."""
    return os.environ.get("EXPCTL_RESUME") == "1"


class _Heartbeat:
    """Beats while the main thread moves: its innermost frame or instruction changed, or it logged."""

    def __init__(self):
        self._main = threading.main_thread().ident
        self._last = None
        self._logged = False

    def progress(self):
        self._logged = True

    def _where(self):
        frame = sys._current_frames().get(self._main)
        if frame is None:
            return None, ""
        return (id(frame.f_code), frame.f_lineno, frame.f_lasti), "%s:%d in %s" % (
            os.path.basename(frame.f_code.co_filename), frame.f_lineno, frame.f_code.co_name)

    def run(self):
        while True:
            time.sleep(_HEARTBEAT_EVERY_S)
            state, where = self._where()
            if state is None:
                return  # the main thread has ended
            if state != self._last or self._logged:
                self._last, self._logged = state, False
                heartbeat(where)


_beat = _Heartbeat()
if active():
    threading.Thread(target=_beat.run, name="expctl-heartbeat", daemon=True).start()


_WORKDIR = os.path.realpath(os.getcwd())
_OWN_DIR = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))


def _local_module_files():
    """The files of the imported modules that lie under the folder the program started in (its
    own code, not the interpreter's or site-packages'), this module excepted."""
    files = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            continue
        real = os.path.realpath(path)
        if real.startswith(_WORKDIR + os.sep) and not real.startswith(_OWN_DIR + os.sep) and os.path.isfile(real):
            files.add(real)
    return sorted(files)


def _report_local_modules():
    """At exit: tells expctl which local modules the program imported (a `modules` line, split to
    stay atomic), so that one no program.files pattern hashes is named (docs/program.md)."""
    batch = []
    for path in _local_module_files():
        if batch and len(json.dumps({"modules": batch + [path]})) + 1 > _PIPE_BUF:
            _write({"modules": batch})
            batch = []
        if len(json.dumps({"modules": [path]})) + 1 <= _PIPE_BUF:
            batch.append(path)
    if batch:
        _write({"modules": batch})


if active():
    atexit.register(_report_local_modules)


# ---------------------------------------------------------------------------------------------
# Analysis: a store's runs in a notebook (docs/analysis.md). Everything is read through the
# `expctl` binary's JSON, so a SQLite file and a team server read alike.

_RUN_COLUMNS = ("id", "name", "status", "tags", "spec_hash", "environment_hash", "started_at", "ended_at",
                "duration_s", "exit_code", "root_cause", "run_dir")
_FILTERS = {"status": "--status", "tag": "--tag", "spec": "--spec", "limit": "--limit"}


def _binary():
    import shutil
    path = os.environ.get("EXPCTL") or shutil.which("expctl")
    if not path:
        raise FileNotFoundError("expctl: no expctl binary found: put it on PATH or set EXPCTL=/path/to/expctl")
    return path


def _call(args, db, ok=(0,)):
    """The JSON document `expctl [--db DB] ARGS` prints; its own one-line error when it fails."""
    import subprocess
    argv = [_binary()] + (["--db", str(db)] if db is not None else []) + list(args)
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode not in ok:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise RuntimeError("expctl %s exited %d: %s" % (" ".join(args), done.returncode,
                                                        lines[-1] if lines else "(no message)"))
    return json.loads(done.stdout)


def _flatten(prefix, value, into):
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            _flatten(prefix + "." + key if prefix else key, inner, into)
    else:
        into[prefix] = value


def runs(db=None, **filters):
    """The store's runs as a pandas DataFrame, newest first: one row per run with its id, name,
    status, tags (a list), spec hash, times, exit code and root cause; every value of its spec as a
    dotted column ("optim.lr", "data.batch_size"); every figure of its summary under its own name
    ("final_train_loss", "eval_accuracy", ...; "summary.<name>" where that clashes).

    db: a SQLite file or a server's connection string (default: EXPCTL_DB, else the binary's
    default store). filters: status="completed", tag="sweep:lr", spec="3fa9c2" (a spec hash
    prefix), limit=10 - as `expctl list` takes them."""
    import pandas
    unknown = sorted(set(filters) - set(_FILTERS))
    if unknown:
        raise TypeError("expctl.runs: unknown filter %s (the filters are %s)" % (", ".join(unknown),
                                                                                ", ".join(sorted(_FILTERS))))
    args = ["list", "--format", "json", "--details"]
    for name, value in filters.items():
        if value is not None:
            args += [_FILTERS[name], str(value)]
    document = _call(args, db)
    flat_values = {}  # spec hash -> its values as dotted columns, flattened once
    for spec_hash, values in (document.get("spec_values") or {}).items():
        flat_values[spec_hash] = {}
        _flatten("", values or {}, flat_values[spec_hash])
    rows = []
    for run in document["runs"]:
        row = {name: run.get(name) for name in _RUN_COLUMNS}
        row.update(flat_values.get(run.get("spec_hash"), {}))
        for name, value in (run.get("summary") or {}).items():
            row["summary." + name if name in row else name] = value
        rows.append(row)
    return pandas.DataFrame(rows, columns=None if rows else list(_RUN_COLUMNS))


def series(run, metric, db=None):
    """Every point of one metric of one run, every rank, at full resolution: a DataFrame with the
    columns rank, step, value (NaN where the run logged a non-finite value). run: any selector
    `expctl show` takes (an id or prefix, @latest, tag:NAME)."""
    import pandas
    document = _call(["show", str(run), "--series", metric, "--format", "json"], db)
    points = document["points"]
    return pandas.DataFrame({"rank": [p["rank"] for p in points], "step": [p["step"] for p in points],
                             "value": [float("nan") if p["value"] is None else p["value"] for p in points]})


def compare(a, b, db=None):
    """`expctl compare A B --format json` as a dict: the verdict, every metric's statistics and
    what differs between the two sides. A regression is a result here, not an error."""
    return _call(["compare", str(a), str(b), "--format", "json"], db, ok=(0, 3))
