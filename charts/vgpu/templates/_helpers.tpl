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

{{/* HAMi's namespaceOverride, else the release's namespace */}}
{{- define "vgpu.namespace" -}}
{{- .Values.namespaceOverride | default .Release.Namespace -}}
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
{{- with .Values.global.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* HAMi's global.annotations, as metadata lines, on the Deployment and the DaemonSet */}}
{{- define "vgpu.workloadAnnotations" -}}
{{- with .Values.global.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
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

{{/* vgpu's own image, tagged by vgpu's version: HAMi's imageTag and per-component image keys
never retag or rename it */}}
{{- define "vgpu.vgpuImage" -}}
{{- include "vgpu.image" (list . .Values.image .Chart.AppVersion) -}}
{{- end -}}

{{/* HAMi's image, which carries HAMi-core: devicePlugin.hamiCore.image, or before HAMi v2.7
devicePlugin.image as one string (registry/repository), as HAMi's device plugin ran it; tagged
by its own tag, else HAMi's release (`version` before v2.7, global.imageTag from v2.7 on) */}}
{{- define "vgpu.hamiCoreImage" -}}
{{- $image := .Values.devicePlugin.hamiCore.image -}}
{{- $tag := $image.tag | default .Values.version | default .Values.global.imageTag | required "devicePlugin.hamiCore.image.tag or global.imageTag must name the tag of HAMi's image that carries HAMi-core" -}}
{{- $old := .Values.devicePlugin.image -}}
{{- if and (kindIs "string" $old) $old -}}
{{ $old }}:{{ $tag }}
{{- else -}}
{{- include "vgpu.image" (list . $image $tag) -}}
{{- end -}}
{{- end -}}

{{/* imagePullSecrets of a pod: global.imagePullSecrets (imagePullSecrets before HAMi v2.7)
plus the pullSecrets of each of its images, (list $ (list image...)), HAMi's image keys
included; an image that is not a map (an old HAMi string) has none. Each secret a name (HAMi) or a {name: ...} object, each name once. */}}
{{- define "vgpu.pullSecrets" -}}
{{- $values := (index . 0).Values -}}
{{- $secrets := concat ($values.global.imagePullSecrets | default list) ($values.imagePullSecrets | default list) -}}
{{- range (index . 1) -}}
{{- if kindIs "map" . -}}
{{- $secrets = concat $secrets (.pullSecrets | default list) -}}
{{- end -}}
{{- end -}}
{{- $names := list -}}
{{- range $secrets -}}
{{- if kindIs "map" . -}}
{{- $names = append $names .name -}}
{{- else -}}
{{- $names = append $names . -}}
{{- end -}}
{{- end -}}
{{- with ($names | compact | uniq) }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* kube-scheduler's image: HAMi's map (registry, repository, tag: v2.7 on) or HAMi's string
before v2.7 (registry/repository, tagged by scheduler.kubeScheduler.imageTag) */}}
{{- define "vgpu.kubeSchedulerImage" -}}
{{- $image := .Values.scheduler.kubeScheduler.image -}}
{{- if kindIs "map" $image -}}
{{ include "vgpu.image" (list . (omit $image "tag") (include "vgpu.kubeSchedulerTag" .)) }}
{{- else -}}
{{ $image }}:{{ include "vgpu.kubeSchedulerTag" . }}
{{- end -}}
{{- end -}}

{{- define "vgpu.kubeSchedulerPullPolicy" -}}
{{- $kubeScheduler := .Values.scheduler.kubeScheduler -}}
{{- if kindIs "map" $kubeScheduler.image -}}
{{ $kubeScheduler.image.pullPolicy | default "IfNotPresent" }}
{{- else -}}
{{ $kubeScheduler.imagePullPolicy | default "IfNotPresent" }}
{{- end -}}
{{- end -}}

{{/* the tag the values give kube-scheduler's image, "" when none */}}
{{- define "vgpu.kubeSchedulerGivenTag" -}}
{{- $kubeScheduler := .Values.scheduler.kubeScheduler -}}
{{- if kindIs "map" $kubeScheduler.image -}}
{{ $kubeScheduler.image.tag | default "" | trim }}
{{- else -}}
{{ $kubeScheduler.imageTag | default "" | trim }}
{{- end -}}
{{- end -}}

{{/* "true" when the given tag names a kube-scheduler before 1.25, which cannot read the
KubeSchedulerConfiguration v1 this chart writes (HAMi v2.4's default imageTag is v1.20.0, which
HAMi v2.4 itself never used) */}}
{{- define "vgpu.kubeSchedulerTagTooOld" -}}
{{- if regexMatch "^v?1\\.([0-9]|1[0-9]|2[0-4])(\\.[0-9]+)?([-+].*)?$" (include "vgpu.kubeSchedulerGivenTag" .) -}}true{{- end -}}
{{- end -}}

{{/* the given tag, else (or when too old) the cluster's version, suffix such as +k3s1 stripped */}}
{{- define "vgpu.kubeSchedulerTag" -}}
{{- $given := include "vgpu.kubeSchedulerGivenTag" . -}}
{{- if or (not $given) (include "vgpu.kubeSchedulerTagTooOld" .) -}}
{{ regexReplaceAll "[+-].*$" .Capabilities.KubeVersion.Version "" }}
{{- else -}}
{{ $given }}
{{- end -}}
{{- end -}}

{{/* "5m", "300s", "1h" or a number of seconds -> seconds */}}
{{- define "vgpu.seconds" -}}
{{- $text := toString . -}}
{{- if hasSuffix "h" $text -}}{{ mul (trimSuffix "h" $text | int) 3600 }}
{{- else if hasSuffix "m" $text -}}{{ mul (trimSuffix "m" $text | int) 60 }}
{{- else -}}{{ trimSuffix "s" $text | int }}
{{- end -}}
{{- end -}}

{{/* one scheduler.fragmentation.seedShapes or typicalShapes item as the scheduler's item (the same
fields, snake_case: memoryPercent -> memory_percent), in JSON */}}
{{- define "vgpu.seedShape" -}}
{{- $shape := dict -}}
{{- range $key, $value := . -}}
{{- $_ := set $shape (snakecase $key) $value -}}
{{- end -}}
{{- toJson $shape -}}
{{- end -}}

{{- define "vgpu.metricsPort" -}}
{{- regexReplaceAll "^.*:" (toString .Values.scheduler.metricsBindAddress) "" -}}
{{- end -}}

{{/* ServiceMonitors asked for (HAMi's prometheus.enabled or serviceMonitor.enabled) */}}
{{- define "vgpu.serviceMonitorsWanted" -}}
{{- if or .Values.prometheus.enabled .Values.serviceMonitor.enabled -}}true{{- end -}}
{{- end -}}

{{/* the Prometheus operator's API is served (`helm template`: pass
--api-versions monitoring.coreos.com/v1) */}}
{{- define "vgpu.prometheusOperator" -}}
{{- if or (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") -}}true{{- end -}}
{{- end -}}

{{- define "vgpu.serviceMonitors" -}}
{{- if and (include "vgpu.serviceMonitorsWanted" .) (include "vgpu.prometheusOperator" .) -}}true{{- end -}}
{{- end -}}

{{/* The API server serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy. Against a
cluster Helm lists every served kind, so its absence there means none; `helm template` lists
no kinds (only group versions, whatever --kube-version says), so there the Kubernetes version
decides: v1 policies are GA and on from 1.30. */}}
{{- define "vgpu.admissionPolicyServed" -}}
{{- $apis := .Capabilities.APIVersions -}}
{{- $discovered := $apis.Has "v1/Pod" -}}
{{- if or ($apis.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") (and (not $discovered) (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version)) -}}true{{- end -}}
{{- end -}}

{{- define "vgpu.admissionPolicy" -}}
{{- if and .Values.scheduler.admissionPolicy.enabled (include "vgpu.admissionPolicyServed" .) -}}true{{- end -}}
{{- end -}}

{{/* usernames the admission policy trusts besides vgpu's own service accounts (JSON list) */}}
{{- define "vgpu.trustedUsers" -}}
{{- $users := .Values.scheduler.admissionPolicy.trustedUsers -}}
{{- if .Values.takeover.fromHami -}}
{{- $users = concat $users .Values.takeover.hamiServiceAccounts -}}
{{- end -}}
{{- $users | uniq | toJson -}}
{{- end -}}

{{/* whether a dotted path is set in the values: (list $.Values "a.b.c") */}}
{{- define "vgpu.given" -}}
{{- $node := index . 0 -}}
{{- $found := true -}}
{{- range (splitList "." (index . 1)) -}}
{{- if and $found (kindIs "map" $node) (hasKey $node .) -}}
{{- $node = index $node . -}}
{{- else -}}
{{- $found = false -}}
{{- end -}}
{{- end -}}
{{- if $found -}}true{{- end -}}
{{- end -}}

{{/* flags every vgpu command takes */}}
{{- define "vgpu.logArgs" -}}
- --log-level={{ .Values.log.level }}
{{- if .Values.log.json }}
- --log-json
{{- end }}
{{- end -}}

{{/* the `takeover` settings of the scheduler and the device plugin alike */}}
{{- define "vgpu.takeoverSettings" -}}
takeover:
  from_hami: {{ .Values.takeover.fromHami }}
  hami_scheduler_names: [{{ .Values.takeover.hamiSchedulerName | quote }}]
{{- end -}}

{{- define "vgpu.resourceNames" -}}
{{- list .Values.resourceName .Values.resourceMem .Values.resourceMemPercentage .Values.resourceCores .Values.resourcePriority | toJson -}}
{{- end -}}

{{- define "vgpu.podSecurityContext" -}}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* the device plugin's node selector: devicePlugin.nvidiaNodeSelector, or HAMi's key before
v2.8, devicePlugin.nvidianodeSelector, where that is given and the first is left at its default
({gpu: "on"}); as JSON */}}
{{- define "vgpu.devicePluginNodeSelector" -}}
{{- $plugin := .Values.devicePlugin -}}
{{- $selector := $plugin.nvidiaNodeSelector -}}
{{- if and $plugin.nvidianodeSelector (eq (toJson $selector) (toJson (dict "gpu" "on"))) -}}
{{- $selector = $plugin.nvidianodeSelector -}}
{{- end -}}
{{- toJson $selector -}}
{{- end -}}
