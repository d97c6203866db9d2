{{- define "velashard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "velashard.serviceAccount" -}}
{{- default (include "velashard.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Pod labels: app.kubernetes.io/name=vela-core is what the master's shard discovery selects. */}}
{{- define "velashard.selectorLabels" -}}
app.kubernetes.io/name: vela-core
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "velashard.labels" -}}
{{ include "velashard.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "velashard.featureGates" -}}
{{- $gates := list (printf "AuthenticateApplication=%t" .Values.authentication.enabled) -}}
{{- range $name, $on := .Values.featureGates -}}
{{- if ne $name "AuthenticateApplication" -}}{{- $gates = append $gates (printf "%s=%t" $name $on) -}}{{- end -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}

{{/* The author webhook's match condition (velashard/webhook/runner.py AUTHOR_MATCH_CONDITIONS; a unit test keeps
them identical): an update whose spec or author annotations change. */}}
{{- define "velashard.authorChanged" -}}
object.spec != oldObject.spec || (has(object.metadata.annotations) && "app.oam.dev/username" in object.metadata.annotations ? object.metadata.annotations["app.oam.dev/username"] : '') != (has(oldObject.metadata.annotations) && "app.oam.dev/username" in oldObject.metadata.annotations ? oldObject.metadata.annotations["app.oam.dev/username"] : '') || (has(object.metadata.annotations) && "app.oam.dev/group" in object.metadata.annotations ? object.metadata.annotations["app.oam.dev/group"] : '') != (has(oldObject.metadata.annotations) && "app.oam.dev/group" in oldObject.metadata.annotations ? oldObject.metadata.annotations["app.oam.dev/group"] : '')
{{- end -}}
