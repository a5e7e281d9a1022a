"""Runs every test of a GoogleTest binary in a process of its own and merges the results.

One faulting CUDA kernel leaves a sticky error in its process: every later test of that process
would fail too, and a crash writes no XML at all. Here each test runs alone (its own process
group, its own timeout, killed as a group when it runs over), and the results are merged into one
JUnit XML file: a crash or a timeout is a failure of that test, with the end of its output. Tests
named by --alone run after the others, one at a time as well (every test here runs one at a
time; --alone only moves them last, away from the start-up of the others, for tests that read
device-wide state such as free memory).

    python3 run_gtests.py BINARY --out results.xml [--filter GLOB] [--timeout S] [--budget S]

Prints one line per test and a count last; exit status 1 when any test failed, crashed or ran
over, or when the budget ran out before every test ran (those are reported as not run).
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from fnmatch import fnmatchcase
from pathlib import Path


def list_tests(binary, gtest_filter):
    out = subprocess.run([binary, "--gtest_list_tests", f"--gtest_filter={gtest_filter}"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=60, check=True).stdout
    tests, suite = [], None
    for line in out.splitlines():
        if not line.strip() or line.startswith("Running main()"):
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        else:
            tests.append(suite + line.split("#")[0].strip())
    return tests


def run_alone(binary, test, timeout):
    """Runs one test in its own process group. Returns (status, seconds, output, xml case)."""
    with tempfile.TemporaryDirectory() as tmp:
        xml_path = Path(tmp) / "one.xml"
        start = time.monotonic()
        proc = subprocess.Popen([binary, f"--gtest_filter={test}", f"--gtest_output=xml:{xml_path}"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            output, _ = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            # The whole group: a test that started helpers (sl-run, a sanitizer) leaves none.
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            timed_out = True
        seconds = time.monotonic() - start
        case = None
        if xml_path.exists():
            try:
                case = next(ET.parse(xml_path).getroot().iter("testcase"), None)
            except ET.ParseError:
                case = None
    if timed_out:
        status = "timeout"
    elif proc.returncode < 0:
        status = f"crash ({signal.Signals(-proc.returncode).name})"
    elif case is None:
        status = f"crash (exit {proc.returncode}, no result written)"
    elif case.find("failure") is not None or proc.returncode != 0:
        status = "fail"
    elif case.get("result") == "skipped" or case.find("skipped") is not None:
        status = "skip"
    else:
        status = "pass"
    return status, seconds, output, case


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--out", required=True, type=Path, help="the merged JUnit XML")
    parser.add_argument("--filter", default="*", help="a --gtest_filter for the tests to run")
    parser.add_argument("--alone", action="append", default=[],
                        help="glob of tests to run last (repeatable)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds per test")
    parser.add_argument("--budget", type=float, default=0,
                        help="seconds for all of them (0: no limit); tests left when it runs out "
                             "are reported as not run")
    parser.add_argument("--allow-skip", action="append", default=[],
                        help="glob of tests that may skip (repeatable); any other skip fails")
    args = parser.parse_args()

    tests = list_tests(args.binary, args.filter)
    last = [t for t in tests if any(fnmatchcase(t, g) for g in args.alone)]
    order = [t for t in tests if t not in last] + last
    deadline = time.monotonic() + args.budget if args.budget > 0 else None

    suites = ET.Element("testsuites", name="AllTests")
    by_suite = {}
    counts = {"pass": 0, "fail": 0, "skip": 0, "not run": 0}
    for test in order:
        suite_name, name = test.split(".", 1)
        suite = by_suite.get(suite_name)
        if suite is None:
            suite = by_suite[suite_name] = ET.SubElement(suites, "testsuite", name=suite_name)
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left < 1:
            case = ET.SubElement(suite, "testcase", name=name, classname=suite_name, time="0")
            ET.SubElement(case, "failure", message="not run: the suite's time budget ran out")
            counts["not run"] += 1
            print(f"{'NOT RUN':8} {test}", flush=True)
            continue
        timeout = args.timeout if left is None else min(args.timeout, left)
        status, seconds, output, one = run_alone(args.binary, test, timeout)
        if status == "skip" and not any(fnmatchcase(test, g) for g in args.allow_skip):
            status = "fail (skipped)"
        case = ET.SubElement(suite, "testcase", name=name, classname=suite_name,
                             time=f"{seconds:.3f}")
        if status == "pass":
            counts["pass"] += 1
        elif status == "skip":
            counts["skip"] += 1
            ET.SubElement(case, "skipped")
        else:
            counts["fail"] += 1
            messages = [f.get("message", "") for f in one.iter("failure")] if one is not None else []
            failure = ET.SubElement(case, "failure", message=status)
            failure.text = "\n".join(messages) + "\n--- output (end) ---\n" + output[-4000:]
        print(f"{status.upper():8} {test} ({seconds:.1f} s)", flush=True)
        if status not in ("pass", "skip"):
            print("    " + "\n    ".join(output[-1500:].splitlines()), flush=True)

    for suite in by_suite.values():
        cases = list(suite)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    args.out.write_text(ET.tostring(suites, encoding="unicode"))
    print(f"{len(order)} tests, {counts['fail'] + counts['not run']} failed "
          f"({counts['not run']} not run), {counts['skip']} skipped")
    return 0 if counts["fail"] == 0 and counts["not run"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
