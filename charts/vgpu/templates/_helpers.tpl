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
{{- define "vgpu.monitor" -}}{{ include "vgpu.fullname" . }}-monitor{{- end -}}
{{- define "vgpu.draDriver" -}}{{ include "vgpu.fullname" . }}-dra-driver{{- end -}}
{{- define "vgpu.draMonitor" -}}{{ include "vgpu.fullname" . }}-dra-monitor{{- end -}}
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

{{/* a ServiceMonitor endpoint's lines for secure metrics: HTTPS (a self-signed certificate)
with Prometheus's own service account token, which metrics.secure.readers must name */}}
{{- define "vgpu.secureScrape" -}}
{{- if .Values.metrics.secure.enabled -}}
scheme: https
bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
tlsConfig: {insecureSkipVerify: true}
{{- end -}}
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

{{/* the device plugin's own-node policy: v1 policies served, and Kubernetes 1.32 or newer, where
every pod's service account token names the pod's node (ServiceAccountTokenPodNodeInfo, GA) */}}
{{- define "vgpu.devicePluginPolicy" -}}
{{- if and .Values.devicePlugin.enabled .Values.devicePlugin.admissionPolicy.enabled (include "vgpu.admissionPolicyServed" .) (semverCompare ">=1.32.0-0" .Capabilities.KubeVersion.Version) -}}true{{- end -}}
{{- end -}}

{{/* usernames the admission policy trusts besides vgpu's own service accounts (JSON list) */}}
{{- define "vgpu.trustedUsers" -}}
{{- $users := .Values.scheduler.admissionPolicy.trustedUsers | default list -}}
{{- if .Values.takeover.fromHami -}}
{{- $users = concat $users (include "vgpu.hamiServiceAccounts" . | fromJsonArray) -}}
{{- end -}}
{{- $users | uniq | toJson -}}
{{- end -}}

{{/* HAMi's chart's fullname for release takeover.hamiRelease with these values (HAMi's chart is
named "hami"; a HAMi values file shares nameOverride and fullnameOverride with this chart) */}}
{{- define "vgpu.hamiFullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := .Values.nameOverride | default "hami" -}}
{{- $release := .Values.takeover.hamiRelease -}}
{{- if contains $name $release -}}
{{- $release | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" $release $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* the namespace of HAMi's objects, as HAMi's chart picks it: the values' namespaceOverride,
else its release's namespace */}}
{{- define "vgpu.hamiNamespace" -}}
{{- .Values.namespaceOverride | default .Values.takeover.hamiNamespace -}}
{{- end -}}

{{/* HAMi's scheduler and device plugin service accounts as usernames (JSON list):
takeover.hamiServiceAccounts, else as HAMi's chart names them for takeover.hamiRelease */}}
{{- define "vgpu.hamiServiceAccounts" -}}
{{- $given := .Values.takeover.hamiServiceAccounts | default list -}}
{{- if $given -}}
{{- $given | toJson -}}
{{- else -}}
{{- $hami := include "vgpu.hamiFullname" . -}}
{{- $accounts := list -}}
{{- range (list "scheduler" "device-plugin") -}}
{{- $name := printf "%s-%s" $hami . | trunc 63 | trimSuffix "-" -}}
{{- $accounts = append $accounts (printf "system:serviceaccount:%s:%s" (include "vgpu.hamiNamespace" $) $name) -}}
{{- end -}}
{{- $accounts | toJson -}}
{{- end -}}
{{- end -}}

{{/* HAMi's chart is installed beside this release (takeover.fromHami and
takeover.hamiInstalled): the node ports and the RuntimeClass the values name are HAMi's */}}
{{- define "vgpu.besideHami" -}}
{{- if and .Values.takeover.fromHami .Values.takeover.hamiInstalled -}}true{{- end -}}
{{- end -}}

{{/* a Service port's nodePort line, (list $ port type): the port itself for type NodePort,
none beside HAMi (whose Services hold the same ports: the API server picks free ones) */}}
{{- define "vgpu.nodePort" -}}
{{- $root := index . 0 -}}
{{- if and (eq (index . 2) "NodePort") (index . 1) (not (include "vgpu.besideHami" $root)) -}}
nodePort: {{ index . 1 }}
{{- end -}}
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

{{/* HAMi-core's directory on each GPU node, where the init container copies it, the plugin
mounts it from and HAMi-core in each container writes its usage (containers/), which the
monitor reads: one value, global.gpuHookPath, places all of them */}}
{{- define "vgpu.hamiCoreDir" -}}
{{- printf "%s/vgpu" .Values.global.gpuHookPath | clean -}}
{{- end -}}

{{/* the pod security context of the device plugin and the monitor: root (the kubelet's
device-plugin directory and HAMi-core's are root-owned), with devicePlugin.podSecurityContext
merged over it */}}
{{- define "vgpu.nodePodSecurityContext" -}}
{{- $chart := dict "runAsUser" 0 "runAsGroup" 0 "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- mergeOverwrite $chart (deepCopy (.Values.devicePlugin.podSecurityContext | default dict)) | toYaml -}}
{{- end -}}

{{/* their containers' security context: no privilege, no capability, a read-only root, with
devicePlugin.containerSecurityContext merged over it */}}
{{- define "vgpu.nodeContainerSecurityContext" -}}
{{- $chart := dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL")) -}}
{{- mergeOverwrite $chart (deepCopy (.Values.devicePlugin.containerSecurityContext | default dict)) | toYaml -}}
{{- end -}}

{{/* HAMi's gpuOperatorToolkitReady: an init container holding the plugin's and the monitor's
pods until the GPU operator has set up the NVIDIA container toolkit, which mounts the driver's
libraries into their containers (it writes <hostPath>/toolkit-ready then). Its security context
is their containers' unless gpuOperatorToolkitReady.securityContext gives one, taken as given:
HAMi's file gives privileged root, which no merge with allowPrivilegeEscalation false allows */}}
{{- define "vgpu.toolkitReadyWait" -}}
{{- $toolkit := .Values.devicePlugin.gpuOperatorToolkitReady -}}
{{- if $toolkit.enabled -}}
- name: toolkit-validation
  image: {{ include "vgpu.vgpuImage" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command:
    - /bin/sh
    - -c
    - >-
      until [ -f {{ $toolkit.hostPath }}/toolkit-ready ];
      do echo "waiting for {{ $toolkit.hostPath }}/toolkit-ready (the GPU operator's toolkit)";
      sleep 5; done
  securityContext:
    {{- if $toolkit.securityContext }}
    {{- toYaml $toolkit.securityContext | nindent 4 }}
    {{- else }}
    {{- include "vgpu.nodeContainerSecurityContext" . | nindent 4 }}
    {{- end }}
  volumeMounts:
    - name: nvidia-validations
      mountPath: {{ $toolkit.hostPath }}
      mountPropagation: HostToContainer
      readOnly: true
{{- end -}}
{{- end -}}

{{/* the host directory the toolkit wait reads, as a pod volume */}}
{{- define "vgpu.toolkitReadyVolume" -}}
{{- $toolkit := .Values.devicePlugin.gpuOperatorToolkitReady -}}
{{- if $toolkit.enabled -}}
- name: nvidia-validations
  hostPath:
    path: {{ $toolkit.hostPath }}
    type: DirectoryOrCreate
{{- end -}}
{{- end -}}

{{/* where the device plugin and the monitor run: the node selector, devicePlugin.affinity
(in DRA mode, with the DRA pool's nodes taken out), and devicePlugin.tolerations with
devicePlugin.extraTolerations */}}
{{- define "vgpu.gpuNodePlacement" -}}
{{- with include "vgpu.devicePluginNodeSelector" . | fromJson }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $affinity := .Values.devicePlugin.affinity }}
{{- if .Values.dra.enabled }}
{{- $affinity = include "vgpu.awayFromDra" . | fromJson }}
{{- end }}
{{- with $affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with concat (.Values.devicePlugin.tolerations | default list) (.Values.devicePlugin.extraTolerations | default list) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* the label of the DRA pool's nodes (dra.nodeSelector, one label) as {"key", "value"} */}}
{{- define "vgpu.draLabel" -}}
{{- range $key, $value := .Values.dra.nodeSelector -}}
{{- dict "key" $key "value" $value | toJson -}}
{{- end -}}
{{- end -}}

{{/* devicePlugin.affinity with the DRA pool's nodes taken out: a NotIn expression on its label
added to each required node affinity term (or the one term), so the device plugin and its
monitor never run where the DRA driver runs; as JSON */}}
{{- define "vgpu.awayFromDra" -}}
{{- $label := include "vgpu.draLabel" . | fromJson -}}
{{- $away := dict "key" $label.key "operator" "NotIn" "values" (list $label.value) -}}
{{- $affinity := deepCopy (.Values.devicePlugin.affinity | default dict) -}}
{{- $node := get $affinity "nodeAffinity" | default dict -}}
{{- $required := get $node "requiredDuringSchedulingIgnoredDuringExecution" | default dict -}}
{{- $terms := list -}}
{{- range get $required "nodeSelectorTerms" | default list -}}
{{- $terms = append $terms (set (deepCopy .) "matchExpressions" (append (get . "matchExpressions" | default list) $away)) -}}
{{- end -}}
{{- $_ := set $required "nodeSelectorTerms" ($terms | default (list (dict "matchExpressions" (list $away)))) -}}
{{- $_ := set $node "requiredDuringSchedulingIgnoredDuringExecution" $required -}}
{{- $_ := set $affinity "nodeAffinity" $node -}}
{{- $affinity | toJson -}}
{{- end -}}

{{/* where the DRA driver and its monitor run: dra.nodeSelector, dra.affinity, dra.tolerations */}}
{{- define "vgpu.draNodePlacement" -}}
nodeSelector:
  {{- toYaml .Values.dra.nodeSelector | nindent 2 }}
{{- with .Values.dra.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.dra.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* DRA mode needs resource.k8s.io/v1 (Kubernetes 1.34): served, or, under `helm template`,
which lists no kinds, the version says so */}}
{{- define "vgpu.draServed" -}}
{{- $apis := .Capabilities.APIVersions -}}
{{- if or ($apis.Has "resource.k8s.io/v1/DeviceClass") (and (not ($apis.Has "v1/Pod")) (semverCompare ">=1.34.0-0" .Capabilities.KubeVersion.Version)) -}}true{{- end -}}
{{- end -}}

{{/* the DeviceClass's extendedResourceName: dra.extendedResourceName, where auto is
resourceName from Kubernetes 1.36 (DRAExtendedResource beta, on) and nothing before */}}
{{- define "vgpu.draExtendedResource" -}}
{{- $given := .Values.dra.extendedResourceName -}}
{{- if eq $given "auto" -}}
{{- if semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version }}{{ .Values.resourceName }}{{ end -}}
{{- else -}}
{{- $given -}}
{{- end -}}
{{- end -}}

{{/* the webhook's DRA mode: pods of DRA namespaces (or every one) get claims */}}
{{- define "vgpu.draWebhook" -}}
{{- if and .Values.dra.enabled .Values.dra.webhook.enabled .Values.scheduler.admissionWebhook.enabled -}}true{{- end -}}
{{- end -}}

{{/* what the webhook's entries share: (list $ path sideEffects) */}}
{{- define "vgpu.webhookEntry" -}}
{{- $root := index . 0 -}}
{{- $hook := $root.Values.scheduler.admissionWebhook -}}
admissionReviewVersions: [v1, v1beta1]
# no caBundle here: the scheduler (or cert-manager) writes it, and an apply must not blank it
clientConfig:
  service:
    name: {{ include "vgpu.scheduler" $root }}
    namespace: {{ include "vgpu.namespace" $root }}
    path: {{ index . 1 }}
    port: {{ $root.Values.scheduler.service.httpPort }}
rules:
  - apiGroups: [""]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [pods]
    scope: "*"
# only pods that ask for a vgpu resource are sent, so failurePolicy Fail never blocks others
matchConditions:
  - name: asks-for-vgpu-resources
    expression: >-
      object.spec.containers.exists(c, has(c.resources) && (
        (has(c.resources.limits) && c.resources.limits.exists(k, k in {{ include "vgpu.resourceNames" $root }})) ||
        (has(c.resources.requests) && c.resources.requests.exists(k, k in {{ include "vgpu.resourceNames" $root }}))))
      || (has(object.spec.initContainers) && object.spec.initContainers.exists(c, has(c.resources) && (
        (has(c.resources.limits) && c.resources.limits.exists(k, k in {{ include "vgpu.resourceNames" $root }})) ||
        (has(c.resources.requests) && c.resources.requests.exists(k, k in {{ include "vgpu.resourceNames" $root }})))))
sideEffects: {{ index . 2 }}
failurePolicy: {{ $hook.failurePolicy }}
matchPolicy: Equivalent
reinvocationPolicy: {{ $hook.reinvocationPolicy }}
timeoutSeconds: {{ $hook.timeoutSeconds }}
{{- end -}}

{{/* the namespaces the webhook never sees: labelled hami.io/webhook=ignore, whitelisted,
and the values' own expressions */}}
{{- define "vgpu.webhookNamespaceExclusions" -}}
{{- $hook := .Values.scheduler.admissionWebhook -}}
- {key: hami.io/webhook, operator: NotIn, values: [ignore]}
{{- with $hook.whitelistNamespaces }}
- key: kubernetes.io/metadata.name
  operator: NotIn
  values: {{ toJson . }}
{{- end }}
{{- with $hook.namespaceSelector.matchExpressions }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "vgpu.webhookObjectSelector" -}}
{{- $hook := .Values.scheduler.admissionWebhook -}}
objectSelector:
  {{- with $hook.objectSelector.matchLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    - {key: hami.io/webhook, operator: NotIn, values: [ignore]}
    {{- with $hook.objectSelector.matchExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* the monitor runs on the device plugin's nodes, the DRA driver's, or both */}}
{{- define "vgpu.monitorWanted" -}}
{{- if and .Values.devicePlugin.monitor.enabled (or .Values.devicePlugin.enabled .Values.dra.enabled) -}}true{{- end -}}
{{- end -}}

{{/* the init container that copies HAMi-core (libvgpu.so) and writes ld.so.preload into the
host directory, from HAMi's image, as HAMi does: the device plugin's and the DRA driver's */}}
{{- define "vgpu.hamiCoreInit" -}}
- name: hami-core
  image: {{ include "vgpu.hamiCoreImage" . }}
  imagePullPolicy: {{ .Values.devicePlugin.hamiCore.image.pullPolicy }}
  command:
    {{- tpl (toYaml .Values.devicePlugin.hamiCore.command) . | nindent 4 }}
  resources:
    {{- toYaml .Values.devicePlugin.hamiCore.resources | nindent 4 }}
  securityContext:
    {{- include "vgpu.nodeContainerSecurityContext" . | nindent 4 }}
  volumeMounts:
    - name: lib
      mountPath: {{ include "vgpu.hamiCoreDir" . }}
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
{{- $selector | default dict | toJson -}}
{{- end -}}

{{/* Refuses a key the chart does not know, naming the nearest known one. The known keys are
known-values.yaml's (those values.schema.json describes and HAMi's that have no effect here):
(list values known "path."); a known key whose entry is "*" is not looked into. */}}
{{- define "vgpu.checkKeys" -}}
{{- $known := index . 1 -}}
{{- $above := index . 2 -}}
{{- range $key, $value := index . 0 -}}
{{- if not (hasKey $known $key) -}}
{{- fail (printf "%s%s is not a value of this chart: did you mean %s%s? (docs/install.md lists every value)" $above $key $above (include "vgpu.nearest" (list $key (keys $known)))) -}}
{{- end -}}
{{- $below := index $known $key -}}
{{- if and (kindIs "map" $below) (kindIs "map" $value) -}}
{{- include "vgpu.checkKeys" (list $value $below (printf "%s%s." $above $key)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* of the words (list word words), the one fewest edits away, case aside (the first of
equals in alphabetical order) */}}
{{- define "vgpu.nearest" -}}
{{- $word := lower (index . 0) -}}
{{- $best := "" -}}
{{- $fewest := -1 -}}
{{- range (index . 1 | sortAlpha) -}}
{{- $edits := include "vgpu.editDistance" (list $word (lower .)) | int -}}
{{- if or (lt $fewest 0) (lt $edits $fewest) -}}
{{- $best = . -}}
{{- $fewest = $edits -}}
{{- end -}}
{{- end -}}
{{- $best -}}
{{- end -}}

{{/* Levenshtein distance of two strings: (list a b) */}}
{{- define "vgpu.editDistance" -}}
{{- $b := splitList "" (index . 1) -}}
{{- $previous := until (add1 (len $b) | int) -}}
{{- range $i, $charA := splitList "" (index . 0) -}}
{{- $row := list (add1 $i) -}}
{{- range $j, $charB := $b -}}
{{- $cost := ternary 0 1 (eq $charA $charB) -}}
{{- $row = append $row (min (add1 (index $row $j)) (add1 (index $previous (add1 $j))) (add (index $previous $j) $cost)) -}}
{{- end -}}
{{- $previous = $row -}}
{{- end -}}
{{- last $previous -}}
{{- end -}}
