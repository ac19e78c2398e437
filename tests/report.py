"""tests/report.py - tests/report.sh for the Python suites: report(LABEL, PASSED, FAILED) prints the suite's
closing line 'LABEL: N passed, N failed', appends it to $FA4_TEST_SUMMARY when that is set (make test sums the
file into its one last line: tests/run-suites.sh) and returns the exit status, 1 when FAILED > 0."""
import os


def report(label, passed, failed):
    line = "%s: %d passed, %d failed" % (label, passed, failed)
    print(line, flush=True)
    path = os.environ.get("FA4_TEST_SUMMARY")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
    return 1 if failed else 0
