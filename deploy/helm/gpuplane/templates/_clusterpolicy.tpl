{{/* SPDX-License-Identifier: Apache-2.0 */}}
{{/* The sections of the ClusterPolicy (clusterpolicy.yaml), each from its values. */}}

{{/*
A section "name: body", or "name: {}" when the body is empty. Call with (list name body).
*/}}
{{- define "gpuplane.section" -}}
{{- $name := index . 0 -}}
{{- $body := index . 1 | trim -}}
{{- if $body -}}
{{ $name }}:
{{- $body | nindent 2 }}
{{- else -}}
{{ $name }}: {}
{{- end -}}
{{- end -}}

{{- define "gpuplane.cp.operator" -}}
runtimeClass: {{ .Values.operator.runtimeClass | default "nvidia" | quote }}
{{- end -}}

{{- define "gpuplane.cp.daemonsets" -}}
{{- with .Values.daemonsets }}
{{- with .labels }}
labels:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .updateStrategy }}
updateStrategy: {{ . }}
{{- end }}
{{- with .rollingUpdate }}
{{- if .maxUnavailable }}
rollingUpdate:
  maxUnavailable: {{ .maxUnavailable | toString | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "gpuplane.cp.hostPaths" -}}
{{- with .Values.hostPaths }}
{{- with .rootFS }}
rootFS: {{ . | quote }}
{{- end }}
{{- with .driverInstallDir }}
driverInstallDir: {{ . | quote }}
{{- end }}
{{- with .kubeletRootDir }}
kubeletRootDir: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "gpuplane.cp.driver" -}}
{{ include "gpuplane.componentSpec" .Values.driver }}
{{- with .Values.driver }}
{{- with .kernelModuleType }}
kernelModuleType: {{ . }}
{{- end }}
{{- if hasKey . "usePrecompiled" }}
usePrecompiled: {{ .usePrecompiled }}
{{- end }}
{{- with .rdma }}
rdma:
  enabled: {{ .enabled | default false }}
  useHostMofed: {{ .useHostMofed | default false }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "gpuplane.cp.toolkit" -}}
{{ include "gpuplane.componentSpec" .Values.toolkit }}
{{- with .Values.toolkit.installDir }}
installDir: {{ . | quote }}
{{- end }}
{{- end -}}

{{- define "gpuplane.cp.validator" -}}
{{ include "gpuplane.componentSpec" .Values.validator }}
{{- range $check := list "driver" "toolkit" "cuda" "plugin" }}
{{- with (index $.Values.validator $check) }}
{{- with .env }}
{{ $check }}:
  env:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "gpuplane.cp.devicePlugin" -}}
{{ include "gpuplane.componentSpec" .Values.devicePlugin }}
{{- with .Values.devicePlugin.config }}
{{- if .name }}
config:
  name: {{ .name | quote }}
  {{- with .default }}
  default: {{ . | quote }}
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "gpuplane.cp.dcgmExporter" -}}
{{ include "gpuplane.componentSpec" .Values.dcgmExporter }}
{{- with .Values.dcgmExporter }}
{{- if .hostPID }}
hostPID: true
{{- end }}
{{- if .enablePodLabels }}
enablePodLabels: true
{{- end }}
{{- if .enablePodUID }}
enablePodUID: true
{{- end }}
{{- with .podLabelAllowlistRegex }}
podLabelAllowlistRegex:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .service }}
service:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .config }}
{{- if .name }}
config:
  name: {{ .name | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
