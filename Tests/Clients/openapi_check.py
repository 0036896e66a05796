"""Checks docs/openapi.yaml (openapi-spec-validator) and that a running dashboard's answers match its schemas.

    python openapi_check.py SPEC BASE RUN_ID      prints {"problems": [...], "checked": N}
"""
import json
import sys
import urllib.request

import yaml
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate

spec_path, base, run = sys.argv[1], sys.argv[2], sys.argv[3]
spec = yaml.safe_load(open(spec_path))
problems = []
try:
    validate(spec)
except Exception as e:  # the document itself
    problems.append(f"{spec_path}: {e}")

checks = [("/api/runs", "/api/runs"), (f"/api/runs/{run}", "/api/runs/{id}"), (f"/api/runs/{run}/attempts", "/api/runs/{id}/attempts"),
          ("/api/workers", "/api/workers"), ("/api/farm", "/api/farm")]
for url, path in checks:
    schema = spec["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    body = json.load(urllib.request.urlopen(base + url, timeout=30))
    validator = OAS30Validator(dict(schema, components=spec["components"]))
    for error in validator.iter_errors(body):
        problems.append(f"{url}: {'/'.join(map(str, error.absolute_path))}: {error.message}")
print(json.dumps({"problems": problems[:20], "checked": len(checks)}))
