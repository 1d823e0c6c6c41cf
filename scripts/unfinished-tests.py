#!/usr/bin/env python3
"""Lists the Swift Testing tests that a `swift test` log shows started and never ended.

`make test` runs it when the suite fails, so that a run ended by its time limit names the tests that
were still running (the log is line-buffered: `stdbuf -oL`). Usage: unfinished-tests.py LOG
"""
import re
import sys

# A test's start, not a test case's (cases have no end line of their own) nor the run's.
STARTED = re.compile(r"◇ Test (?!case passing |run started)(.+?) started\.")
# Passed, failed, or passed with known issues (━); parameterised tests add "with N test cases".
ENDED = re.compile(r"Test (.+?)(?: with \d+ test cases?)? (?:passed|failed) after ")
SKIPPED = re.compile(r"[➜↷] Test (.+?) skipped")

def main(path):
    started, ended = [], set()
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            for match in STARTED.finditer(line):
                started.append(match.group(1))
            for pattern in (ENDED, SKIPPED):
                for match in pattern.finditer(line):
                    ended.add(match.group(1))
    unfinished = [name for name in dict.fromkeys(started) if name not in ended]
    if unfinished:
        print(f"unfinished-tests: {len(unfinished)} test(s) started and did not end:")
        for name in unfinished:
            print(f"  {name}")
    else:
        print("unfinished-tests: every test that started ended")

if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: unfinished-tests.py LOG")
    main(sys.argv[1])
