"""tests/report.py - tests/report.sh for the Python suites: report(LABEL, PASSED, FAILED) prints the suite's
closing line 'LABEL: N passed, N failed', appends it to $FA4_TEST_SUMMARY when that is set (make test sums the
file into its one last line: tests/run-suites.sh) and returns the exit status, 1 when FAILED > 0. Tally: a
suite's ok/FAIL lines and their counts, closed by its report line."""
import os


def report(label, passed, failed):
    line = "%s: %d passed, %d failed" % (label, passed, failed)
    print(line, flush=True)
    path = os.environ.get("FA4_TEST_SUMMARY")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
    return 1 if failed else 0


class Tally:
    """check(NAME, OK, DETAIL) prints 'ok   NAME DETAIL' or 'FAIL NAME DETAIL' and counts it; done(LABEL) is
    report(LABEL, passed, failed)."""

    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, ok, detail=""):
        ok = bool(ok)
        self.passed += ok
        self.failed += not ok
        print("%s %s %s" % ("ok  " if ok else "FAIL", name, detail), flush=True)
        return ok

    def done(self, label):
        return report(label, self.passed, self.failed)
