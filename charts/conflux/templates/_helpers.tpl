{{/* Name of the chart, overridable. */}}
{{- define "conflux.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Prefix of every resource name. */}}
{{- define "conflux.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "conflux.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "conflux.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "conflux.selectorLabels" -}}
app.kubernetes.io/name: {{ include "conflux.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "conflux.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "conflux.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "conflux.webhookService" -}}{{ include "conflux.fullname" . }}-webhook{{- end -}}
{{- define "conflux.webhookSecret" -}}{{ include "conflux.fullname" . }}-webhook-certs{{- end -}}
{{- define "conflux.mutatingName" -}}{{ include "conflux.fullname" . }}-mutating{{- end -}}
{{- define "conflux.validatingName" -}}{{ include "conflux.fullname" . }}-validating{{- end -}}

{{- define "conflux.operatorImage" -}}
{{ include "conflux.image" (list .Values.operator.image .Chart.AppVersion) }}
{{- end -}}
{{- define "conflux.confluxdImage" -}}
{{ include "conflux.image" (list .Values.confluxd.image .Chart.AppVersion) }}
{{- end -}}

{{/* repository@digest when a digest is set, else repository:tag (appVersion by default). */}}
{{- define "conflux.image" -}}
{{- $img := index . 0 -}}
{{- if $img.digest -}}
{{ $img.repository }}@{{ $img.digest }}
{{- else -}}
{{ $img.repository }}:{{ default (index . 1) $img.tag }}
{{- end -}}
{{- end -}}
