"""Checks deploy/monitoring/ beyond what promtool does.

Usage: check-monitoring.py MONITORING_DIR OPERATIONS.md [--write]

- prometheus-rule.yaml (the rules as a prometheus-operator PrometheusRule) holds exactly the
  groups of kubesvc.rules.yaml; --write makes it again from them.
- Every alert has a severity (page or ticket), a summary and a runbook naming it, and
  docs/operations.md says what to do about it.
- The unit tests (*.test.yaml) have, for every alert, a case where it fires and one where it
  does not.
- The dashboard's panels have unique ids, a place on the grid, the datasource variable and, but
  for rows, at least one query.

Which series the expressions select is checked against real scrapes by the black-box test
`monitoring::every_series_the_rules_and_the_dashboard_select_is_exported`.
"""

import glob
import json
import os
import sys

import yaml

directory, operations = sys.argv[1:3]
write = "--write" in sys.argv[3:]
RULES = os.path.join(directory, "kubesvc.rules.yaml")
TESTS = sorted(glob.glob(os.path.join(directory, "*.test.yaml")))
OPERATOR = os.path.join(directory, "prometheus-rule.yaml")
DASHBOARD = os.path.join(directory, "kubesvc-dashboard.json")

OPERATOR_HEAD = """\
# The rules of kubesvc.rules.yaml for the prometheus-operator (its PrometheusRule resource),
# for `kubectl apply -f`; not in the kustomization, which must apply where that resource is
# unknown. Made by `python3 scripts/check-monitoring.py deploy/monitoring docs/operations.md
# --write`; make test fails when it differs from kubesvc.rules.yaml. Add the labels your
# Prometheus's ruleSelector asks for (kube-prometheus-stack: `release: <its release name>`).
"""

problems = []
rules = yaml.safe_load(open(RULES))


class Block(yaml.SafeDumper):
    pass


def _text(dumper, value):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


Block.add_representer(str, _text)


def operator_resource():
    resource = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "kubesvc",
            "labels": {"app.kubernetes.io/part-of": "kubesvc"},
        },
        "spec": {"groups": rules["groups"]},
    }
    body = yaml.dump(resource, Dumper=Block, sort_keys=False, width=100, allow_unicode=True)
    return OPERATOR_HEAD + body


if write:
    with open(OPERATOR, "w") as f:
        f.write(operator_resource())
else:
    existing = yaml.safe_load(open(OPERATOR)) if os.path.exists(OPERATOR) else None
    if existing is None or existing.get("spec", {}).get("groups") != rules["groups"]:
        problems.append(
            f"{OPERATOR} does not hold the groups of {RULES}: run this script with --write"
        )

docs = open(operations).read()
alerts = {}
for group in rules["groups"]:
    for rule in group["rules"]:
        if "alert" not in rule:
            continue
        name = rule["alert"]
        alerts[name] = {"fires": False, "silent": False}
        labels, notes = rule.get("labels", {}), rule.get("annotations", {})
        if labels.get("severity") not in ("page", "ticket"):
            problems.append(f"{name}: severity must be page or ticket")
        if not notes.get("summary"):
            problems.append(f"{name}: no summary")
        if name not in notes.get("runbook", ""):
            problems.append(f"{name}: its runbook annotation does not name it")
        if f"`{name}`" not in docs:
            problems.append(f"{name}: {operations} does not say what to do about it")

for tests in TESTS:
    for test in yaml.safe_load(open(tests))["tests"]:
        for case in test.get("alert_rule_test", []):
            name = case["alertname"]
            if name not in alerts:
                problems.append(f"{tests}: {name} is not an alert of {RULES}")
                continue
            alerts[name]["fires" if case.get("exp_alerts") else "silent"] = True
for name, seen in alerts.items():
    for outcome in ("fires", "silent"):
        if not seen[outcome]:
            what = "fires" if outcome == "fires" else "stays silent"
            problems.append(f"no unit test where {name} {what}")

dashboard = json.load(open(DASHBOARD))
ids = set()
queries = 0
for panel in dashboard["panels"]:
    title = panel.get("title", "?")
    if panel["id"] in ids:
        problems.append(f"dashboard: panel id {panel['id']} ({title}) used twice")
    ids.add(panel["id"])
    if not all(k in panel.get("gridPos", {}) for k in ("h", "w", "x", "y")):
        problems.append(f"dashboard: panel {title} has no place on the grid")
    if panel["type"] == "row":
        continue
    if panel.get("datasource", {}).get("uid") != "${datasource}":
        problems.append(f"dashboard: panel {title} does not use the datasource variable")
    exprs = [t.get("expr") for t in panel.get("targets", []) if t.get("expr")]
    if not exprs:
        problems.append(f"dashboard: panel {title} has no query")
    queries += len(exprs)
if not any(v.get("type") == "datasource" for v in dashboard["templating"]["list"]):
    problems.append("dashboard: no datasource variable")

for p in problems:
    print(f"monitoring: {p}")
print(
    f"monitoring: {len(alerts)} alerts, each with a case that fires it and one that does not; "
    f"{len(ids)} panels, {queries} queries; {len(problems)} problem(s)"
)
sys.exit(1 if problems else 0)
