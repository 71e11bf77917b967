#!/usr/bin/env python3
"""Checks deploy/k8s without a cluster: every manifest parses, kustomization
lists them all, outrider's settings are the fleet files and pass
`outrider --check-config` with the environment the pods set, nats.conf
passes `nats-server -t`, and the pods are wired as docs/kubernetes.md says
(native sidecar, probes, ports, mounts, Secrets). Exit 1 with every
problem found."""
import os
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S = os.path.join(ROOT, "deploy", "k8s")
problems = []


def check(ok, what):
    if not ok:
        problems.append(what)
    return ok


def load():
    docs = {}
    for name in sorted(os.listdir(K8S)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(K8S, name)) as f:
            for d in yaml.safe_load_all(f):
                if d is None:
                    continue
                if name == "kustomization.yaml":
                    docs["kustomization"] = d
                    continue
                check(all(k in d for k in ("apiVersion", "kind", "metadata")),
                      f"{name}: an object without apiVersion/kind/metadata")
                docs[(d["kind"], d["metadata"]["name"])] = d
                docs.setdefault(("file", name), []).append(d)
    return docs


def settings(text):
    return yaml.safe_load(text)


def run_check_config(outrider, config_text, env):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(config_text)
    try:
        full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
        p = subprocess.run([outrider, "--config", f.name, "--check-config"],
                           env=full, capture_output=True, text=True, timeout=30)
        return p.returncode, p.stdout + p.stderr
    finally:
        os.unlink(f.name)


def pod_env(container):
    """The container's environment as the kubelet makes it: the pod's IP
    for status.podIP, $(VAR) references expanded."""
    env = {}
    for e in container.get("env", []):
        field = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if field == "status.podIP" or "HOST" in e["name"]:
            env[e["name"]] = "10.0.0.7"
        elif "value" in e:
            v = e["value"]
            for k, val in env.items():
                v = v.replace(f"$({k})", val)
            env[e["name"]] = v
        else:
            env[e["name"]] = "x-1"
    return env


def port_of(container, name):
    for p in container.get("ports", []):
        if p["name"] == name:
            return p["containerPort"]
    return None


def check_http_probe(c, kind, path, port):
    probe = c.get(kind, {}).get("httpGet", {})
    check(probe.get("path") == path and port_of(c, probe.get("port")) == port,
          f"{c['name']}: {kind} should be GET {path} on {port}, is {probe}")


def check_mounts(pod, c):
    vols = {v["name"] for v in pod["volumes"]}
    for m in c.get("volumeMounts", []):
        check(m["name"] in vols, f"{c['name']}: mount of unknown volume {m['name']}")
    return {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}


def check_worker(docs, side, outrider):
    pod = docs[("Deployment", "outrider-worker")]["spec"]["template"]["spec"]
    mains = [c for c in pod["containers"] if c["name"] == "main"]
    if not check(len(mains) == 1, "worker: no container named main"):
        return
    main = mains[0]
    engine_port = int(side["engine-endpoint"].rsplit(":", 1)[1])
    check(port_of(main, "engine") == engine_port,
          "worker: the engine port is not the sidecar's engine-endpoint")
    for kind in ("startupProbe", "readinessProbe"):
        check(main.get(kind, {}).get("grpc", {}).get("port") == engine_port,
              f"main: {kind} is not a grpc probe on {engine_port}")
    # A paused engine is NOT_SERVING: liveness must not restart it for that.
    check(main.get("livenessProbe", {}).get("tcpSocket", {}).get("port") ==
          engine_port, "main: liveness should be a TCP check, not grpc")
    sidecars = [c for c in pod.get("initContainers", []) if c["name"] == "outrider"]
    if not check(len(sidecars) == 1, "worker: no init container named outrider"):
        return
    s = sidecars[0]
    check(s.get("restartPolicy") == "Always",
          "outrider: not a native sidecar (restartPolicy: Always)")
    status = side["system-port"]
    check_http_probe(s, "startupProbe", "/live", status)
    check_http_probe(s, "livenessProbe", "/live", status)
    check_http_probe(s, "readinessProbe", "/ready", status)
    check(port_of(s, "relay") == side["relay-port"], "outrider: relay port")
    mounts = check_mounts(pod, s)
    check(s["args"] == ["--config", mounts.get("config", "?") + "/sidecar.yaml"],
          "outrider: --config does not name the mounted sidecar.yaml")
    check(os.path.dirname(side["tls-cert"]) == mounts.get("tls"),
          "outrider: the certificates are not where tls-cert says")
    check(side["data-dir"] == mounts.get("index"),
          "outrider: data-dir is not the index volume")
    rc, out = run_check_config(outrider, yaml.safe_dump(side), pod_env(s))
    check(rc == 0 and "warning" not in out,
          f"sidecar settings with the pod's environment: rc {rc}: {out}")
    tokens = [e for e in s["env"] if e["name"] == "OUTRIDER_NATS_TOKEN"]
    check(tokens and "secretKeyRef" in tokens[0]["valueFrom"],
          "outrider: the NATS token does not come from a Secret")


def check_router(docs, router, outrider):
    pod = docs[("Deployment", "outrider-router")]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    check_http_probe(c, "livenessProbe", "/live", router["system-port"])
    check_http_probe(c, "readinessProbe", "/ready", router["system-port"])
    check(port_of(c, "http") == router["http-port"], "router: http port")
    check(port_of(c, "grpc") == router["grpc-port"], "router: grpc port")
    mounts = check_mounts(pod, c)
    check(c["args"] == ["--config", mounts.get("config", "?") + "/router.yaml"],
          "router: --config does not name the mounted router.yaml")
    svc = docs[("Service", "outrider-router")]["spec"]
    for p in svc["ports"]:
        check(port_of(c, p["targetPort"]) is not None,
              f"router Service: no container port named {p['targetPort']}")
    rc, out = run_check_config(outrider, yaml.safe_dump(router), pod_env(c))
    check(rc == 0 and "warning" not in out,
          f"router settings with the pod's environment: rc {rc}: {out}")


def check_inference_pool(docs, router):
    """The InferencePool selects the workers, targets the engine's OpenAI
    HTTP port the sidecars advertise, and names the routers' picker."""
    pool = docs[("InferencePool", "outrider-pool")]
    check(pool["apiVersion"] == "inference.networking.k8s.io/v1",
          "InferencePool: not inference.networking.k8s.io/v1")
    spec = pool["spec"]
    worker = docs[("Deployment", "outrider-worker")]["spec"]["template"]
    labels = worker["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()),
          "InferencePool: the selector does not match the worker pods")
    main = [c for c in worker["spec"]["containers"] if c["name"] == "main"][0]
    side = worker["spec"]["initContainers"][0]
    target = spec["targetPorts"][0]["number"]
    check(port_of(main, "http") == target,
          "InferencePool: targetPort is not the engine's http port")
    advertised = pod_env(side).get("OUTRIDER_ENGINE_HTTP_ENDPOINT", "")
    check(advertised == f"10.0.0.7:{target}",
          f"worker: the sidecar advertises {advertised!r}, not the pod IP "
          f"and the pool's targetPort")
    ref = spec["endpointPickerRef"]
    svc = docs.get(("Service", ref["name"]))
    if not check(svc is not None, f"InferencePool: no Service {ref['name']}"):
        return
    ports = [p for p in svc["spec"]["ports"] if p["port"] == ref["portNumber"]]
    check(len(ports) == 1, "InferencePool: the picker Service has no such port")
    rc = docs[("Deployment", "outrider-router")]["spec"]["template"]["spec"]["containers"][0]
    check(ports and port_of(rc, ports[0]["targetPort"]) == router.get("epp-port"),
          "InferencePool: the picker Service does not reach the router's epp-port")


def check_nats(docs):
    conf = docs[("ConfigMap", "nats-config")]["data"]["nats.conf"]
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write(conf)
    try:
        env = {"PATH": "/usr/bin:/bin", "POD_NAME": "nats-0", "NATS_TOKEN": "t"}
        p = subprocess.run(["/usr/sbin/nats-server", "-t", "-c", f.name],
                           env=env, capture_output=True, text=True, timeout=30)
        check(p.returncode == 0, f"nats.conf: {p.stdout}{p.stderr}")
    finally:
        os.unlink(f.name)
    sts = docs[("StatefulSet", "nats")]["spec"]
    check(sts["serviceName"] == "nats" and sts["replicas"] == 3,
          "nats: three replicas behind the headless Service nats")


def main():
    outrider = sys.argv[1]
    docs = load()
    listed = set(docs["kustomization"]["resources"])
    files = {n for n in os.listdir(K8S) if n.endswith(".yaml")} - {"kustomization.yaml"}
    check(listed == files, f"kustomization lists {sorted(listed)}, the folder has {sorted(files)}")
    check(not any(k[0] == "Secret" for k in docs if isinstance(k, tuple)),
          "a Secret is committed: make it at install time instead")
    data = docs[("ConfigMap", "outrider-config")]["data"]
    for key, path in (("sidecar.yaml", "fleet-sidecar.yaml"), ("router.yaml", "fleet-router.yaml")):
        with open(os.path.join(ROOT, "deploy", path)) as f:
            check(data[key] == f.read(), f"outrider-config {key} differs from deploy/{path}")
    side, router = settings(data["sidecar.yaml"]), settings(data["router.yaml"])
    check_worker(docs, side, outrider)
    check_router(docs, router, outrider)
    check_inference_pool(docs, router)
    check_nats(docs)
    guide = open(os.path.join(ROOT, "docs", "kubernetes.md")).read()
    for secret in ("outrider-tls", "outrider-nats"):
        check(secret in guide, f"docs/kubernetes.md does not say how to make {secret}")
    for p in problems:
        print("deploy/k8s:", p)
    print("deploy/k8s:", "ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
