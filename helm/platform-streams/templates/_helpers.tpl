{{/*
Names, labels and the pieces shared by the worker pods and the reset Job: the StreamsConfig
file, the Kafka credentials and TLS files, the security contexts. One definition each, so the
reset Job talks to Kafka exactly as the workers do.
*/}}

{{- define "platform-streams.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* "<release>-<chart>" (or the release name when it already contains the chart name), at
most 52 characters: StatefulSet pod names append "-<ordinal>" and the controller adds an
11-character revision hash label, which must stay within 63. */}}
{{- define "platform-streams.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "platform-streams.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "platform-streams.selectorLabels" -}}
app.kubernetes.io/name: {{ include "platform-streams.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "platform-streams.labels" -}}
helm.sh/chart: {{ include "platform-streams.chart" . }}
{{ include "platform-streams.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: platform-streams
{{- end }}

{{- define "platform-streams.headlessServiceName" -}}
{{- printf "%s-headless" (include "platform-streams.fullname" .) }}
{{- end }}

{{- define "platform-streams.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "platform-streams.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "platform-streams.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "platform-streams.configPath" -}}/etc/platform-streams/streams.yaml{{- end }}

{{/*
The StreamsConfig file: app.config plus what the chart owns (state_dir on the volume, the
HTTP endpoint on all interfaces, Kafka security settings). Settings the chart owns are refused
in app.config with a message naming the value to use instead, so a user is never surprised
by a silently ignored setting. group_instance_id and application_server are per pod, so
they come from environment variables (which win over the file in StreamsConfig.load).
*/}}
{{- define "platform-streams.streamsConfig" -}}
{{- $cfg := deepCopy (default dict .Values.app.config) }}
{{- $owned := dict "state_dir" "persistence.mountPath" "state.dir" "persistence.mountPath" "http_host" "http.port" "http_port" "http.port" "http_auth_token" "http.auth.existingSecret" "group_instance_id" "staticMembership.enabled" "group.instance.id" "staticMembership.enabled" "application_server" "queryRouting.enabled" "application.server" "queryRouting.enabled" }}
{{- range $key, $instead := $owned }}
{{- if hasKey $cfg $key }}
{{- fail (printf "app.config.%s is set by the chart: use %s instead" $key $instead) }}
{{- end }}
{{- end }}
{{- $_ := set $cfg "state_dir" .Values.persistence.mountPath }}
{{- $_ := set $cfg "http_host" "0.0.0.0" }}
{{- $_ := set $cfg "http_port" (int .Values.http.port) }}
{{- with .Values.snapshots.location }}
{{- if or (hasKey $cfg "state_snapshot_location") (hasKey $cfg "state.snapshot.location") }}
{{- fail "app.config.state_snapshot_location and snapshots.location are both set: keep one" }}
{{- end }}
{{- $_ := set $cfg "state_snapshot_location" . }}
{{- end }}
{{- with .Values.kafka.securityProtocol }}
{{- $_ := set $cfg "security.protocol" . }}
{{- end }}
{{- with .Values.kafka.sasl.mechanism }}
{{- $_ := set $cfg "sasl.mechanism" . }}
{{- end }}
{{- $tls := .Values.kafka.tls }}
{{- if $tls.existingSecret }}
{{- with $tls.caKey }}
{{- $_ := set $cfg "ssl.ca.location" (printf "%s/%s" $tls.mountPath .) }}
{{- end }}
{{- with $tls.certKey }}
{{- $_ := set $cfg "ssl.certificate.location" (printf "%s/%s" $tls.mountPath .) }}
{{- end }}
{{- with $tls.keyKey }}
{{- $_ := set $cfg "ssl.key.location" (printf "%s/%s" $tls.mountPath .) }}
{{- end }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/*
Environment shared by the workers and the reset Job: SASL credentials from the Secret,
handed to StreamsConfig as PLATFORM_STREAMS_CLIENT_CONFIG (merged key by key over the file's
client settings; Kubernetes expands $(VAR) from the variables defined before it). A password
containing a double quote or a backslash would break that JSON: the worker then stops at
start-up with "PLATFORM_STREAMS_CLIENT_CONFIG must be a JSON object".
*/}}
{{- define "platform-streams.kafkaEnv" -}}
{{- $sasl := .Values.kafka.sasl }}
{{- if $sasl.existingSecret }}
- name: KAFKA_SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $sasl.existingSecret }}
      key: {{ $sasl.usernameKey }}
- name: KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $sasl.existingSecret }}
      key: {{ $sasl.passwordKey }}
- name: PLATFORM_STREAMS_CLIENT_CONFIG
  value: '{"sasl.username": "$(KAFKA_SASL_USERNAME)", "sasl.password": "$(KAFKA_SASL_PASSWORD)"}'
{{- end }}
{{- end }}

{{- define "platform-streams.kafkaVolumeMounts" -}}
{{- if .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  mountPath: {{ .Values.kafka.tls.mountPath }}
  readOnly: true
{{- end }}
{{- end }}

{{- define "platform-streams.kafkaVolumes" -}}
{{- if .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  secret:
    secretName: {{ .Values.kafka.tls.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- end }}

{{/* Python writes nothing under the read-only root; /tmp is the one scratch directory. */}}
{{/* rocksdb_memory_budget of the worker: rocksdb.memoryBudget, else rocksdb.memoryBudgetFraction
of the container's memory limit in bytes (Kubernetes quantity units); "" for none. */}}
{{- define "platform-streams.rocksdbMemoryBudget" -}}
{{- $rocksdb := .Values.rocksdb | default dict -}}
{{- $limit := "" -}}
{{- with .Values.resources }}{{ with .limits }}{{ $limit = toString (.memory | default "") }}{{ end }}{{ end -}}
{{- if $rocksdb.memoryBudget -}}
{{- $rocksdb.memoryBudget -}}
{{- else if and $limit $rocksdb.memoryBudgetFraction -}}
{{- $units := dict "" 1 "k" 1000 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $limit -}}
{{- $unit := trimPrefix $number $limit -}}
{{- if or (not $number) (not (hasKey $units $unit)) -}}
{{- fail (printf "resources.limits.memory %q: the RocksDB memory budget needs a plain or Ki/Mi/Gi/Ti/k/M/G/T quantity" $limit) -}}
{{- end -}}
{{- mulf (float64 $number) (get $units $unit) $rocksdb.memoryBudgetFraction | floor | int64 -}}
{{- end -}}
{{- end }}

{{- define "platform-streams.commonEnv" -}}
- name: PYTHONUNBUFFERED
  value: "1"
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
{{- end }}

{{/* The monitor endpoint's auth: the same Secret the workers read their token from. */}}
{{/* The Secret holding the endpoint's bearer token: yours, the generated one, or none (""). */}}
{{- define "platform-streams.authSecretName" -}}
{{- if .Values.http.auth.existingSecret }}
{{- .Values.http.auth.existingSecret }}
{{- else if .Values.http.auth.generate }}
{{- printf "%s-http-auth" (include "platform-streams.fullname" .) }}
{{- end }}
{{- end }}

{{- define "platform-streams.monitorAuthorization" -}}
{{- with (include "platform-streams.authSecretName" .) }}
authorization:
  type: Bearer
  credentials:
    name: {{ . }}
    key: {{ $.Values.http.auth.key }}
{{- end }}
{{- end }}

{{/* Checks that need more than values.schema.json can say. */}}
{{- define "platform-streams.validate" -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (int .Values.app.closeTimeoutSeconds) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be greater than app.closeTimeoutSeconds (%d): the pod would be killed during its final commit" (int .Values.terminationGracePeriodSeconds) (int .Values.app.closeTimeoutSeconds)) }}
{{- end }}
{{- if and .Values.pdb.enabled (not (kindIs "invalid" .Values.pdb.maxUnavailable)) (not (kindIs "invalid" .Values.pdb.minAvailable)) }}
{{- fail "pdb: set only one of pdb.maxUnavailable and pdb.minAvailable" }}
{{- end }}
{{- if has "--workers" .Values.app.extraArgs }}
{{- fail "app.extraArgs: --workers starts several processes in one pod, which would share one HTTP port and one group.instance.id; scale with replicaCount (or app.config.num_stream_threads)" }}
{{- end }}
{{- if and (not .Values.http.auth.existingSecret) .Values.http.auth.generate }}
{{- range $kind, $monitor := dict "serviceMonitor" .Values.metrics.serviceMonitor "podMonitor" .Values.metrics.podMonitor }}
{{- if and $monitor.enabled $monitor.namespace (ne $monitor.namespace $.Release.Namespace) }}
{{- fail (printf "metrics.%s.namespace (%s) is not the release namespace: Prometheus reads the token from a Secret in the monitor's namespace, and the generated one lives in %s; set http.auth.existingSecret to a Secret present in both" $kind $monitor.namespace $.Release.Namespace) }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.autoscaling.keda }}
{{- if .enabled }}
{{- if not .topics }}
{{- fail "autoscaling.keda.topics is empty: list the input and repartition topics (platform-streams topics plan)" }}
{{- end }}
{{- if gt (int .maxReplicas) (int .partitions) }}
{{- fail (printf "autoscaling.keda.maxReplicas (%d) is above autoscaling.keda.partitions (%d): pods beyond the partition count get no tasks" (int .maxReplicas) (int .partitions)) }}
{{- end }}
{{- if gt (int .minReplicas) (int .maxReplicas) }}
{{- fail (printf "autoscaling.keda.minReplicas (%d) is above autoscaling.keda.maxReplicas (%d)" (int .minReplicas) (int .maxReplicas)) }}
{{- end }}
{{- if not (default (index $.Values.app.config "bootstrap_servers") .bootstrapServers) }}
{{- fail "autoscaling.keda.bootstrapServers: KEDA needs the bootstrap servers (app.config.bootstrap_servers is not set)" }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.kafka.sasl.existingSecret (not .Values.kafka.sasl.mechanism) }}
{{- fail "kafka.sasl.existingSecret is set but kafka.sasl.mechanism is empty (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)" }}
{{- end }}
{{- end }}

{{/*
The parts of a one-shot ops pod (the reset Job, the `helm test` pod) that talk to Kafka as
the workers do: env, security context, the StreamsConfig and Kafka TLS mounts.
*/}}
{{- define "platform-streams.opsContainer" -}}
env:
  {{- include "platform-streams.commonEnv" . | nindent 2 }}
  {{- with (include "platform-streams.kafkaEnv" . | trim) }}{{- . | nindent 2 }}{{- end }}
  {{- with .Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .Values.extraEnvFrom }}
envFrom:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
{{- end }}

{{- define "platform-streams.opsVolumeMounts" -}}
volumeMounts:
  - name: config
    mountPath: {{ dir (include "platform-streams.configPath" .) }}
    readOnly: true
  - name: tmp
    mountPath: /tmp
  {{- with (include "platform-streams.kafkaVolumeMounts" . | trim) }}{{- . | nindent 2 }}{{- end }}
  {{- with .Values.extraVolumeMounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/* Takes (dict "root" $ "configMap" <name of the ConfigMap holding streams.yaml>). */}}
{{- define "platform-streams.opsVolumes" -}}
{{- with .root }}
volumes:
  - name: config
    configMap:
      name: {{ $.configMap }}
  - name: tmp
    emptyDir: {}
  {{- with (include "platform-streams.kafkaVolumes" . | trim) }}{{- . | nindent 2 }}{{- end }}
  {{- with .Values.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end }}
