#!/usr/bin/env python3
"""Checks the deployment files of deploy/ offline (docs/design/deploy.md).

  - deploy/systemd/tetherd.service: `systemd-analyze verify` says nothing
    (it exits 0 even on a directive it ignores, so any output fails), the
    offline security review scores at most 2.0, and the hardening the
    design asks for is there.
  - deploy/Containerfile: a Debian base, the bundle added at /opt, a
    non-root numeric user, tetherd as the entrypoint.
  - deploy/kubernetes/tetherd.yaml: parses (python3-yaml), a DaemonSet and a
    Service whose selectors, ports, probes, GPU requests, Secret-fed farm URL
    and volumes agree.
  - Every tetherd flag these files pass is one `tetherd --help` lists, and
    the Kubernetes DaemonSet registers in the farm with the flags tetherd
    takes: --farm, --farm-key and --farm-id (names etcd keys accept),
    --farm-address on the gRPC port, --label KEY=VALUE.

Usage: check_deploy.py SOURCE_DIR TETHERD
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

import yaml

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def known_flags(tetherd):
    out = subprocess.run([tetherd, "--help"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"(--[a-z][a-z-]*)", out))


def check_flags(where, args, flags):
    for a in args:
        if not a.startswith("--"):
            continue
        name = a.split("=", 1)[0]
        check(name in flags, f"{where}: tetherd has no flag {name}")


# A farm key or id (farm/records.h, ValidateName): 1 to 128 of [A-Za-z0-9._:@-];
# a $(VAR) Kubernetes substitutes stands for a value checked where it is set.
FARM_NAME = re.compile(r"^([A-Za-z0-9._:@-]|\$\([A-Z_]+\)){1,128}$")


def flag_values(args, flag):
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def check_farm_flags(args, env, grpc_port):
    for flag in ("--farm", "--farm-key", "--farm-id", "--farm-address", "--label"):
        check(flag_values(args, flag), f"kubernetes: no {flag} VALUE in the args")
    for flag in ("--farm-key", "--farm-id"):
        for v in flag_values(args, flag):
            check(FARM_NAME.match(v) is not None, f"kubernetes: {flag} {v!r} is not a farm name")
            for ref in re.findall(r"\$\(([A-Z_]+)\)", v):
                literal = env.get(ref, {}).get("value")
                check(literal is None or FARM_NAME.match(literal) is not None,
                      f"kubernetes: {flag} gets {ref}={literal!r}, not a farm name")
    for v in flag_values(args, "--farm-address"):
        host, _, port = v.rpartition(":")
        check(host != "" and port == str(grpc_port),
              f"kubernetes: --farm-address {v} is not HOST:{grpc_port} (the gRPC port)")
    for v in flag_values(args, "--label"):
        check(re.match(r"^[^=\s]+=\S+$", v) is not None, f"kubernetes: --label {v!r} is not KEY=VALUE")
    for v in flag_values(args, "--farm"):
        check(v.startswith(("etcd://", "etcds://", "$(")),
              f"kubernetes: --farm {v} is not an etcd:// URL")


def unit_directives(text):
    directives = {}
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        directives.setdefault(key.strip(), []).append(value.strip())
    return directives


def check_systemd(root, tetherd, flags):
    path = os.path.join(root, "deploy/systemd/tetherd.service")
    text = open(path).read()
    d = unit_directives(text)
    one = lambda key: d.get(key, [""])[-1]
    check(one("User") not in ("", "root"), "systemd: no dedicated User=")
    check(one("NoNewPrivileges") == "yes", "systemd: NoNewPrivileges=yes missing")
    check(one("ProtectSystem") == "strict", "systemd: ProtectSystem=strict missing")
    check(one("StateDirectory") != "", "systemd: no StateDirectory=")
    check(one("LoadCredential").startswith("token:"), "systemd: no LoadCredential=token:...")
    check(one("CapabilityBoundingSet") == "", "systemd: capabilities not dropped")
    exec_start = shlex.split(one("ExecStart"))
    check(exec_start[:1] == ["/opt/tether/bin/tetherd"], f"systemd: ExecStart {exec_start[:1]}")
    joined = " ".join(exec_start)
    check("${CREDENTIALS_DIRECTORY}/token" in joined, "systemd: the token is not the credential")
    check("${STATE_DIRECTORY}" in joined, "systemd: the store is not under StateDirectory")
    check_flags("systemd ExecStart", exec_start[1:], flags)
    with tempfile.TemporaryDirectory() as tmp:
        # verify checks that ExecStart exists: point it at the built daemon.
        unit = os.path.join(tmp, "tetherd.service")
        with open(unit, "w") as f:
            f.write(text.replace("/opt/tether/bin/tetherd", os.path.abspath(tetherd)))
        env = dict(os.environ, SYSTEMD_LOG_COLOR="0")
        v = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True,
                           env=env)
        said = (v.stdout + v.stderr).strip()
        check(v.returncode == 0 and not said, f"systemd-analyze verify: rc {v.returncode}: {said}")
        s = subprocess.run(["systemd-analyze", "security", "--offline=true", "--threshold=20",
                            "--no-pager", unit], capture_output=True, text=True, env=env)
        score = re.search(r"Overall exposure level for \S+: ([0-9.]+)", s.stdout)
        check(s.returncode == 0 and score is not None,
              "systemd-analyze security: exposure above 2.0: " +
              (score.group(1) if score else (s.stdout + s.stderr)[-500:]))


def check_containerfile(root, flags):
    text = open(os.path.join(root, "deploy/Containerfile")).read()
    lines = [l for l in re.sub(r"\\\n\s*", " ", text).splitlines()
             if l.strip() and not l.lstrip().startswith("#")]
    base = re.search(r"^ARG BASE=(\S+)", text, re.M)
    check(base is not None and base.group(1).startswith("debian:"), "Containerfile: base is not Debian")
    check(any(re.match(r"FROM \$\{BASE\}", l) for l in lines), "Containerfile: FROM ${BASE} missing")
    check(any(re.match(r"ADD \$\{BUNDLE\} /opt/$", l) for l in lines),
          "Containerfile: the bundle is not added at /opt")
    user = [l.split()[1] for l in lines if l.startswith("USER ")]
    check(user and re.match(r"^[1-9][0-9]*(:[0-9]+)?$", user[-1]),
          f"Containerfile: USER must be a non-root uid, got {user}")
    entry = [l for l in lines if l.startswith("ENTRYPOINT ")]
    check(entry and '"/opt/tether/bin/tetherd"' in entry[-1], "Containerfile: ENTRYPOINT is not tetherd")
    cmd = [l for l in lines if l.startswith("CMD ")]
    args = yaml.safe_load(cmd[-1][4:]) if cmd else []
    check_flags("Containerfile CMD", args, flags)


def check_kubernetes(root, flags):
    docs = list(yaml.safe_load_all(open(os.path.join(root, "deploy/kubernetes/tetherd.yaml"))))
    by_kind = {d["kind"]: d for d in docs if d}
    check(set(by_kind) == {"DaemonSet", "Service"}, f"kubernetes: kinds {sorted(by_kind)}")
    ds, svc = by_kind.get("DaemonSet"), by_kind.get("Service")
    if not ds or not svc:
        return
    check(ds.get("apiVersion") == "apps/v1", "kubernetes: DaemonSet apiVersion")
    spec = ds["spec"]
    pod = spec["template"]
    labels = pod["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()),
          "kubernetes: the DaemonSet's selector does not match its pods")
    pspec = pod["spec"]
    check(pspec["securityContext"].get("runAsNonRoot") is True, "kubernetes: runAsNonRoot")
    containers = pspec["containers"]
    check(len(containers) == 1, "kubernetes: one container")
    c = containers[0]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check("grpc" in ports and "metrics" in ports, f"kubernetes: ports {ports}")
    for res in ("requests", "limits"):
        check(int(c["resources"][res].get("nvidia.com/gpu", 0)) >= 1,
              f"kubernetes: no nvidia.com/gpu in resources.{res}")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe, {})
        check(p.get("grpc", {}).get("port") == ports.get("grpc"),
              f"kubernetes: {probe} is not a gRPC probe of the grpc port")
    env = {e["name"]: e for e in c["env"]}
    farm = env.get("TETHER_FARM_URL", {}).get("valueFrom", {}).get("secretKeyRef")
    check(farm is not None and farm.get("name") and farm.get("key"),
          "kubernetes: the farm URL does not come from a Secret")
    args = c["args"]
    check("--farm" in args and args[args.index("--farm") + 1] == "$(TETHER_FARM_URL)",
          "kubernetes: --farm is not given the Secret's URL")
    for ref in re.findall(r"\$\(([A-Z_]+)\)", " ".join(args)):
        check(ref in env, f"kubernetes: args use $({ref}) but no env defines it")
    check_flags("kubernetes args", args, flags)
    check_farm_flags(args, env, ports.get("grpc"))
    sc = c["securityContext"]
    check(sc.get("allowPrivilegeEscalation") is False and sc.get("readOnlyRootFilesystem") is True
          and sc.get("capabilities", {}).get("drop") == ["ALL"], "kubernetes: container hardening")
    volumes = {v["name"] for v in pspec["volumes"]}
    for m in c["volumeMounts"]:
        check(m["name"] in volumes, f"kubernetes: mount {m['name']} has no volume")
    token = "--auth-token-file" in args and args[args.index("--auth-token-file") + 1]
    check(token and any(token.startswith(m["mountPath"] + "/") for m in c["volumeMounts"]),
          "kubernetes: the token file is not on a mounted volume")
    store = args[args.index("--store-dir") + 1] if "--store-dir" in args else ""
    check(any(store.startswith(m["mountPath"]) and not m.get("readOnly") for m in c["volumeMounts"]),
          "kubernetes: the store is not on a writable volume (the root file system is read-only)")
    check(svc["spec"].get("clusterIP") == "None", "kubernetes: the Service is not headless")
    check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
          "kubernetes: the Service's selector does not match the pods")
    for p in svc["spec"]["ports"]:
        check(p["targetPort"] in ports, f"kubernetes: Service targetPort {p['targetPort']} unknown")


def main():
    root, tetherd = sys.argv[1], sys.argv[2]
    flags = known_flags(tetherd)
    check_systemd(root, tetherd, flags)
    check_containerfile(root, flags)
    check_kubernetes(root, flags)
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print("deploy checks passed: systemd unit, Containerfile, Kubernetes manifests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
