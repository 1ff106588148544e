{{/* Names and labels shared by every object of the chart. */}}
{{- define "lineage-proxy.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "lineage-proxy.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "lineage-proxy.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
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

{{/* Environment every pod gets: the rules file, secrets, Kafka credentials. */}}
{{- define "lineage-proxy.commonEnv" -}}
{{- if .Values.rules }}
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
{{- end -}}

{{/* Config, state and /tmp volumes, and where the containers mount them. */}}
{{- define "lineage-proxy.volumes" -}}
- name: config
  configMap:
    name: {{ include "lineage-proxy.fullname" . }}
- name: state
  {{- toYaml .Values.stateVolume | nindent 2 }}
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

{{- define "lineage-proxy.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}
