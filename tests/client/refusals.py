"""Every body the black-box tests saw refused with 422 must be refused by the OpenAPI document
too: a client validating against the document then never sends a body the server will refuse
for its shape. Bodies the server refuses for what a JSON schema cannot say (a minimum larger
than a maximum, a CIDR with host bits, an issuer that is not https) are listed in
refusals-allowed.txt with the rule that refuses them.

Usage: python refusals.py <openapi.json> <directory of *.jsonl written by the tests>
(the Rust black-box harness writes them when KUBESVC_RECORD_422 names a directory).
"""

import fnmatch
import json
import pathlib
import sys
import uuid

from openapi_core import OpenAPI
from openapi_core.contrib.requests import RequestsOpenAPIRequest
from requests import Request

HERE = pathlib.Path(__file__).parent


def allowed_rules():
    """(METHOD path-pattern field-pattern) lines; `#` starts a comment."""
    rules = []
    for line in (HERE / "refusals-allowed.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            method, path, field = line.split()
            rules.append((method, path, field))
    return rules


def allowed(rules, method, path, fields):
    """Every field the server named is one a listed rule explains."""
    if not fields:
        return False
    return all(
        any(
            m == method and fnmatch.fnmatch(path, p) and fnmatch.fnmatch(f, fp)
            for m, p, fp in rules
        )
        for f in fields
    )


def main():
    spec_path, records = sys.argv[1], pathlib.Path(sys.argv[2])
    api = OpenAPI.from_file_path(spec_path)
    rules = allowed_rules()
    seen = accepted = explained = 0
    unexplained = []
    for file in sorted(records.glob("*.jsonl")):
        for line in file.read_text().splitlines():
            r = json.loads(line)
            seen += 1
            request = Request(
                r["method"],
                "http://localhost" + r["path"],
                data=json.dumps(r["body"]),
                headers={
                    "Content-Type": "application/json",
                    "Authorization": "Bearer x",
                    "Idempotency-Key": "refusal-" + uuid.uuid4().hex,
                },
            ).prepare()
            try:
                api.validate_request(RequestsOpenAPIRequest(request))
            except Exception:  # the document refuses it: as it should
                continue
            accepted += 1
            fields = [f or "(body)" for f in r["fields"] if isinstance(f, str)]
            if allowed(rules, r["method"], r["path"], fields):
                explained += 1
            else:
                unexplained.append(r)
    print(
        f"  {seen} bodies refused with 422 by the server; the document refuses "
        f"{seen - accepted}, and {explained} more are refused for a rule listed in "
        "refusals-allowed.txt"
    )
    for r in unexplained:
        print(
            f"  NOT REFUSED BY THE DOCUMENT: {r['method']} {r['path']} {json.dumps(r['body'])[:300]}"
            f" (server named: {r['fields']})"
        )
    sys.exit(1 if unexplained else 0)


if __name__ == "__main__":
    main()
