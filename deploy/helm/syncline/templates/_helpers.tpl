{{/*
Names. fullname is <release>-<chart name>, or the release name alone when it
already contains the chart name, cut to 40 characters so that the longest
derived host name, "<fullname>-worker-<index>", stays under 63.
*/}}
{{- define "syncline.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" }}
{{- end }}

{{- define "syncline.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "syncline.schedulerHost" -}}
{{- include "syncline.fullname" . }}-scheduler
{{- end }}

{{- define "syncline.tokenSecretName" -}}
{{- if .Values.existingSecret }}{{ .Values.existingSecret }}{{ else }}{{ include "syncline.fullname" . }}-token{{ end }}
{{- end }}

{{- define "syncline.tokenSecretKey" -}}
{{- if .Values.existingSecret }}{{ .Values.existingSecretKey }}{{ else }}token{{ end }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "syncline.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "syncline.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "syncline.selectorLabels" -}}
app.kubernetes.io/name: {{ include "syncline.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The environment of one role's container: the BytePS/ps-lite names that
Syncline's settings reader accepts as aliases, and the SYNCLINE_* settings
that have none. Only literal values, fieldRef and secretKeyRef are used.
Argument: dict "root" $ "role" "scheduler|server|worker".
*/}}
{{- define "syncline.env" -}}
{{- $root := .root }}
{{- $v := $root.Values -}}
- name: DMLC_ROLE
  value: {{ .role }}
- name: DMLC_PS_ROOT_URI
  value: {{ include "syncline.schedulerHost" $root }}
- name: DMLC_PS_ROOT_PORT
  value: {{ int $v.scheduler.port | quote }}
- name: DMLC_NUM_WORKER
  value: {{ int $v.numWorkers | quote }}
- name: DMLC_NUM_SERVER
  value: {{ int $v.numServers | quote }}
{{- /* A pod of several workers: pslaunch gives each its rank (and metrics port). */}}
{{- $onePerPod := or (ne .role "worker") (eq (int $v.worker.processesPerPod) 1) }}
{{- if and (eq .role "worker") $onePerPod }}
- name: DMLC_WORKER_ID
  valueFrom:
    fieldRef:
      fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
{{- end }}
{{- if eq .role "server" }}
- name: SYNCLINE_SERVER_RANK
  valueFrom:
    fieldRef:
      fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
{{- end }}
- name: SYNCLINE_HOST
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: SYNCLINE_JOB_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "syncline.tokenSecretName" $root }}
      key: {{ include "syncline.tokenSecretKey" $root }}
- name: SYNCLINE_TRANSPORT
  value: {{ $v.transport | quote }}
{{- if and $v.metrics.enabled $onePerPod }}
- name: SYNCLINE_METRICS_PORT
  value: {{ int $v.metrics.port | quote }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- with (index $v .role).extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Pod template shared by the three Jobs. Argument: dict "root" $, "role" R,
"values" (the role's values), "subdomain" (its headless Service or ""), and
the container's "command", "args", "workingDir" and "ports" (list of dicts),
each optional.
*/}}
{{- define "syncline.podTemplate" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $rv := .values -}}
metadata:
  labels:
    {{- include "syncline.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .role }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if or $v.metrics.enabled $v.podAnnotations }}
  annotations:
    {{- if $v.metrics.enabled }}
    prometheus.io/scrape: "true"
    prometheus.io/port: {{ int $v.metrics.port | quote }}
    prometheus.io/path: /metrics
    {{- end }}
    {{- with $v.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
spec:
  restartPolicy: Never
  {{- /*
  Kubernetes would otherwise export <SERVICE>_PORT=tcp://... variables for
  every Service in the namespace: for a release named "syncline" that is
  SYNCLINE_SCHEDULER_PORT, which overrides DMLC_PS_ROOT_PORT, and unknown
  SYNCLINE_* names are errors to Syncline's settings reader.
  */}}
  enableServiceLinks: false
  automountServiceAccountToken: false
  {{- with $v.serviceAccountName }}
  serviceAccountName: {{ . }}
  {{- end }}
  {{- with $v.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .subdomain }}
  subdomain: {{ . }}
  {{- end }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.podSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: {{ .role }}
      image: "{{ $v.image.repository }}:{{ $v.image.tag }}"
      imagePullPolicy: {{ $v.image.pullPolicy }}
      {{- with .command }}
      command:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .args }}
      args:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .workingDir }}
      workingDir: {{ . }}
      {{- end }}
      {{- $ports := .ports | default list }}
      {{- if $v.metrics.enabled }}
      {{- range (include "syncline.metricsPorts" (dict "root" $root "role" .role) | fromJsonArray) }}
      {{- $ports = append $ports (dict "name" .name "containerPort" (int .port) "protocol" "TCP") }}
      {{- end }}
      {{- end }}
      {{- with $ports }}
      ports:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      env:
        {{- include "syncline.env" (dict "root" $root "role" .role) | nindent 8 }}
      {{- with $rv.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
  {{- with $rv.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $rv.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if $rv.affinity }}
  affinity:
    {{- toYaml $rv.affinity | nindent 4 }}
  {{- else if and (eq .role "server") $rv.spreadAcrossNodes }}
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "syncline.selectorLabels" $root | nindent 16 }}
                app.kubernetes.io/component: server
  {{- end }}
  {{- with $rv.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/* Job fields shared by the three roles. */}}
{{- define "syncline.jobPolicy" -}}
backoffLimit: 0
{{- with .Values.activeDeadlineSeconds }}
activeDeadlineSeconds: {{ int . }}
{{- end }}
{{- if not (kindIs "invalid" .Values.ttlSecondsAfterFinished) }}
ttlSecondsAfterFinished: {{ int .Values.ttlSecondsAfterFinished }}
{{- end }}
{{- end }}

{{/*
Worker pods: numWorkers / worker.processesPerPod, refused unless it divides.
*/}}
{{- define "syncline.workerPods" -}}
{{- $perPod := int .Values.worker.processesPerPod }}
{{- $workers := int .Values.numWorkers }}
{{- if or (gt $perPod $workers) (ne (mod $workers $perPod) 0) }}
{{- fail (printf "worker.processesPerPod (%d) must divide numWorkers (%d): every worker pod runs the same number of workers" $perPod $workers) }}
{{- end }}
{{- div $workers $perPod }}
{{- end }}

{{/*
The metrics ports of one role's pod, as a JSON list of {name, port}:
"metrics" on metrics.port, and for a worker pod of L > 1 processes also
"metrics-1" .. "metrics-<L-1>" on the ports after it (pslaunch's
--metrics-port gives local rank i port + i). Argument: dict "root" $ "role" R.
*/}}
{{- define "syncline.metricsPorts" -}}
{{- $v := .root.Values }}
{{- $last := add (int $v.metrics.port) (int $v.worker.processesPerPod) -1 }}
{{- if and (eq .role "worker") (gt (int $last) 65535) }}
{{- fail (printf "metrics.port (%d) + worker.processesPerPod (%d) - 1 is past 65535: local rank i of a worker pod serves on metrics.port + i" (int $v.metrics.port) (int $v.worker.processesPerPod)) }}
{{- end }}
{{- $ports := list (dict "name" "metrics" "port" (int $v.metrics.port)) }}
{{- if eq .role "worker" }}
{{- range $i := untilStep 1 (int $v.worker.processesPerPod) 1 }}
{{- $ports = append $ports (dict "name" (printf "metrics-%d" $i) "port" (add (int $v.metrics.port) $i)) }}
{{- end }}
{{- end }}
{{- toJson $ports }}
{{- end }}

{{/*
The command of a worker pod of several workers: pslaunch starts
worker.processesPerPod copies of worker.command on the pod, ranks
<index> * L + 0..L-1 (torchrun's --nproc-per-node and --node-rank). The
scheduler's address, the counts and the token come from the pod's env.
*/}}
{{- define "syncline.workerPodCommand" -}}
{{- $v := .Values }}
{{- $cmd := list "pslaunch" "--role" "worker" "--scheduler" "$(DMLC_PS_ROOT_URI):$(DMLC_PS_ROOT_PORT)" "--workers" "$(DMLC_NUM_WORKER)" "--servers" "$(DMLC_NUM_SERVER)" "--local-workers" (toString (int $v.worker.processesPerPod)) "--node-rank" "$(JOB_COMPLETION_INDEX)" }}
{{- if $v.metrics.enabled }}
{{- $cmd = concat $cmd (list "--metrics-port" (toString (int $v.metrics.port))) }}
{{- end }}
{{- toJson (concat $cmd (list "--") $v.worker.command) }}
{{- end }}
