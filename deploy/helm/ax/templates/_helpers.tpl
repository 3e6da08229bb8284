{{/* The release's base name: the release name, with the chart name unless it holds it already. */}}
{{- define "ax.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* A name built from parts, refused (not truncated: two regions must never collide) beyond 63 characters. */}}
{{- define "ax.name" -}}
{{- $n := join "-" . -}}
{{- if gt (len $n) 63 -}}
{{- fail (printf "name %q is longer than 63 characters: shorten the release, region or pool name" $n) -}}
{{- end -}}
{{- $n -}}
{{- end -}}

{{- define "ax.labels" -}}
app.kubernetes.io/name: ax
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ax.selector" -}}
app.kubernetes.io/name: ax
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ax.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "ax.secretName" -}}
{{- .Values.secret.existingSecret | default (printf "%s-secret" (include "ax.fullname" .)) -}}
{{- end -}}

{{/*
ax.region parses one entry of .Values.regions (passed as "region") and
returns it as YAML: name, config (the text), pools, publicAddr and the
object names the templates share. Every template calls it, so a broken
entry fails the render the same way everywhere.
*/}}
{{- define "ax.region" -}}
{{- $root := .root -}}
{{- $r := .region -}}
{{- if not $r.config -}}
{{- fail "regions[]: each entry needs a config (the region's YAML)" -}}
{{- end -}}
{{- $cfg := fromYaml $r.config -}}
{{- if hasKey $cfg "Error" -}}
{{- fail (printf "regions[].config is not YAML: %s" (get $cfg "Error")) -}}
{{- end -}}
{{- $name := required "regions[].config: region is required" $cfg.region -}}
{{- $full := include "ax.fullname" $root -}}
{{- $pools := list -}}
{{- range $cfg.pools -}}
{{- $pools = append $pools (required (printf "%s: pools[].name is required" $name) .name) -}}
{{- end -}}
{{- if not $pools -}}
{{- fail (printf "region %s: its config has no pools" $name) -}}
{{- end -}}
{{- range $p, $_ := ($r.workers | default dict) -}}
{{- if not (has $p $pools) -}}
{{- fail (printf "region %s: workers names pool %q, which its config does not have (%s)" $name $p (join ", " $pools)) -}}
{{- end -}}
{{- end -}}
{{- $svc := include "ax.name" (list $full $name) -}}
name: {{ $name }}
server: {{ include "ax.name" (list $full "server" $name) }}
service: {{ $svc }}
workerService: {{ include "ax.name" (list $full "worker" $name) }}
configMap: {{ include "ax.name" (list $full "config" $name) }}
publicAddr: {{ $r.publicAddr | default (printf "http://%s.%s.svc:%v" $svc $root.Release.Namespace $root.Values.server.port) }}
pools:
{{- range $pools }}
  - name: {{ . }}
    deployment: {{ include "ax.name" (list $full "worker" $name .) }}
    replicas: {{ dig . "replicas" $root.Values.worker.replicas ($r.workers | default dict) }}
{{- end }}
{{- end -}}

{{/* The environment every ax container of a region gets. Takes (dict "root" $ "r" $region). */}}
{{- define "ax.env" -}}
- name: AX_LISTEN
  value: {{ printf "0.0.0.0:%v" .root.Values.server.port | quote }}
- name: AX_PUBLIC_ADDR
  value: {{ .r.publicAddr | quote }}
{{- end -}}

{{/* A server's: ax.env, the cluster token and the Redis password. */}}
{{- define "ax.serverEnv" -}}
{{ include "ax.env" . }}
- name: AX_AUTH_CLUSTER_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "ax.secretName" .root }}
      key: cluster-token
- name: AX_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "ax.secretName" .root }}
      key: redis-password
      optional: true
{{- end -}}

{{/* A worker's: ax.env and its Redis credentials, never the cluster token.
With worker.redisUsername, that ACL user (deploy/redis/ax-worker.acl) and
the Secret's worker-redis-password; else the servers' redis-password. */}}
{{- define "ax.workerEnv" -}}
{{ include "ax.env" . }}
{{- if .root.Values.worker.redisUsername }}
- name: AX_REDIS_USERNAME
  value: {{ .root.Values.worker.redisUsername | quote }}
{{- end }}
- name: AX_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "ax.secretName" .root }}
      key: {{ ternary "worker-redis-password" "redis-password" (not (empty .root.Values.worker.redisUsername)) }}
      optional: true
{{- end -}}

{{- define "ax.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "ax.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* ax.dnsEgress: the egress rule to the cluster's DNS (networkPolicy.dns.to), UDP and TCP 53. */}}
{{- define "ax.dnsEgress" -}}
- ports:
    - {protocol: UDP, port: 53}
    - {protocol: TCP, port: 53}
  {{- with .Values.networkPolicy.dns.to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
