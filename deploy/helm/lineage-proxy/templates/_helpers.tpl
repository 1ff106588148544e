{{/* Names and labels shared by every object of the chart. */}}
{{- define "lineage-proxy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lineage-proxy.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "lineage-proxy.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "lineage-proxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lineage-proxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "lineage-proxy.labels" -}}
{{ include "lineage-proxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The image; the tag defaults to the chart's appVersion. */}}
{{- define "lineage-proxy.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "lineage-proxy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "lineage-proxy.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* What every pod spec starts with: account, pull secrets, security context and
     scheduling. Called with (dict "root" $ "pod" <proxy or consumer values> "component" C). */}}
{{- define "lineage-proxy.podCommon" -}}
{{- $root := .root -}}
serviceAccountName: {{ include "lineage-proxy.serviceAccountName" $root }}
automountServiceAccountToken: false
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with (.pod.nodeSelector | default $root.Values.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.pod.tolerations | default $root.Values.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.pod.affinity | default $root.Values.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.pod.topologySpreadConstraints | default $root.Values.topologySpreadConstraints) }}
topologySpreadConstraints:
  {{- range . }}
  - {{- toYaml (merge (dict) . (dict "labelSelector" (dict "matchLabels" (merge (dict "app.kubernetes.io/component" $.component) (fromYaml (include "lineage-proxy.selectorLabels" $root)))))) | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Pod template metadata: labels and annotations (with the config checksum). */}}
{{- define "lineage-proxy.podMetadata" -}}
labels:
  {{- include "lineage-proxy.labels" .root | nindent 2 }}
  app.kubernetes.io/component: {{ .component }}
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  checksum/config: {{ include (print .root.Template.BasePath "/configmap.yaml") .root | sha256sum }}
  {{- with .root.Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* The state volume: a claim per pod when .persistent, else an emptyDir (see
     lineage-proxy.volumes). */}}
{{- define "lineage-proxy.stateClaim" -}}
{{- if .persistent }}
persistentVolumeClaimRetentionPolicy:
  whenDeleted: Retain
  whenScaled: Retain
volumeClaimTemplates:
  - metadata:
      name: state
      labels:
        {{- include "lineage-proxy.selectorLabels" .root | nindent 8 }}
        app.kubernetes.io/component: {{ .component }}
    spec:
      accessModes: [ReadWriteOnce]
      {{- with .root.Values.persistence.storageClass }}
      storageClassName: {{ . | quote }}
      {{- end }}
      resources:
        requests:
          storage: {{ .size | default .root.Values.persistence.size }}
{{- end }}
{{- end -}}

{{/* Kafka SASL credentials from the Secret, as overrides of the librdkafka settings at
     the config path given (e.g. KAFKA__PRODUCER). */}}
{{- define "lineage-proxy.kafkaCredentials" -}}
{{- $creds := .root.Values.kafka.credentials -}}
{{- if $creds.secretName }}
- name: LINEAGE_PROXY__{{ .path }}__SASL.USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $creds.secretName }}
      key: {{ $creds.usernameKey }}
- name: LINEAGE_PROXY__{{ .path }}__SASL.PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $creds.secretName }}
      key: {{ $creds.passwordKey }}
{{- end }}
{{- end -}}

{{/* Environment every pod gets: the rules file (the ConfigMap's, unless config.routing.rules
     names one of its own), secrets, Kafka credentials, extraEnv. */}}
{{- define "lineage-proxy.commonEnv" -}}
{{- if not (dig "routing" "rules" "" .Values.config) }}
- name: LINEAGE_PROXY__ROUTING__RULES
  value: /etc/lineage-proxy/rules.yaml
{{- end }}
{{- range .Values.secretEnv }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .key }}
{{- end }}
{{- include "lineage-proxy.kafkaCredentials" (dict "root" . "path" "KAFKA__PRODUCER") }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Config, state and /tmp volumes, and where the containers mount them. Called with
     (dict "root" $ "persistent" <whether state is a claim>). */}}
{{- define "lineage-proxy.volumes" -}}
- name: config
  configMap:
    name: {{ include "lineage-proxy.fullname" .root }}
{{- if not .persistent }}
- name: state
  emptyDir: {}
{{- end }}
- name: tmp
  emptyDir: {}
{{- end -}}

{{- define "lineage-proxy.volumeMounts" -}}
- name: config
  mountPath: /etc/lineage-proxy
  readOnly: true
- name: state
  mountPath: /var/lib/lineage-proxy
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* The proxy's HTTPS (proxy.tls): server.tls from the Secret's files, the volume and
     its mount, and the probes' scheme. */}}
{{- define "lineage-proxy.tlsEnv" -}}
{{- with .Values.proxy.tls }}
{{- if .secretName }}
{{- if not (has .clientCert (list "none" "optional")) }}
{{- fail "proxy.tls.clientCert: none or optional (kubelet's probes present no client certificate)" }}
{{- end }}
- name: LINEAGE_PROXY__SERVER__TLS__CERT_FILE
  value: /etc/lineage-proxy-tls/tls.crt
- name: LINEAGE_PROXY__SERVER__TLS__KEY_FILE
  value: /etc/lineage-proxy-tls/tls.key
- name: LINEAGE_PROXY__SERVER__TLS__CLIENT_CERT
  value: {{ .clientCert | quote }}
{{- if eq .clientCert "optional" }}
- name: LINEAGE_PROXY__SERVER__TLS__CLIENT_CA_FILE
  value: /etc/lineage-proxy-tls/ca.crt
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "lineage-proxy.tlsVolume" -}}
{{- if .Values.proxy.tls.secretName }}
- name: tls
  secret:
    secretName: {{ .Values.proxy.tls.secretName }}
{{- end }}
{{- end -}}

{{- define "lineage-proxy.tlsMount" -}}
{{- if .Values.proxy.tls.secretName }}
- name: tls
  mountPath: /etc/lineage-proxy-tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "lineage-proxy.probeScheme" -}}
{{- if .Values.proxy.tls.secretName }}
scheme: HTTPS
{{- end }}
{{- end -}}

{{/* Whether a consumer keeps its state on a claim: consumers[].persistence.enabled, or
     left out, whether its config writes files (a dedupe journal, an archive target);
     never without persistence.enabled. Prints "true" or nothing. Called with
     (dict "root" $ "consumer" <its entry>). */}}
{{- define "lineage-proxy.consumerPersistent" -}}
{{- $config := index .root.Values.config.consumers .consumer.name -}}
{{- $writes := or (dig "dedupe" "journal" "" $config) (eq (dig "target" "kind" "" $config) "archive") -}}
{{- $persistence := .consumer.persistence | default dict -}}
{{- $wanted := ternary $persistence.enabled $writes (hasKey $persistence "enabled") -}}
{{- if and .root.Values.persistence.enabled $wanted -}}true{{- end -}}
{{- end -}}

{{/* Seconds the proxy needs to go: the spool drain (preStop), then the shutdown that
     answers what is in flight (server.shutdown_timeout_seconds), plus a margin. */}}
{{- define "lineage-proxy.proxyGraceSeconds" -}}
{{- $shutdown := dig "server" "shutdown_timeout_seconds" 30 .Values.config -}}
{{- add .Values.proxy.drainTimeoutSeconds (ceil $shutdown | int) 15 -}}
{{- end -}}
