{{/* Chart name, overridable with .Values.nameOverride. */}}
{{- define "k8slease.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: <release>-<chart>, or just <release> when it already contains the chart name. */}}
{{- define "k8slease.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "k8slease.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object the chart itself owns (the example app has its own name). */}}
{{- define "k8slease.labels" -}}
app.kubernetes.io/name: {{ include "k8slease.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{ include "k8slease.commonLabels" . }}
{{- end -}}

{{/* Labels shared by every object, the example app's included. */}}
{{- define "k8slease.commonLabels" -}}
helm.sh/chart: {{ include "k8slease.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: k8slease
app.kubernetes.io/managed-by: {{ .Values.managedBy | default .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of the operator pods (stable across upgrades). */}}
{{- define "k8slease.operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "k8slease.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* Selector labels of the example app pods. */}}
{{- define "k8slease.exampleApp.selectorLabels" -}}
app.kubernetes.io/name: {{ .Values.exampleApp.name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: example-app
{{- end -}}

{{/* Labels of the example app's objects. */}}
{{- define "k8slease.exampleApp.labels" -}}
{{ include "k8slease.exampleApp.selectorLabels" . }}
{{ include "k8slease.commonLabels" . }}
{{- end -}}

{{- define "k8slease.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "k8slease.fullname" .)) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "k8slease.exampleApp.serviceAccountName" -}}
{{- default .Values.exampleApp.name .Values.exampleApp.serviceAccount.name -}}
{{- end -}}

{{- define "k8slease.elector.roleName" -}}
{{- default (printf "%s-elector" (include "k8slease.fullname" .)) .Values.elector.roleName -}}
{{- end -}}

{{/* The image reference: repository@digest when a digest is set, else repository:tag. */}}
{{- define "k8slease.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Namespaces the operator watches when it is not cluster-wide, as a JSON list. */}}
{{- define "k8slease.operator.namespaces" -}}
{{- $namespaces := .Values.operator.watchNamespaces | default (list .Release.Namespace) -}}
{{- toJson (uniq $namespaces) -}}
{{- end -}}

{{/*
The elector bindings as a JSON object: namespace -> list of ServiceAccount names. The release
namespace is always present (possibly with no ServiceAccounts) so that its Role exists for
users who bind it themselves; the example app's ServiceAccount is added when it is enabled.
*/}}
{{- define "k8slease.elector.bindings" -}}
{{- $root := . -}}
{{- $byNamespace := dict .Release.Namespace (list) -}}
{{- range .Values.elector.bindings -}}
{{- $ns := .namespace | default $root.Release.Namespace -}}
{{- $current := get $byNamespace $ns | default (list) -}}
{{- $_ := set $byNamespace $ns (append $current .serviceAccount | uniq) -}}
{{- end -}}
{{- if .Values.exampleApp.enabled -}}
{{- $ns := .Release.Namespace -}}
{{- $current := get $byNamespace $ns | default (list) -}}
{{- $_ := set $byNamespace $ns (append $current (include "k8slease.exampleApp.serviceAccountName" .) | uniq) -}}
{{- end -}}
{{- toJson $byNamespace -}}
{{- end -}}

{{/*
What the operator may do, and nothing more: list and watch the Leases it reports on (it never
writes them) and the ScheduledJobGroups, create a group for Leases that have none, merge-patch
their status, and post Events. Each verb is needed: tests/realserver/test_rbac.py removes each
one in turn on a real kube-apiserver and shows what breaks. Shared by the namespaced Role and
the cluster-wide ClusterRole.
*/}}
{{- define "k8slease.operator.rules" -}}
- apiGroups: ["k8slease.io"]
  resources: ["scheduledjobgroups"]
  verbs: ["list", "watch", "create"]
- apiGroups: ["k8slease.io"]
  resources: ["scheduledjobgroups/status"]
  verbs: ["patch"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}

{{/*
The groups the admission policy guards, as a JSON list of {name, namespace, writers}: writers
are the usernames (system:serviceaccount:NS:SA, plus any users listed) allowed to write the
group's Leases. admissionPolicy.groups declares them; the example app's group is added when it
is enabled.
*/}}
{{- define "k8slease.admission.groups" -}}
{{- $root := . -}}
{{- $groups := list -}}
{{- range .Values.admissionPolicy.groups -}}
{{- $ns := .namespace | default $root.Release.Namespace -}}
{{- $writers := list -}}
{{- range .serviceAccounts -}}
{{- $writers = append $writers (printf "system:serviceaccount:%s:%s" $ns .) -}}
{{- end -}}
{{- range .users -}}
{{- $writers = append $writers . -}}
{{- end -}}
{{- $groups = append $groups (dict "name" .name "namespace" $ns "writers" (uniq $writers)) -}}
{{- end -}}
{{- if .Values.exampleApp.enabled -}}
{{- $sa := printf "system:serviceaccount:%s:%s" .Release.Namespace (include "k8slease.exampleApp.serviceAccountName" .) -}}
{{- $groups = append $groups (dict "name" .Values.exampleApp.group "namespace" .Release.Namespace "writers" (list $sa)) -}}
{{- end -}}
{{- toJson $groups -}}
{{- end -}}

{{/* A CEL list literal of strings: ['a', 'b']. */}}
{{- define "k8slease.cel.list" -}}
[{{- range $i, $v := . }}{{ if $i }}, {{ end }}'{{ $v }}'{{ end -}}]
{{- end -}}
