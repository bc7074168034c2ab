"""expctl's Python API for analysis (docs/analysis.md), on real runs, on both backends.

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3 and python3-pandas:
    EXPCTL=<the build's expctl> PYTHONPATH=src/expctl/run/python /usr/bin/python3 tests/python/test_analysis.py
The PostgreSQL half runs against EXPCTL_TEST_POSTGRES (a schema of its own, dropped at the end);
without it the test exits 77 (skipped, never passed), or fails when EXPCTL_REQUIRE_POSTGRES=1 or
EXPCTL_REQUIRE_ALL=1 (unless EXPCTL_ALLOWED_SKIPS names "postgres").
"""

import math
import os
import subprocess
import sys
import tempfile

import expctl

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "..", "..", "experiments", "tiny-synthetic.yaml")
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAILED: " + what, file=sys.stderr)


def expctl_cli(*args):
    done = subprocess.run([os.environ["EXPCTL"], *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit("expctl %s exited %d: %s" % (" ".join(args), done.returncode, done.stderr))
    return done.stdout


def check_table(table, ids, where):
    check(sorted(table["id"]) == sorted(ids), where + ": one row per run")
    check(set(table["status"]) == {"completed"}, where + ": status column")
    check(sorted(table["optim.lr"]) == [0.05, 0.1], where + ": the spec's values as dotted columns")
    check(set(table["train.max_steps"]) == {20}, where + ": every hashed value, overrides included")
    check(all(isinstance(v, float) and math.isfinite(v) for v in table["final_train_loss"]),
          where + ": summary figures under their own names")
    check(all(len(v) == 64 for v in table["loss_curve_sha256"]), where + ": the loss curve hash")
    check(all("analysis" in tags for tags in table["tags"]), where + ": tags as lists")


def main():
    with tempfile.TemporaryDirectory() as work:
        db = os.path.join(work, "results", "expctl.db")
        ids = []
        for lr in ("0.05", "0.1"):
            document = expctl_cli("--db", db, "run", TINY, "--set", "train.max_steps=20", "--set",
                                  "optim.lr=" + lr, "--tag", "analysis", "--format", "json")
            import json
            ids.append(json.loads(document)["run"]["id"])

        table = expctl.runs(db)
        check_table(table, ids, "sqlite")
        check(len(expctl.runs(db, tag="analysis", limit=1)) == 1, "filters reach expctl list")
        check(len(expctl.runs(db, status="failed")) == 0, "a filter that matches nothing: an empty table")
        try:
            expctl.runs(db, colour="red")
            check(False, "an unknown filter is refused")
        except TypeError as error:
            check("unknown filter colour" in str(error) and "status" in str(error), "the refusal names the filters")
        empty = expctl.runs(os.path.join(work, "none.db"))
        check(len(empty) == 0 and "id" in empty.columns, "a store that does not exist: no rows, the columns")

        curve = expctl.series(ids[0], "loss", db=db)
        check(list(curve.columns) == ["rank", "step", "value"], "series columns")
        check(len(curve) == 40, "series: 2 ranks x 20 steps, full resolution (got %d)" % len(curve))
        check(sorted(set(curve["rank"])) == [0, 1], "series: every rank")
        check(list(curve[curve["rank"] == 0]["step"]) == list(range(1, 21)), "series: every step in order")
        try:
            expctl.series("nosuchrun", "loss", db=db)
            check(False, "a run that does not exist raises")
        except RuntimeError as error:
            check("nosuchrun" in str(error) and "exited 2" in str(error), "the error is expctl's own line")

        verdict = expctl.compare(ids[0], ids[1], db=db)
        check(verdict.get("kind") == "compare", "compare's JSON as a dict")

        server = os.environ.get("EXPCTL_TEST_POSTGRES", "")
        if not server:
            if os.environ.get("EXPCTL_REQUIRE_POSTGRES") == "1":
                check(False, "EXPCTL_REQUIRE_POSTGRES=1 but EXPCTL_TEST_POSTGRES is not set")
                return
            # EXPCTL_REQUIRE_ALL=1 (.ci/run): a skip is a failure unless "postgres" is allowed
            # (docs/contributing.md, "Skips").
            allowed = os.environ.get("EXPCTL_ALLOWED_SKIPS", "").replace(",", " ").split()
            if os.environ.get("EXPCTL_REQUIRE_ALL") == "1" and "postgres" not in allowed:
                check(False, "EXPCTL_REQUIRE_ALL=1 but this test cannot run here: postgres is missing "
                      "(no EXPCTL_TEST_POSTGRES)")
                return
            print("SKIPPED, not passed: the PostgreSQL half (no EXPCTL_TEST_POSTGRES)")
            sys.exit(77 if not failures else 1)
        schema = "tpy_%d" % os.getpid()
        subprocess.run(["psql", server, "-q", "-c", "CREATE SCHEMA " + schema], check=True)
        try:
            location = server + " options='-csearch_path=%s'" % schema
            expctl_cli("merge", db, "--into", location)
            check_table(expctl.runs(location), ids, "postgresql")
            check(len(expctl.series(ids[0], "loss", db=location)) == 40, "postgresql: series")
        finally:
            subprocess.run(["psql", server, "-q", "-c", "SET client_min_messages = warning; DROP SCHEMA %s CASCADE" % schema],
                       check=False)


main()
if failures:
    sys.exit("%d check(s) failed" % len(failures))
print("all checks passed")
