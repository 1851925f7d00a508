#!/usr/bin/env python3
"""Writes BENCHMARKS.md's "Today's figures" table from the benchmark results.

Every result file in Benchmarks/results/ that carries budget lines (a "budget" list of
{item, measured, limit, unit, met}) contributes its lines, with the file and the time it was
written. The table between the two markers in BENCHMARKS.md is replaced; the one it replaces is
kept below, under the date it was made, so older figures stay on record.

    Benchmarks/figures.py             rewrite BENCHMARKS.md
    Benchmarks/figures.py --print     print the table only
    Benchmarks/figures.py --check     exit 1 when a result file's budget lines are malformed
"""
import datetime
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "Benchmarks", "results")
DOCUMENT = os.path.join(ROOT, "BENCHMARKS.md")
BEGIN = "<!-- figures:begin (Benchmarks/figures.py writes this table) -->"
END = "<!-- figures:end -->"
EARLIER_INTRO = "## Earlier figures\n\nTables that \"Today's figures\" replaced, newest first.\n\n"
# The results a run of Benchmarks/all.sh writes, in the budget's order; a file missing here is
# reported as not run rather than silently left out.
EXPECTED = [
    "server-throughput-latest.json",
    "latest.json",
    "terminal-share-latest.json",
    "bluez-latest.json",
    "intent-latency-latest.json",
]
FIELDS = ("item", "measured", "limit", "unit", "met")


class Malformed(Exception):
    pass


def budget_lines(path):
    with open(path) as handle:
        result = json.load(handle)
    lines = result.get("budget")
    if lines is None:
        return None, result
    if not isinstance(lines, list):
        raise Malformed(f"{path}: 'budget' is not a list")
    for number, line in enumerate(lines):
        missing = [field for field in FIELDS if field not in line]
        if missing:
            raise Malformed(f"{path}: budget line {number} lacks {', '.join(missing)}")
    return lines, result


def figure(value, unit):
    if value is None:
        return "not measured"
    if isinstance(value, (int, float)):
        text = f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"
        text = text.rstrip("0").rstrip(".") if "." in text else text
    else:
        text = str(value)
    return f"{text} {unit}".strip()


def table():
    rows = []
    for name in EXPECTED + sorted(
        os.path.basename(path) for path in glob.glob(os.path.join(RESULTS, "*.json"))
        if os.path.basename(path) not in EXPECTED and path.endswith("-latest.json")
    ):
        path = os.path.join(RESULTS, name)
        if not os.path.exists(path):
            rows.append(f"| ({name}: not run) | | | | |")
            continue
        lines, result = budget_lines(path)
        if lines is None:
            continue
        when = str(result.get("generatedAt", "?"))[:16].replace("T", " ")
        for line in lines:
            limit = line["limit"]
            unit = line["unit"]
            # Ratios and counts are upper bounds ("x (at least)" marks a lower one); times are
            # strict ("under").
            bound = "at least" if "at least" in unit else ("under" if unit == "ms" else "at most")
            unit_text = unit.replace("(at least)", "").strip()
            met = {True: "yes", False: "**no**", None: "—"}[line["met"]]
            rows.append(
                f"| {line['item']} | {figure(line['measured'], unit_text)} | {bound} {figure(limit, unit_text)} "
                f"| {met} | `{name}`, {when} |"
            )
    today = datetime.date.today().isoformat()
    return "\n".join(
        [
            BEGIN,
            f"## Today's figures ({today})",
            "",
            "Every budget line of the latest results (Benchmarks/results/), written by `Benchmarks/figures.py`.",
            "",
            "| budget line | measured | limit | met | result file, written (UTC) |",
            "|---|---|---|---|---|",
            *rows,
            END,
        ]
    )


def rewrite(new_table):
    with open(DOCUMENT) as handle:
        text = handle.read()
    if BEGIN not in text or END not in text:
        raise Malformed(f"{DOCUMENT} has no '{BEGIN}' ... '{END}' block to replace")
    start = text.index(BEGIN)
    end = text.index(END) + len(END)
    old = text[start:end]
    text = text[:start] + new_table + text[end:]
    # The replaced table goes on record under the heading for earlier figures.
    old_body = old[len(BEGIN):-len(END)].strip()
    old_body = re.sub(r"^## Today's figures \(([^)]*)\)", r"### Figures of \1", old_body, count=1)
    if old_body and old_body not in text:
        if EARLIER_INTRO not in text:
            text = text.rstrip("\n") + "\n\n" + EARLIER_INTRO + "\n"
        at = text.index(EARLIER_INTRO) + len(EARLIER_INTRO)
        text = text[:at] + old_body + "\n\n" + text[at:]
    with open(DOCUMENT, "w") as handle:
        handle.write(text.rstrip("\n") + "\n")


def main(arguments):
    try:
        if arguments[:1] == ["--check"]:
            for path in sorted(glob.glob(os.path.join(RESULTS, "*.json"))):
                budget_lines(path)
            return 0
        new_table = table()
        if arguments[:1] == ["--print"]:
            print(new_table)
            return 0
        if arguments:
            print(__doc__.strip(), file=sys.stderr)
            return 2
        rewrite(new_table)
        print(f"{os.path.relpath(DOCUMENT, ROOT)}: today's figures rewritten")
        return 0
    except (Malformed, json.JSONDecodeError, OSError) as error:
        print(f"figures.py: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
