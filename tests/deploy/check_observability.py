#!/usr/bin/env python3
"""Checks deploy/prometheus and deploy/grafana against live /metrics: every
metric an alert rule or a dashboard panel names must be in one of the
expositions given (a router's and a sidecar's, scraped by
tests/e2e/observability.test.cpp). Also checks the dashboard's shape: every
panel has an id of its own, a title and queries on the datasource variable.
Exit 1 with every problem found.

  check_observability.py ROUTER_METRICS SIDECAR_METRICS..."""
import json
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = re.compile(r"\boutrider_[a-z0-9_]+")
SUFFIXES = ("_bucket", "_sum", "_count")


def live_names(paths):
    """Metric names in the expositions, with a histogram's series names."""
    names = set()
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.startswith("# TYPE "):
                    _, _, name, kind = line.split()[:4]
                    names.add(name)
                    if kind in ("histogram", "summary"):
                        names.update(name + s for s in SUFFIXES)
                elif line and not line.startswith("#"):
                    names.add(re.split(r"[{ ]", line, 1)[0])
    return names


def rule_exprs():
    with open(os.path.join(ROOT, "deploy", "prometheus", "outrider-alerts.yaml")) as f:
        doc = yaml.safe_load(f)
    for group in doc["groups"]:
        for rule in group["rules"]:
            yield f"alert {rule['alert']}", rule["expr"]


def dashboard_exprs(problems):
    with open(os.path.join(ROOT, "deploy", "grafana", "outrider-fleet.json")) as f:
        dash = json.load(f)
    ids = set()
    names = {v["name"] for v in dash.get("templating", {}).get("list", [])}
    if "datasource" not in names:
        problems.append("dashboard: no datasource variable")
    for p in dash["panels"]:
        if p["id"] in ids:
            problems.append(f"dashboard: panel id {p['id']} twice")
        ids.add(p["id"])
        if not p.get("title") or not p.get("targets"):
            problems.append(f"dashboard: panel {p['id']} without title or queries")
        for t in p.get("targets", []):
            if t.get("datasource", {}).get("uid") != "${datasource}":
                problems.append(f"dashboard: {p['title']}: a query not on $datasource")
            yield f"panel '{p['title']}'", t["expr"]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    live = live_names(sys.argv[1:])
    problems = []
    used = 0
    for where, expr in list(rule_exprs()) + list(dashboard_exprs(problems)):
        for name in NAME.findall(expr):
            used += 1
            if name not in live:
                problems.append(f"{where}: {name} is in no /metrics given")
    if used == 0:
        problems.append("no metric named at all")
    for p in problems:
        print("observability:", p)
    print("observability:", "ok" if not problems else f"{len(problems)} problem(s)",
          f"({used} metric references, {len(live)} live series names)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
