{{/* SPDX-License-Identifier: Apache-2.0 */}}
{{/*
Helpers of the gpuplane chart. The templates keep to a small, common part of Helm: sprig functions,
include, toYaml, required, .Values, .Release, .Chart (tests/deploy-render renders them without Helm).
*/}}

{{/* The chart label value: name-version. */}}
{{- define "gpuplane.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object the chart creates. */}}
{{- define "gpuplane.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpu-operator
helm.sh/chart: {{ include "gpuplane.chart" . }}
{{- with .Values.operator.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels of the operator's objects: the common ones and the component. */}}
{{- define "gpuplane.operatorLabels" -}}
{{ include "gpuplane.labels" . }}
app.kubernetes.io/component: gpu-operator
{{- end -}}

{{/*
The gpuplane image: operator.repository/operator.image:version (the chart's appVersion when
version is empty), or @version for a digest (sha256:...). An empty repository gives image:version.
*/}}
{{- define "gpuplane.image" -}}
{{- $op := .Values.operator -}}
{{- $version := $op.version | default .Chart.AppVersion | toString -}}
{{- $image := required "operator.image is required" $op.image -}}
{{- $path := $image -}}
{{- if $op.repository -}}
{{- $path = printf "%s/%s" (trimSuffix "/" $op.repository) $image -}}
{{- end -}}
{{- if hasPrefix "sha256:" $version -}}
{{- printf "%s@%s" $path $version -}}
{{- else -}}
{{- printf "%s:%s" $path $version -}}
{{- end -}}
{{- end -}}

{{/*
The ClusterPolicy fields every component has, from its values: enabled, the image fields (only
those set, so that empty ones fall back to the operator's image), imagePullPolicy,
imagePullSecrets, args, env, resources. Call with the component's values.
*/}}
{{- define "gpuplane.componentSpec" -}}
{{- if hasKey . "enabled" }}
enabled: {{ .enabled }}
{{- end }}
{{- with .repository }}
repository: {{ . | quote }}
{{- end }}
{{- with .image }}
image: {{ . | quote }}
{{- end }}
{{- with .version }}
version: {{ . | toString | quote }}
{{- end }}
{{- with .imagePullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- with .imagePullSecrets }}
imagePullSecrets:
{{ toYaml . }}
{{- end }}
{{- with .args }}
args:
{{ toYaml . }}
{{- end }}
{{- with .env }}
env:
{{ toYaml . }}
{{- end }}
{{- with .resources }}
resources:
{{ toYaml . | indent 2 }}
{{- end }}
{{- end -}}
