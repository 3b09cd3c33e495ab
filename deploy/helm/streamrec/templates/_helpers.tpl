{{/* Names: every resource is "<release>-<component>" unless it must carry a Kafka principal. */}}
{{- define "streamrec.fullname" -}}
{{- printf "%s" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamrec.labels" -}}
app.kubernetes.io/name: streamrec
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "streamrec.selector" -}}
app.kubernetes.io/name: streamrec
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "streamrec.catalog" -}}
{{- .Files.Get "files/catalog.json" -}}
{{- end -}}

{{/*
The services: the `streamrec` command each runs, its Kafka principal (a KafkaUser of that name,
whose Secret Strimzi fills with the SCRAM password), its Redis ACL user (none: no Redis), the
values key of its settings and its own STREAMREC_* settings.
*/}}
{{- define "streamrec.services" -}}
feature-worker:
  command: stream
  principal: feature-worker
  redisUser: streams
  values: featureWorker
  job: streamrec-stream
  settings: {}
trainer:
  command: train
  principal: trainer
  redisUser: ""
  values: trainer
  job: streamrec-trainer
  settings:
    STREAMREC_STORE_DIR: /var/lib/streamrec/models
    STREAMREC_STATE_DIR: /var/lib/streamrec/trainer
    STREAMREC_ARCHIVE_DIR: /var/lib/streamrec-archive
scorer:
  command: serve
  principal: scorer
  redisUser: scorer
  values: scorer
  job: streamrec-scorer
  settings:
    STREAMREC_MODEL_STORE: /var/lib/streamrec/models
monitor:
  command: monitor
  principal: monitor
  redisUser: ""
  values: monitor
  job: streamrec-monitor
  settings: {}
archive:
  command: archive
  principal: archiver
  redisUser: ""
  values: archive
  job: ""
  settings:
    STREAMREC_ARCHIVE_DIR: /var/lib/streamrec-archive
{{- end -}}

{{/* The STREAMREC_* settings of one service (dict: root, name, service). */}}
{{- define "streamrec.settings" -}}
{{- $v := .root.Values -}}
STREAMREC_KAFKA__BOOTSTRAP_SERVERS: {{ $v.kafka.bootstrapServers | quote }}
STREAMREC_KAFKA__SECURITY_PROTOCOL: {{ $v.kafka.securityProtocol | quote }}
STREAMREC_KAFKA__SASL_MECHANISM: "SCRAM-SHA-512"
STREAMREC_KAFKA__SASL_USERNAME: {{ .service.principal | quote }}
STREAMREC_KAFKA__TOPIC_PREFIX: {{ $v.kafka.topicPrefix | quote }}
STREAMREC_KAFKA__REPLICATION_FACTOR: {{ $v.kafka.replicas | quote }}
STREAMREC_KAFKA__MIN_INSYNC_REPLICAS: {{ $v.kafka.minInsyncReplicas | quote }}
STREAMREC_KAFKA__SSL_CA_LOCATION: "/etc/streamrec/kafka-ca/ca.crt"
STREAMREC_KAFKA__CLIENT_ID: {{ printf "%s-%s" (include "streamrec.fullname" .root) .name | quote }}
{{- if .service.redisUser }}
STREAMREC_REDIS__HOST: {{ $v.redis.host | quote }}
STREAMREC_REDIS__PORT: {{ $v.redis.port | quote }}
STREAMREC_REDIS__CLUSTER: {{ $v.redis.cluster | quote }}
STREAMREC_REDIS__USERNAME: {{ .service.redisUser | quote }}
STREAMREC_REDIS__KEY_PREFIX: {{ $v.redis.keyPrefix | quote }}
{{- end }}
{{- if .service.job }}
STREAMREC_METRICS_PORT: {{ $v.metrics.port | quote }}
STREAMREC_METRICS_HOST: "0.0.0.0"
{{- end }}
{{- range $key, $value := .service.settings }}
{{ $key }}: {{ $value | quote }}
{{- end }}
{{- range $key, $value := (index $v .service.values).settings }}
{{ $key }}: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* The container of one service (dict: root, name, service). */}}
{{- define "streamrec.container" -}}
{{- $v := .root.Values -}}
{{- $own := index $v .service.values -}}
name: {{ .name }}
image: {{ printf "%s:%s" $v.image.repository $v.image.tag | quote }}
imagePullPolicy: {{ $v.image.pullPolicy }}
args: [{{ .service.command | quote }}]
envFrom:
  - configMapRef:
      name: {{ printf "%s-%s" (include "streamrec.fullname" .root) .name }}
env:
  - name: STREAMREC_KAFKA__SASL_PASSWORD
    valueFrom:
      secretKeyRef:
        name: {{ .service.principal }}
        key: password
{{- if .service.redisUser }}
  - name: STREAMREC_REDIS__PASSWORD
    valueFrom:
      secretKeyRef:
        name: {{ $v.redis.passwordSecret }}
        key: {{ .service.redisUser }}
{{- end }}
{{- if .service.job }}
ports:
  - name: metrics
    containerPort: {{ $v.metrics.port }}
    protocol: TCP
# The process answers /metrics from its start until it stops; a service whose loop dies exits,
# and the kubelet restarts it.
startupProbe:
  httpGet: {path: /metrics, port: metrics}
  periodSeconds: 5
  failureThreshold: 60
readinessProbe:
  httpGet: {path: /metrics, port: metrics}
  periodSeconds: 10
livenessProbe:
  httpGet: {path: /metrics, port: metrics}
  periodSeconds: 20
  timeoutSeconds: 5
  failureThreshold: 3
{{- end }}
resources:
  {{- toYaml $own.resources | nindent 2 }}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: ["ALL"]}
volumeMounts:
  - name: kafka-ca
    mountPath: /etc/streamrec/kafka-ca
    readOnly: true
  - name: tmp
    mountPath: /tmp
{{- if has .name (list "trainer" "scorer") }}
  - name: models
    mountPath: /var/lib/streamrec
    readOnly: {{ eq .name "scorer" }}
{{- end }}
{{- if has .name (list "trainer" "archive") }}
  - name: archive
    mountPath: /var/lib/streamrec-archive
    readOnly: {{ eq .name "trainer" }}
{{- end }}
{{- end -}}

{{/* The pod volumes of one service (dict: root, name). */}}
{{- define "streamrec.volumes" -}}
- name: kafka-ca
  secret:
    secretName: {{ .root.Values.kafka.caSecret }}
- name: tmp
  emptyDir: {}
{{- if has .name (list "trainer" "scorer") }}
- name: models
  persistentVolumeClaim:
    claimName: {{ .root.Values.storage.modelsClaim }}
{{- end }}
{{- if has .name (list "trainer" "archive") }}
- name: archive
  persistentVolumeClaim:
    claimName: {{ .root.Values.storage.archiveClaim }}
{{- end }}
{{- end -}}
