{{/*
Names. With the release named after the chart (`helm install sampledb-operator ...`) every object is
named as in the kustomize install (manifests/default); another release name prefixes them, so two
releases never share a cluster-scoped object.
*/}}
{{- define "sampledb-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sampledb-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the operator runs as (the admission policy names it). */}}
{{- define "sampledb-operator.serviceAccountName" -}}
{{- include "sampledb-operator.fullname" . }}
{{- end }}

{{/* Labels of every object: the kustomize install's part-of label and Helm's release labels. */}}
{{- define "sampledb-operator.labels" -}}
app.kubernetes.io/part-of: sampledb-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector of the operator's pods (Deployment, metrics Service, ServiceMonitor). */}}
{{- define "sampledb-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sampledb-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The finalizer policy's name: sampledb-finalizer as in manifests/admission for the release named after
the chart, else prefixed like every other name.
*/}}
{{- define "sampledb-operator.finalizerPolicyName" -}}
{{- $full := include "sampledb-operator.fullname" . }}
{{- if eq $full "sampledb-operator" }}sampledb-finalizer{{ else }}{{ printf "%s-finalizer" $full | trunc 63 | trimSuffix "-" }}{{ end }}
{{- end }}

{{- define "sampledb-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
