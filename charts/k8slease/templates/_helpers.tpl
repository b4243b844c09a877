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
The elector bindings of the shared (namespace-wide) Role as a JSON object: namespace -> list of
ServiceAccount names. The release namespace is always present (possibly with no
ServiceAccounts) so that its Role exists for users who bind it themselves, and so is every
namespace of a group binding. A binding that names its group gets that group's narrowed Role
instead (k8slease.elector.groupRoles), the example app's too; with elector.createRole=false
there are no narrowed Roles and every ServiceAccount is listed here.
*/}}
{{- define "k8slease.elector.bindings" -}}
{{- $root := . -}}
{{- $byNamespace := dict .Release.Namespace (list) -}}
{{- range .Values.elector.bindings -}}
{{- $ns := .namespace | default $root.Release.Namespace -}}
{{- $current := get $byNamespace $ns | default (list) -}}
{{- if and .group $root.Values.elector.createRole -}}
{{- $_ := set $byNamespace $ns $current -}}
{{- else -}}
{{- $_ := set $byNamespace $ns (append $current .serviceAccount | uniq) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.exampleApp.enabled (not .Values.elector.createRole) -}}
{{- $ns := .Release.Namespace -}}
{{- $current := get $byNamespace $ns | default (list) -}}
{{- $_ := set $byNamespace $ns (append $current (include "k8slease.exampleApp.serviceAccountName" .) | uniq) -}}
{{- end -}}
{{- toJson $byNamespace -}}
{{- end -}}

{{/*
The elector Roles narrowed to one group (issue 27), as a JSON list of {namespace, group, names,
serviceAccounts}: one per (namespace, group) that elector.bindings name with `group` (the
example app's group and exampleApp.jobs too, when it is enabled). names are the Leases the group's replicas get and
update: the leader Lease <group> and a lock <group>.<job> for each declared job. Only when the
chart creates the Roles (elector.createRole); otherwise a group binding binds the shared Role.
*/}}
{{- define "k8slease.elector.groupRoles" -}}
{{- $root := . -}}
{{- $byKey := dict -}}
{{- $entries := list -}}
{{- range .Values.elector.bindings -}}
{{- if .group -}}
{{- $entries = append $entries (dict "namespace" (.namespace | default $root.Release.Namespace) "group" .group "serviceAccount" .serviceAccount "jobs" (.jobs | default list)) -}}
{{- end -}}
{{- end -}}
{{- if .Values.exampleApp.enabled -}}
{{- $entries = append $entries (dict "namespace" .Release.Namespace "group" .Values.exampleApp.group "serviceAccount" (include "k8slease.exampleApp.serviceAccountName" .) "jobs" (.Values.exampleApp.jobs | default list)) -}}
{{- end -}}
{{- if .Values.elector.createRole -}}
{{- range $entries -}}
{{- $key := printf "%s/%s" .namespace .group -}}
{{- $role := get $byKey $key | default (dict "namespace" .namespace "group" .group "names" (list .group) "serviceAccounts" list) -}}
{{- $names := $role.names -}}
{{- range .jobs -}}{{- $names = append $names (printf "%s.%s" $role.group .) -}}{{- end -}}
{{- $_ := set $role "names" (uniq $names) -}}
{{- $_ := set $role "serviceAccounts" (append $role.serviceAccounts .serviceAccount | uniq) -}}
{{- $_ := set $byKey $key $role -}}
{{- end -}}
{{- end -}}
{{- $roles := list -}}
{{- range $key := keys $byKey | sortAlpha -}}{{- $roles = append $roles (get $byKey $key) -}}{{- end -}}
{{- toJson $roles -}}
{{- end -}}

{{/*
What the operator may do, and nothing more: list and watch the Leases it reports on (it never
writes them) and the ScheduledJobGroups, create a group for Leases that have none, merge-patch
their status, and post Events. Each verb is needed: tests/realserver/test_rbac_least_privilege.py
removes each one in turn on a real kube-apiserver and shows what breaks. Shared by the namespaced
Role and the cluster-wide ClusterRole.
*/}}
{{- define "k8slease.operator.rules" -}}
- apiGroups: ["k8slease.io"]
  resources: ["scheduledjobgroups"]
  verbs: ["list", "watch", "create"]
- apiGroups: ["k8slease.io"]
  resources: ["scheduledjobgroups/status"]
  verbs: ["patch"]
{{- if .Values.operator.readJournals }}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "watch", "update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
{{- else }}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["list", "watch"]
{{- end }}
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}

{{/*
The groups the admission policy guards, as a JSON list of {name, namespace, writers}: writers
are the usernames (system:serviceaccount:NS:SA, plus any users listed) allowed to write the
group's Leases. admissionPolicy.groups declares them; an elector binding that names its group
declares its ServiceAccount a writer of that group too, and so does the example app when it is
enabled. Entries for the same namespace and group are merged (their writers joined).
*/}}
{{- define "k8slease.admission.groups" -}}
{{- $root := . -}}
{{- $entries := list -}}
{{- range .Values.admissionPolicy.groups -}}
{{- $ns := .namespace | default $root.Release.Namespace -}}
{{- $writers := list -}}
{{- range .serviceAccounts -}}
{{- $writers = append $writers (printf "system:serviceaccount:%s:%s" $ns .) -}}
{{- end -}}
{{- range .users -}}
{{- $writers = append $writers . -}}
{{- end -}}
{{- $entries = append $entries (dict "name" .name "namespace" $ns "writers" $writers) -}}
{{- end -}}
{{- range .Values.elector.bindings -}}
{{- if .group -}}
{{- $ns := .namespace | default $root.Release.Namespace -}}
{{- $entries = append $entries (dict "name" .group "namespace" $ns "writers" (list (printf "system:serviceaccount:%s:%s" $ns .serviceAccount))) -}}
{{- end -}}
{{- end -}}
{{- if .Values.exampleApp.enabled -}}
{{- $sa := printf "system:serviceaccount:%s:%s" .Release.Namespace (include "k8slease.exampleApp.serviceAccountName" .) -}}
{{- $entries = append $entries (dict "name" .Values.exampleApp.group "namespace" .Release.Namespace "writers" (list $sa)) -}}
{{- end -}}
{{- $byKey := dict -}}
{{- $order := list -}}
{{- range $entries -}}
{{- $key := printf "%s/%s" .namespace .name -}}
{{- if hasKey $byKey $key -}}
{{- $known := get $byKey $key -}}
{{- $_ := set $known "writers" (concat $known.writers .writers | uniq) -}}
{{- else -}}
{{- $_ := set $byKey $key (dict "name" .name "namespace" .namespace "writers" (uniq .writers)) -}}
{{- $order = append $order $key -}}
{{- end -}}
{{- end -}}
{{- $groups := list -}}
{{- range $order -}}{{- $groups = append $groups (get $byKey .) -}}{{- end -}}
{{- toJson $groups -}}
{{- end -}}

{{/* A CEL list literal of strings: ['a', 'b']. */}}
{{- define "k8slease.cel.list" -}}
[{{- range $i, $v := . }}{{ if $i }}, {{ end }}'{{ $v }}'{{ end -}}]
{{- end -}}
