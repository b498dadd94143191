{{- define "vgpu.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vgpu.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "vgpu.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "vgpu.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "vgpu.scheduler" -}}{{ include "vgpu.fullname" . }}-scheduler{{- end -}}
{{- define "vgpu.devicePlugin" -}}{{ include "vgpu.fullname" . }}-device-plugin{{- end -}}
{{- define "vgpu.webhook" -}}{{ include "vgpu.fullname" . }}-webhook{{- end -}}
{{- define "vgpu.tlsSecret" -}}{{ include "vgpu.scheduler" . }}-tls{{- end -}}
{{- define "vgpu.grantKeysSecret" -}}vgpu-grant-keys{{- end -}}

{{- define "vgpu.labels" -}}
app.kubernetes.io/name: {{ include "vgpu.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one component: (list $ "scheduler") */}}
{{- define "vgpu.selector" -}}
app.kubernetes.io/name: {{ include "vgpu.name" (index . 0) }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* an image reference: (list $ .Values.x.image defaultTag) */}}
{{- define "vgpu.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- $tag := $image.tag | default (index . 2) -}}
{{- $registry := $root.Values.global.imageRegistry | default $image.registry -}}
{{- if $registry -}}{{ $registry }}/{{ end -}}{{ $image.repository }}:{{ $tag }}
{{- end -}}

{{- define "vgpu.imageTag" -}}
{{- .Values.global.imageTag | default .Chart.AppVersion -}}
{{- end -}}

{{- define "vgpu.kubeSchedulerTag" -}}
{{- .Values.scheduler.kubeScheduler.image.tag | default (regexReplaceAll "[+-].*$" .Capabilities.KubeVersion.Version "") -}}
{{- end -}}

{{/* "5m", "300s", "1h" or a number of seconds -> seconds */}}
{{- define "vgpu.seconds" -}}
{{- $text := toString . -}}
{{- if hasSuffix "h" $text -}}{{ mul (trimSuffix "h" $text | int) 3600 }}
{{- else if hasSuffix "m" $text -}}{{ mul (trimSuffix "m" $text | int) 60 }}
{{- else -}}{{ trimSuffix "s" $text | int }}
{{- end -}}
{{- end -}}

{{- define "vgpu.metricsPort" -}}
{{- regexReplaceAll "^.*:" (toString .Values.scheduler.metricsBindAddress) "" -}}
{{- end -}}

{{- define "vgpu.serviceMonitors" -}}
{{- if or .Values.prometheus.enabled .Values.serviceMonitor.enabled -}}true{{- end -}}
{{- end -}}

{{/* flags every vgpu command takes */}}
{{- define "vgpu.logArgs" -}}
- --log-level={{ .Values.log.level }}
{{- if .Values.log.json }}
- --log-json
{{- end }}
{{- end -}}

{{- define "vgpu.resourceNames" -}}
{{- list .Values.resourceName .Values.resourceMem .Values.resourceMemPercentage .Values.resourceCores .Values.resourcePriority | toJson -}}
{{- end -}}

{{- define "vgpu.podSecurityContext" -}}
seccompProfile:
  type: RuntimeDefault
{{- end -}}
