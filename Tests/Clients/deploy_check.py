"""Checks Threadline's deployment files with the real validators, plus what the schemas cannot say.

    python deploy_check.py k8s RENDERED.yaml SCHEMA_DIR [--complete]
        every core object strictly against Kubernetes 1.30 (kubernetes-validate, offline schemas);
        ScaledObject and ServiceMonitor against their CRD schemas (SCHEMA_DIR); then the farm's own
        rules (one coordinator on ReadWriteOnce, probes, drain, CPU requests = --pipelines, ...).
        --complete: an overlay's output, where every Secret and ConfigMap referenced must exist.
    python deploy_check.py compose COMPOSE.yaml SCHEMA_DIR
        against the Compose Specification's JSON schema, then the farm's own rules.

Prints {"problems": [...], "checked": [...]} and exits 1 when there are problems.
"""
import json
import os
import re
import sys

import jsonschema
import kubernetes_validate
import yaml

problems, checked = [], []


def problem(text):
    problems.append(text)


def flag(args, name):
    """The value of --name=VALUE or --name VALUE in an argument list (or None)."""
    for i, a in enumerate(args):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return None


def cpu(quantity):
    q = str(quantity)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def crd_schema(schema_dir, name):
    return yaml.safe_load(open(os.path.join(schema_dir, name)))


def check_k8s(path, schema_dir, complete):
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    keda = crd_schema(schema_dir, "keda-scaledobject-v1alpha1.yaml")
    monitor = crd_schema(schema_dir, "servicemonitor-v1.yaml")
    by_kind = {}
    for d in docs:
        kind, name = d.get("kind"), d.get("metadata", {}).get("name")
        by_kind.setdefault(kind, []).append(d)
        where = f"{kind}/{name}"
        api = d.get("apiVersion", "")
        if api.startswith("keda.sh/"):
            schema = keda
        elif api.startswith("monitoring.coreos.com/"):
            schema = monitor
        else:
            schema = None
        if schema is not None:
            for e in jsonschema.Draft202012Validator(schema).iter_errors(d):
                problem(f"{where}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
            checked.append(f"{where} (CRD schema)")
            continue
        try:
            kubernetes_validate.validate(d, "1.30.0", strict=True)
            checked.append(f"{where} (Kubernetes 1.30, strict)")
        except kubernetes_validate.ValidationError as e:
            problem(f"{where}: {'/'.join(map(str, e.path))}: {e.message}")
        except Exception as e:  # an unknown kind or version is a problem too
            problem(f"{where}: {type(e).__name__}: {e}")

    def one(kind, component):
        found = [d for d in by_kind.get(kind, [])
                 if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component]
        if len(found) != 1:
            problem(f"expected one {kind} for the {component}, found {len(found)}")
            return None
        return found[0]

    sts = one("StatefulSet", "coordinator")
    dep = one("Deployment", "worker")
    if sts:
        spec = sts["spec"]
        if spec.get("replicas") != 1:
            problem("the coordinator StatefulSet must have exactly one replica (SQLite has one writer)")
        claims = spec.get("volumeClaimTemplates", [])
        if not claims or any(c["spec"].get("accessModes") != ["ReadWriteOnce"] for c in claims):
            problem("the coordinator's state claim must be ReadWriteOnce")
        pod = spec["template"]["spec"]
        c = pod["containers"][0]
        args = c.get("args", [])
        if c.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/healthz":
            problem("the coordinator's liveness probe must be GET /healthz")
        if c.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz":
            problem("the coordinator's readiness probe must be GET /readyz")
        if not flag(args, "http"):
            problem("the coordinator needs --http for its probes and /metrics")
        drain = float(flag(args, "drain-timeout") or 10)
        if pod.get("terminationGracePeriodSeconds", 30) <= drain:
            problem("the coordinator's grace period must be longer than its --drain-timeout")
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}

        def source(flag_name):
            value = flag(args, flag_name)
            if not value:
                problem(f"the coordinator has no --{flag_name}")
                return None
            folder = value if flag_name.startswith("allow") else os.path.dirname(value)
            vol = volumes.get(mounts.get(folder))
            if not vol:
                problem(f"--{flag_name}={value} is not on a mounted volume")
            return vol

        key = source("curve-secret-key")
        if key and "secret" not in key:
            problem("the coordinator's CURVE secret key must come from a Secret")
        for allow in ("allow-workers", "allow-submitters"):
            v = source(allow)
            if v and "secret" not in v and "configMap" not in v:
                problem(f"--{allow} must come from a Secret or ConfigMap")
        ports = {p["containerPort"] for p in c.get("ports", [])}
        services = by_kind.get("Service", [])
        for port, what in ((7400, "ZeroMQ"), (7401, "HTTP")):
            if port not in ports:
                problem(f"the coordinator container does not expose {port}")
            if not any(p.get("port") == port and s["spec"].get("clusterIP") != "None"
                       for s in services for p in s["spec"].get("ports", [])):
                problem(f"no Service for the coordinator's {what} port {port}")
    if dep:
        pod = dep["spec"]["template"]["spec"]
        c = pod["containers"][0]
        args = c.get("args", [])
        pipelines = int(flag(args, "pipelines") or 1)
        requested = c.get("resources", {}).get("requests", {}).get("cpu")
        if requested is None or cpu(requested) != pipelines:
            problem(f"worker CPU request {requested} does not match --pipelines={pipelines}")
        drain = float(flag(args, "drain-timeout") or 60)
        grace = pod.get("terminationGracePeriodSeconds", 30)
        if grace < 60 or grace <= drain:
            problem(f"worker terminationGracePeriodSeconds {grace} must be >= 60 and longer than --drain-timeout {drain}")
        if "lifecycle" in c:
            problem("workers drain on SIGTERM: no preStop hook")
        sc, psc = c.get("securityContext", {}), pod.get("securityContext", {})
        if not psc.get("runAsNonRoot") or not sc.get("readOnlyRootFilesystem") or sc.get("allowPrivilegeEscalation") is not False:
            problem("workers must run as non-root, read-only root filesystem, no privilege escalation")
        labels = dep["spec"]["selector"]["matchLabels"]
        pdbs = [p for p in by_kind.get("PodDisruptionBudget", []) if p["spec"]["selector"].get("matchLabels") == labels]
        if len(pdbs) != 1:
            problem("expected one PodDisruptionBudget selecting the workers")
        scaled = [s for s in by_kind.get("ScaledObject", []) if s["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]]
        if len(scaled) != 1:
            problem("expected one KEDA ScaledObject on the worker Deployment")
        for s in scaled:
            spec = s["spec"]
            lo, hi = spec.get("minReplicaCount"), spec.get("maxReplicaCount")
            if not isinstance(lo, int) or not isinstance(hi, int) or lo > hi:
                problem(f"ScaledObject needs minReplicaCount <= maxReplicaCount (got {lo}, {hi})")
            triggers = [t for t in spec["triggers"] if t["type"] == "prometheus"]
            query = " ".join(t["metadata"].get("query", "") for t in triggers)
            if not triggers or "threadline_queue_depth" not in query or "threadline_slots" not in query:
                problem("the ScaledObject must scale on threadline_queue_depth and threadline_slots")
            for t in triggers:
                if float(t["metadata"].get("threshold", 0)) != pipelines:
                    problem(f"the trigger's threshold {t['metadata'].get('threshold')} should be the slots per worker ({pipelines})")
        if any(h["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"] for h in by_kind.get("HorizontalPodAutoscaler", [])):
            problem("an HPA and KEDA both drive the workers")
    monitors = by_kind.get("ServiceMonitor", [])
    if len(monitors) != 1:
        problem("expected one ServiceMonitor")
    for m in monitors:
        sel = m["spec"]["selector"].get("matchLabels", {})
        targets = [s for s in by_kind.get("Service", []) if sel.items() <= s["metadata"].get("labels", {}).items()]
        names = {p.get("name") for s in targets for p in s["spec"]["ports"]}
        for e in m["spec"]["endpoints"]:
            if e.get("port") not in names:
                problem(f"ServiceMonitor port {e.get('port')} is not a port of the Services it selects")
    if complete:
        # Every Secret and ConfigMap a pod or the ServiceMonitor names must be in the output.
        have = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("Secret", "ConfigMap")}
        for d in by_kind.get("StatefulSet", []) + by_kind.get("Deployment", []):
            for v in d["spec"]["template"]["spec"].get("volumes", []):
                if "secret" in v and ("Secret", v["secret"]["secretName"]) not in have:
                    problem(f"{d['kind']}/{d['metadata']['name']} mounts Secret {v['secret']['secretName']}, which is not rendered")
                if "configMap" in v and ("ConfigMap", v["configMap"]["name"]) not in have:
                    problem(f"{d['kind']}/{d['metadata']['name']} mounts ConfigMap {v['configMap']['name']}, which is not rendered")
        for m in monitors:
            for e in m["spec"]["endpoints"]:
                ref = e.get("bearerTokenSecret")
                if ref:
                    secret = have.get(("Secret", ref["name"]))
                    if not secret or ref["key"] not in secret.get("data", {}):
                        problem(f"ServiceMonitor bearerTokenSecret {ref} is not a rendered Secret key")


def check_compose(path, schema_dir):
    doc = yaml.safe_load(open(path))
    schema = json.load(open(os.path.join(schema_dir, "compose-spec.json")))
    for e in jsonschema.Draft201909Validator(schema).iter_errors(doc):
        problem(f"{path}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
    checked.append(f"{path} (Compose Specification schema)")
    services = doc.get("services", {})
    base = os.path.dirname(os.path.abspath(path))
    for name, s in services.items():
        for v in s.get("volumes", []):
            src = v.split(":")[0] if isinstance(v, str) else v.get("source", "")
            if src.startswith((".", "/")) and ":" in (v if isinstance(v, str) else ":"):
                # A bind mount: its source must exist, or Docker makes an empty folder in its place.
                if not os.path.exists(os.path.join(base, src)):
                    problem(f"service {name} bind-mounts {src}, which does not exist in a clean checkout")
                if "key" in src or "token" in src:
                    problem(f"service {name} bind-mounts secrets from the host ({src}); keys live in named volumes")
    keys = services.get("keys", {})
    if "keygen" not in str(keys.get("command")) or "--farm" not in str(keys.get("command")):
        problem("a one-shot `keys` service must run `coord keygen --farm`")
    coord, worker = services.get("coordinator", {}), services.get("worker", {})
    if "/healthz" not in " ".join(map(str, coord.get("healthcheck", {}).get("test", []))):
        problem("the coordinator's healthcheck must probe /healthz")
    if coord.get("depends_on", {}).get("keys", {}).get("condition") != "service_completed_successfully":
        problem("the coordinator must wait for the keys service to complete")
    if worker.get("depends_on", {}).get("coordinator", {}).get("condition") != "service_healthy":
        problem("workers must wait for a healthy coordinator")
    if "container_name" in worker or worker.get("ports"):
        problem("a worker with container_name or host ports cannot be scaled (--scale worker=N)")
    wargs = str(worker.get("command", "")).split()
    drain = float(flag(wargs, "drain-timeout") or 60)
    grace = worker.get("stop_grace_period", "10s")
    seconds = sum(int(n) * {"s": 1, "m": 60, "h": 3600}[u] for n, u in re.findall(r"(\d+)([smh])", grace))
    if seconds <= drain:
        problem(f"worker stop_grace_period {grace} must be longer than its --drain-timeout {drain}")
    for needed in ("prometheus", "grafana"):
        if needed not in services:
            problem(f"no {needed} service")
    declared = set((doc.get("volumes") or {}).keys())
    for name, s in services.items():
        for v in s.get("volumes", []):
            src = v.split(":")[0] if isinstance(v, str) else v.get("source", "")
            if ":" in str(v) and src and not src.startswith((".", "/")) and src not in declared:
                problem(f"service {name} uses volume {src}, which is not declared")


mode, path, schema_dir = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "k8s":
    check_k8s(path, schema_dir, "--complete" in sys.argv)
elif mode == "compose":
    check_compose(path, schema_dir)
else:
    sys.exit(f"unknown mode {mode}")
print(json.dumps({"problems": problems, "checked": checked}, indent=1))
sys.exit(1 if problems else 0)
