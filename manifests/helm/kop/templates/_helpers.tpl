{{/*
SPDX-License-Identifier: Apache-2.0

Shared pieces of kop's chart. Object names are fixed (not derived from the
release name): kop and its RBAC refer to them by name, the CRD and the
ClusterRoles are cluster-wide, so a cluster runs one release of this chart.
*/}}

{{/* The namespace kop runs in. */}}
{{- define "kop.namespace" -}}
{{- default .Release.Namespace .Values.namespace.name -}}
{{- end -}}

{{/*
Labels on every object's metadata: those of the kustomize install, with
Helm as the manager, and the chart's name and version.
*/}}
{{- define "kop.labels" -}}
app.kubernetes.io/name: kop
app.kubernetes.io/part-of: kop
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* What selects kop's pods (Deployment, Services, PDB, NetworkPolicies). */}}
{{- define "kop.selectorLabels" -}}
app.kubernetes.io/name: kop
app.kubernetes.io/component: controller-manager
{{- end -}}

{{/* The certificate source, checked (values.schema.json checks it too). */}}
{{- define "kop.certSource" -}}
{{- $s := .Values.certificates.source -}}
{{- if not (has $s (list "cert-manager" "self-signed" "secret")) -}}
{{- fail (printf "certificates.source must be cert-manager, self-signed or secret, not %q" $s) -}}
{{- end -}}
{{- if and (eq $s "secret") (or (not .Values.certificates.secret.name) (not .Values.certificates.secret.caBundle)) -}}
{{- fail "certificates.source=secret needs certificates.secret.name and certificates.secret.caBundle" -}}
{{- end -}}
{{- if and (eq $s "self-signed") .Values.sharding.enabled -}}
{{- fail "sharding.enabled needs certificates.source cert-manager or secret: self-signed runs one replica and leaves the mutating webhook without a caBundle" -}}
{{- end -}}
{{- $s -}}
{{- end -}}

{{/* The replica count: one with self-signed certificates. */}}
{{- define "kop.replicas" -}}
{{- if eq (include "kop.certSource" .) "self-signed" -}}1{{- else -}}{{ int .Values.replicaCount }}{{- end -}}
{{- end -}}

{{/* cert-manager's cainjector annotation, on the CRD and the webhook configuration. */}}
{{- define "kop.injectCA" -}}
{{- if eq (include "kop.certSource" .) "cert-manager" -}}
cert-manager.io/inject-ca-from: {{ include "kop.namespace" . }}/kop-serving-cert
{{- end -}}
{{- end -}}

{{/* The image reference: repository:tag, or repository@digest. */}}
{{- define "kop.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}
