"""vela/op, the legacy surface most step definitions in the wild still import: the same actions as the newer
packages, written without `$params`/`$returns` (an action's fields are its parameters and its results are filled
into the same fields), plus the app-level helpers (#ApplyComponent, #Load, #ApplyApplication, #Deploy...).
Terraform's actions (#DeployCloudResource, #ShareCloudResource) fail the step: there is no terraform here."""

from __future__ import annotations

from typing import Any

from velashard.workflow.providers import builtin, config, email, http, kube, metrics, multicluster, oam, util
from velashard.workflow.providers.base import Provider, ProviderError, Runtime

SCHEMA = '''
// --- objects (vela/kube) ---
#Apply: {
	#do:       "apply"
	#provider: "op"
	cluster: *"" | string
	value: {...}
	patch?: {...}
	...
}
#ApplyInParallel: {
	#do:       "apply-in-parallel"
	#provider: "op"
	cluster: *"" | string
	value: [...{...}]
	...
}
#Read: {
	#do:       "read"
	#provider: "op"
	cluster: *"" | string
	value: {...}
	...
}
#Patch: {
	#do:       "patch"
	#provider: "op"
	cluster: *"" | string
	value: {...}
	patch: {...}
	result?: {...}
	...
}
#List: {
	#do:       "list"
	#provider: "op"
	cluster: *"" | string
	resource: {
		apiVersion: string
		kind:       string
	}
	filter?: {
		namespace: *"" | string
		matchingLabels?: {...}
	}
	list?: {...}
	...
}
#Delete: {
	#do:       "delete"
	#provider: "op"
	cluster: *"" | string
	value: {
		apiVersion: string
		kind:       string
		metadata: {
			name?:     string
			// +usage=its namespace; "default" when none is given. Not a CUE default (KubeVela's is): a template
			// that passes a parameter with its own default (clean-jobs' context.namespace) would have two and none
			namespace?: string
		}
	}
	filter?: {
		namespace?: string
		matchingLabels?: {...}
	}
	...
}

// --- the step itself (vela/builtin) ---
#ConditionalWait: {
	#do:       "wait"
	#provider: "op"
	continue: *false | bool
	message?: string
}
#Suspend: {
	#do:       "suspend"
	#provider: "op"
	duration?: string
	message?:  string
}
#Break: {
	#do:       "break"
	#provider: "op"
	message?: string
}
#Fail: {
	#do:       "fail"
	#provider: "op"
	message?: string
}
#Message: {
	#do:       "message"
	#provider: "op"
	message?: string
}
#DoVar: {
	#do:       "var"
	#provider: "op"
	method: *"Get" | "Put"
	path:   string
	value?: _
}
#Steps: {...}

// --- helpers (vela/util) ---
#ConvertString: {
	#do:       "string"
	#provider: "op"
	bt:   bytes
	str?: string
	...
}
#PatchK8sObject: {
	#do:       "patch-k8s-object"
	#provider: "op"
	value: {...}
	patch: {...}
	result?: {...}
	...
}
#Log: {
	#do:       "log"
	#provider: "op"
	data?: {...} | string
	level: *3 | int
	source?: close({
		url: string
	}) | close({
		resources?: [...{
			name?:      string
			cluster?:   string
			namespace?: string
			labelSelector?: {...}
		}]
	})
}

// --- requests, email, metrics, configs ---
#HTTPDo: {
	#do:       "do"
	#provider: "op"
	method: *"GET" | "POST" | "PUT" | "DELETE"
	url:    string
	request?: {
		timeout?: string
		body?:    string
		header?: [string]: string
		trailer?: [string]: string
		ratelimiter?: {
			limit:  int
			period: string
		}
		...
	}
	tls_config?: {
		secret:     string
		namespace?: string
	}
	response?: {
		body: string
		header?: [string]: [...string]
		trailer?: [string]: [...string]
		statusCode: int
		...
	}
	...
}
#HTTPGet:    #HTTPDo & {method: "GET"}
#HTTPPost:   #HTTPDo & {method: "POST"}
#HTTPPut:    #HTTPDo & {method: "PUT"}
#HTTPDelete: #HTTPDo & {method: "DELETE"}

#SendEmail: {
	#do:       "send"
	#provider: "op"
	from: {
		address:  string
		alias?:   string
		password: string
		host:     string
		port:     int
	}
	to: [...string]
	content: {
		subject: string
		body:    string
	}
	...
}

#PromCheck: {
	#do:       "promCheck"
	#provider: "op"
	query:          string
	metricEndpoint: *"http://prometheus-server.o11y-system.svc:9090" | string
	condition:      string
	failDuration:   *"2m" | string
	duration:       *"5m" | string
	...
}

#CreateConfig: {
	#do:       "create-config"
	#provider: "op"
	name:      string
	namespace: string
	template?: string
	config: {...}
}
#DeleteConfig: {
	#do:       "delete-config"
	#provider: "op"
	name:      string
	namespace: string
}
#ReadConfig: {
	#do:       "read-config"
	#provider: "op"
	name:      string
	namespace: string
	config?: {...}
}
#ListConfig: {
	#do:       "list-config"
	#provider: "op"
	template:  string
	namespace: string
	configs?: [...{...}]
}

// --- the app's components and policies (vela/oam, vela/multicluster) ---
#ApplyComponent: {
	#provider: "op"
	#do:       "component-apply"
	cluster:     *"" | string
	env:         *"" | string
	namespace:   *"" | string
	waitHealthy: *true | bool
	value: {...}
	patch?: {...}
	...
}
#RenderComponent: {
	#provider: "op"
	#do:       "component-render"
	cluster:   *"" | string
	env:       *"" | string
	namespace: *"" | string
	value: {...}
	patch?: {...}
	output?: {...}
	outputs?: {...}
	...
}
#LoadComponets: {
	#provider: "op"
	#do:       "load"
	app?: string
	value?: {...}
	...
}
#LoadComponetsInOrder: {
	#provider: "op"
	#do:       "load-comps-in-order"
	app?: string
	value?: [...{...}]
	...
}
#LoadPolicies: {
	#provider: "op"
	#do:       "load-policies"
	app?: string
	value?: {...}
	...
}
#Load:        #LoadComponets
#LoadInOrder: #LoadComponetsInOrder

// Apply every component, one after another, each waiting for its health.
#ApplyApplication: #Steps & {
	load: #LoadComponetsInOrder
	components: #Steps & {
		for i, c in load.value {
			"\\(c.name)": #ApplyComponent & {value: c}
		}
	}
}
// Apply every component at once, without waiting for health.
#ApplyApplicationInParallel: #Steps & {
	load: #LoadComponetsInOrder
	components: #Steps & {
		for i, c in load.value {
			"\\(c.name)": #ApplyComponent & {value: c, waitHealthy: false}
		}
	}
}
// Apply every component but the exceptions.
#ApplyRemaining: #Steps & {
	exceptions: [...string]
	exceptions_: {for c in exceptions {"\\(c)": true}}
	load: #LoadComponets
	components: #Steps & {
		for name, c in load.value if exceptions_[name] == _|_ {
			"\\(name)": #ApplyComponent & {value: c}
		}
	}
}
// Render one component and apply its objects but the exceptions.
#ApplyComponentRemaining: #Steps & {
	exceptions: [...string]
	exceptions_: {for c in exceptions {"\\(c)": true}}
	component: string
	load:      #LoadComponets
	render: #Steps & {
		rendered: #RenderComponent & {value: load.value[component]}
		comp: #Apply & {value: rendered.output}
		for name, c in rendered.outputs if exceptions_[name] == _|_ {
			"\\(name)": #Apply & {value: c}
		}
	}
}

#Deploy: {
	#provider: "op"
	#do:       "deploy"
	policies: [...string]
	parallelism:              int
	ignoreTerraformComponent: bool
	inlinePolicies: *[] | [...{...}]
}
// Deploy the components to one environment of an env-binding policy (deploy2env): patched and selected as the
// environment says, into its namespace (the local cluster only); the step waits until they are healthy.
#ApplyEnvBindApp: {
	#provider: "op"
	#do:       "apply-env-bind-app"
	env:       string
	policy:    string
	app:       string
	namespace: string
	parallel:  bool
	...
}
#GetPlacementsFromTopologyPolicies: {
	#provider: "op"
	#do:       "get-placements-from-topology-policies"
	policies: [...string]
	placements?: [...{
		cluster:   string
		namespace: string
	}]
}
#ListClusters: {
	#provider: "op"
	#do:       "list-clusters"
	outputs?: clusters: [...string]
}

#DeployCloudResource: {
	#provider: "op"
	#do:       "deploy-cloud-resource"
	...
}
#ShareCloudResource: {
	#provider: "op"
	#do:       "share-cloud-resource"
	...
}
'''


def list_objects(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    found = kube.list_objects(params, rt)
    found["list"] = found.pop("values")
    return found


def http_do(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    return {"response": http.do(params, rt)}


def no_terraform(params: dict[str, Any], rt: Runtime) -> None:
    raise ProviderError("cloud resources need terraform, which is not supported here")


HANDLERS = {
    **kube.HANDLERS, "list": list_objects,
    **builtin.HANDLERS,
    **util.HANDLERS,
    "do": http_do,
    **email.HANDLERS,
    **metrics.HANDLERS,
    "create-config": config.create, "delete-config": config.delete, "read-config": config.read,
    "list-config": config.list_configs,
    **oam.HANDLERS,
    **multicluster.HANDLERS,
    "deploy-cloud-resource": no_terraform, "share-cloud-resource": no_terraform,
}
PROVIDER = Provider("vela/op", "op", SCHEMA, HANDLERS, legacy=True)
