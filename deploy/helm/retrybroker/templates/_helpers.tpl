{{- define "retrybroker.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "retrybroker.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "retrybroker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "retrybroker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "retrybroker.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "retrybroker.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "retrybroker.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "retrybroker.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* durationSeconds turns a duration of whole seconds, minutes or hours ("15s", "2m", "1h") into seconds; any other form fails the rendering. */}}
{{- define "retrybroker.durationSeconds" -}}
{{- $d := toString . -}}
{{- if not (regexMatch "^[0-9]+[smh]$" $d) -}}
{{- fail (printf "broker.shutdownTimeout must be whole seconds, minutes or hours (15s, 2m, 1h), got %q" $d) -}}
{{- end -}}
{{- $n := regexFind "^[0-9]+" $d | int -}}
{{- if hasSuffix "h" $d -}}{{ mul $n 3600 }}
{{- else if hasSuffix "m" $d -}}{{ mul $n 60 }}
{{- else -}}{{ $n }}
{{- end -}}
{{- end }}

{{/* probe is a gRPC health probe of service on the gRPC port, or a TCP probe when the port speaks TLS. */}}
{{- define "retrybroker.probe" -}}
{{- if .root.Values.tls.enabled -}}
tcpSocket:
  port: {{ .root.Values.grpcPort }}
{{- else -}}
grpc:
  port: {{ .root.Values.grpcPort }}
  service: {{ .service | quote }}
{{- end -}}
{{- end }}
