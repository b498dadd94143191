{{/* `vgpu monitor`'s DaemonSet, in a pod of its own so that it runs under a service account
of its own (pods on its node, read only): (list $ "device-plugin") on the device plugin's
nodes, reading the containers' regions; (list $ "dra") on the DRA driver's, reading the claims'
regions too (and those of device-plugin pods still running on a node moved to DRA). The DRA
one's pods carry the monitor's labels, so the monitor's Service, ServiceMonitor and
NetworkPolicy select them too, and one more in its selector (vgpu.io/node-mode: dra); the two
DaemonSets never take each other's pods, which belong to the DaemonSet that made them. */}}
{{- define "vgpu.monitorDaemonSet" -}}
{{- $root := index . 0 -}}
{{- $dra := eq (index . 1) "dra" -}}
{{- $values := $root.Values -}}
{{- $name := ternary (include "vgpu.draMonitor" $root) (include "vgpu.monitor" $root) $dra -}}
{{- $hostDir := include "vgpu.hamiCoreDir" $root -}}
{{- $containers := printf "%s/containers" $hostDir -}}
{{- $claims := printf "%s/claims" $hostDir -}}
{{- if $dra }}
# `vgpu monitor` on every node of the DRA pool: the claims' regions and the containers'
{{- else }}
# `vgpu monitor` on every node the device plugin runs on, in a pod of its own so that it runs
# under a service account of its own (pods on its node, read only)
{{- end }}
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ $name }}
  namespace: {{ include "vgpu.namespace" $root }}
  labels:
    {{- include "vgpu.labels" $root | nindent 4 }}
    app.kubernetes.io/component: monitor
  {{- with include "vgpu.workloadAnnotations" $root }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  selector:
    matchLabels:
      {{- include "vgpu.selector" (list $root "monitor") | nindent 6 }}
      {{- if $dra }}
      vgpu.io/node-mode: dra
      {{- end }}
  updateStrategy:
    {{- toYaml (ternary $values.dra.updateStrategy $values.devicePlugin.updateStrategy $dra) | nindent 4 }}
  template:
    metadata:
      labels:
        {{- include "vgpu.selector" (list $root "monitor") | nindent 8 }}
        {{- if $dra }}
        vgpu.io/node-mode: dra
        {{- end }}
        hami.io/webhook: ignore
      {{- with $values.devicePlugin.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "vgpu.monitor" $root }}
      priorityClassName: {{ ternary $values.dra.priorityClassName $values.devicePlugin.priorityClassName $dra }}
      {{- $images := list $values.image $values.devicePlugin.monitor.image }}
      {{- with include "vgpu.pullSecrets" (list $root $images) }}{{ . | trim | nindent 6 }}{{ end }}
      {{- if $dra }}
      {{- include "vgpu.draNodePlacement" $root | nindent 6 }}
      {{- else }}
      {{- include "vgpu.gpuNodePlacement" $root | nindent 6 }}
      {{- end }}
      # root like the plugin: it writes HAMi-core's 0666 cache files and removes container
      # directories the plugin created under a root-owned containers/
      securityContext:
        {{- include "vgpu.nodePodSecurityContext" $root | nindent 8 }}
      {{- with include "vgpu.toolkitReadyWait" $root }}
      initContainers:
        {{- . | nindent 8 }}
      {{- end }}
      containers:
        - name: vgpu-monitor
          image: {{ include "vgpu.vgpuImage" $root }}
          imagePullPolicy: {{ $values.image.pullPolicy }}
          args:
            - monitor
            # where the plugin has HAMi-core write each container's usage
            - --host-dir={{ $containers }}
            {{- if $dra }}
            # where the DRA driver has HAMi-core write each claim share's (never cleaned here)
            - --claims-dir={{ $claims }}
            {{- end }}
            - --metrics-listen=:{{ $values.devicePlugin.monitor.port }}
            {{- if $values.metrics.secure.enabled }}
            - --secure-metrics
            {{- end }}
            {{- if $values.legacyMetrics }}
            - --legacy-metrics
            {{- end }}
            {{- include "vgpu.logArgs" $root | nindent 12 }}
            {{- with $values.devicePlugin.monitor.extraArgs }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          env:
            - name: NODE_NAME
              valueFrom:
                fieldRef: {fieldPath: spec.nodeName}
            - name: NVIDIA_VISIBLE_DEVICES   # NVML for the host figures
              value: all
            - name: NVIDIA_DRIVER_CAPABILITIES
              value: utility
            {{- if $values.metrics.secure.enabled }}
            - name: VGPU_SECURE_METRICS__CERT_DIR   # its self-signed certificate
              value: /metrics-tls
            {{- end }}
          ports:
            - name: monitorport
              containerPort: {{ $values.devicePlugin.monitor.port }}
          {{- $scheme := ternary "HTTPS" "HTTP" $values.metrics.secure.enabled }}
          readinessProbe:   # ready once it reads the GPUs (it may wait for the driver)
            httpGet: {path: /readyz, port: monitorport, scheme: {{ $scheme }}}
          livenessProbe:
            httpGet: {path: /healthz, port: monitorport, scheme: {{ $scheme }}}
            periodSeconds: 30
          resources:
            {{- toYaml $values.devicePlugin.monitor.resources | nindent 12 }}
          securityContext:
            {{- include "vgpu.nodeContainerSecurityContext" $root | nindent 12 }}
          volumeMounts:
            - name: containers
              mountPath: {{ $containers }}
            {{- if $dra }}
            - name: claims
              mountPath: {{ $claims }}
            {{- end }}
            {{- if $values.metrics.secure.enabled }}
            - name: metrics-tls
              mountPath: /metrics-tls
            {{- end }}
      volumes:
        - name: containers
          hostPath:
            path: {{ $containers }}
            type: DirectoryOrCreate
        {{- if $dra }}
        - name: claims
          hostPath:
            path: {{ $claims }}
            type: DirectoryOrCreate
        {{- end }}
        {{- if $values.metrics.secure.enabled }}
        - name: metrics-tls
          emptyDir: {medium: Memory, sizeLimit: 1Mi}
        {{- end }}
        {{- with include "vgpu.toolkitReadyVolume" $root }}{{ . | nindent 8 }}{{ end }}
{{- end -}}
