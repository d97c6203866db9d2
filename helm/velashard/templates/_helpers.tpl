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
{{- $gates := list -}}
{{- range $name, $on := .Values.featureGates -}}{{- $gates = append $gates (printf "%s=%t" $name $on) -}}{{- end -}}
{{- join "," $gates -}}
{{- end -}}
