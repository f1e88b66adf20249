// SPDX-License-Identifier: Apache-2.0

// deploy-render renders a Helm chart the way `helm template` does, for the charts of this project,
// without Helm: Go's text/template with the sprig function library (Helm's own) plus the functions
// Helm's engine adds (include, tpl, required, toYaml, fromYaml, toJson, fromJson, lookup), the
// built-in objects .Values, .Release, .Chart and .Template, values.yaml coalesced with -f files and
// --set assignments, and Helm's output: one "---\n# Source: <chart>/<file>\n<document>" per
// document, CRDs first (--include-crds), the rest stably sorted in Helm's install order by kind.
//
// What is left out, so the charts must not use it: .Capabilities, .Files, subcharts, schema
// validation of values, hooks (a hook's document is printed like any other), --set list syntax.
//
// Usage: deploy-render [-f VALUES]... [--set k=v[,k=v]]... [--set-string k=v]... [-n NAMESPACE]
//
//	[--name RELEASE] [--include-crds] [--notes] CHART_DIR
//
// --notes prints the rendered templates/NOTES.txt instead of the manifests (it is always rendered,
// so an error in it fails the rendering, as with Helm).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	yaml "gopkg.in/yaml.v2"
)

// installOrder is Helm's InstallOrder (pkg/releaseutil/kind_sorter.go): kinds not listed come
// after these, sorted by name.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
}

// maxIncludeDepth bounds recursive include, as Helm does (it allows 1000).
const maxIncludeDepth = 1000

type options struct {
	valueFiles  []string
	sets        []string
	setStrings  []string
	namespace   string
	name        string
	includeCRDs bool
	notes       bool
	chart       string
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: deploy-render [-f VALUES]... [--set k=v]... [--set-string k=v]... "+
		"[-n NAMESPACE] [--name RELEASE] [--include-crds] [--notes] CHART_DIR")
	os.Exit(2)
}

func parseArgs(args []string) options {
	o := options{namespace: "default", name: "release-name"}
	next := func(i *int) string {
		if *i+1 >= len(args) {
			usage()
		}
		*i++
		return args[*i]
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-f" || a == "--values":
			o.valueFiles = append(o.valueFiles, next(&i))
		case a == "--set":
			o.sets = append(o.sets, next(&i))
		case a == "--set-string":
			o.setStrings = append(o.setStrings, next(&i))
		case a == "-n" || a == "--namespace":
			o.namespace = next(&i)
		case a == "--name":
			o.name = next(&i)
		case a == "--include-crds":
			o.includeCRDs = true
		case a == "--notes":
			o.notes = true
		case a == "-h" || a == "--help":
			usage()
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(os.Stderr, "deploy-render: unknown option %s\n", a)
			usage()
		default:
			if o.chart != "" {
				usage()
			}
			o.chart = a
		}
	}
	if o.chart == "" {
		usage()
	}
	return o
}

// -- values -------------------------------------------------------------------------------------

// jsonish turns what yaml.v2 decodes into what Helm's YAML reader (sigs.k8s.io/yaml: YAML to JSON,
// then encoding/json) gives: string keys, float64 numbers.
func jsonish(v interface{}) (interface{}, error) {
	conv, err := stringKeys(v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(conv)
	if err != nil {
		return nil, err
	}
	var out interface{}
	err = json.Unmarshal(b, &out)
	return out, err
}

func stringKeys(v interface{}) (interface{}, error) {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, val := range t {
			c, err := stringKeys(val)
			if err != nil {
				return nil, err
			}
			m[fmt.Sprint(k)] = c
		}
		return m, nil
	case map[string]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, val := range t {
			c, err := stringKeys(val)
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case []interface{}:
		l := make([]interface{}, len(t))
		for i, val := range t {
			c, err := stringKeys(val)
			if err != nil {
				return nil, err
			}
			l[i] = c
		}
		return l, nil
	default:
		return v, nil
	}
}

func readValues(path string) (map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw interface{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if raw == nil {
		return map[string]interface{}{}, nil
	}
	v, err := jsonish(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("%s: values must be a mapping", path)
	}
	return m, nil
}

// coalesce merges src over dst as Helm merges user values over a chart's: maps merge key by key,
// anything else replaces, and a null removes the key.
func coalesce(dst, src map[string]interface{}) {
	for k, sv := range src {
		if sv == nil {
			delete(dst, k)
			continue
		}
		sm, sIsMap := sv.(map[string]interface{})
		dm, dIsMap := dst[k].(map[string]interface{})
		if sIsMap && dIsMap {
			coalesce(dm, sm)
			continue
		}
		dst[k] = sv
	}
}

// typedValue is Helm's --set typing: true/false, null, a decimal int64 (no leading zero), else a
// string.
func typedValue(s string) interface{} {
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if len(s) > 1 && s[0] == '0' {
		return s
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	return s
}

// splitUnescaped splits s at sep not preceded by a backslash, and removes the escapes of sep.
func splitUnescaped(s string, sep byte) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && s[i+1] == sep {
			cur.WriteByte(sep)
			i++
			continue
		}
		if s[i] == sep {
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(s[i])
	}
	return append(parts, cur.String())
}

func applySet(values map[string]interface{}, expr string, asString bool) error {
	for _, assign := range splitUnescaped(expr, ',') {
		eq := strings.IndexByte(assign, '=')
		if eq <= 0 {
			return fmt.Errorf("--set %q: expected key=value", assign)
		}
		key, raw := assign[:eq], assign[eq+1:]
		if strings.ContainsAny(key, "[]") {
			return fmt.Errorf("--set %q: list indices are not supported", assign)
		}
		var val interface{} = raw
		if !asString {
			val = typedValue(raw)
		}
		path := splitUnescaped(key, '.')
		m := values
		for _, p := range path[:len(path)-1] {
			next, ok := m[p].(map[string]interface{})
			if !ok {
				next = map[string]interface{}{}
				m[p] = next
			}
			m = next
		}
		last := path[len(path)-1]
		if val == nil {
			delete(m, last)
		} else {
			m[last] = val
		}
	}
	return nil
}

// -- Helm's functions -----------------------------------------------------------------------------

// toYAML is sigs.k8s.io/yaml.Marshal: through JSON (so struct tags, sorted keys and JSON's types
// apply), then YAML.
func toYAML(v interface{}) (string, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	var obj interface{}
	if err := yaml.Unmarshal(j, &obj); err != nil {
		return "", err
	}
	out, err := yaml.Marshal(obj)
	return string(out), err
}

func funcMap(root *template.Template) template.FuncMap {
	f := sprig.TxtFuncMap()
	// Helm removes these: a chart must not read the environment of the machine rendering it.
	delete(f, "env")
	delete(f, "expandenv")

	depth := map[string]int{}
	f["include"] = func(name string, data interface{}) (string, error) {
		if depth[name] > maxIncludeDepth {
			return "", fmt.Errorf("rendering template has a nested reference name: %s", name)
		}
		depth[name]++
		defer func() { depth[name]-- }()
		var buf strings.Builder
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Option("missingkey=zero").Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", text, err)
		}
		var buf strings.Builder
		if err := t.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return v, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return v, errors.New(msg)
		}
		return v, nil
	}
	f["toYaml"] = func(v interface{}) string {
		s, err := toYAML(v)
		if err != nil {
			return "" // as Helm: errors become an empty string
		}
		return strings.TrimSuffix(s, "\n")
	}
	f["fromYaml"] = func(s string) map[string]interface{} {
		var raw interface{}
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &raw); err != nil {
			m["Error"] = err.Error()
			return m
		}
		v, err := jsonish(raw)
		if err != nil {
			m["Error"] = err.Error()
			return m
		}
		if vm, ok := v.(map[string]interface{}); ok {
			return vm
		}
		return m
	}
	f["toJson"] = func(v interface{}) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	f["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	// `helm template` has no cluster to look anything up in: lookup finds nothing.
	f["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	return f
}

// -- the chart --------------------------------------------------------------------------------------

type manifest struct {
	source string
	body   string
	kind   string
}

func kindIndex(kind string) int {
	for i, k := range installOrder {
		if k == kind {
			return i
		}
	}
	return -1
}

// splitDocuments splits a rendered file into its YAML documents (lines that are exactly "---",
// possibly with trailing spaces or a comment), dropping the empty ones.
func splitDocuments(text string) []string {
	var docs []string
	var cur []string
	flush := func() {
		d := strings.TrimSpace(strings.Join(cur, "\n"))
		if d != "" {
			docs = append(docs, d)
		}
		cur = cur[:0]
	}
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimRight(line, " \t")
		if t == "---" || strings.HasPrefix(t, "--- ") {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return docs
}

func render(o options) (string, error) {
	chartDir := o.chart
	meta, err := readValues(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return "", err
	}
	chartName, _ := meta["name"].(string)
	if chartName == "" {
		return "", errors.New("Chart.yaml: no name")
	}
	if meta["dependencies"] != nil {
		return "", errors.New("Chart.yaml: subcharts are not supported")
	}
	chart := map[string]interface{}{}
	for k, v := range meta {
		// Helm's .Chart is the Chart.yaml metadata with Go field names: Name, Version, AppVersion...
		chart[strings.ToUpper(k[:1])+k[1:]] = v
	}

	values, err := readValues(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return "", err
	}
	for _, f := range o.valueFiles {
		user, err := readValues(f)
		if err != nil {
			return "", err
		}
		coalesce(values, user)
	}
	for _, s := range o.sets {
		if err := applySet(values, s, false); err != nil {
			return "", err
		}
	}
	for _, s := range o.setStrings {
		if err := applySet(values, s, true); err != nil {
			return "", err
		}
	}
	// --set values go through the same JSON typing as files (an int64 becomes a float64).
	v, err := jsonish(values)
	if err != nil {
		return "", err
	}
	values = v.(map[string]interface{})

	release := map[string]interface{}{
		"Name": o.name, "Namespace": o.namespace, "Service": "Helm",
		"IsInstall": true, "IsUpgrade": false, "Revision": 1,
	}

	// Every template of the chart goes into one set, named <chart>/templates/<path>, so that a
	// define in any file (the _*.tpl partials) is visible to all.
	root := template.New("gotpl")
	root.Funcs(funcMap(root)).Option("missingkey=zero")
	var names []string
	tdir := filepath.Join(chartDir, "templates")
	err = filepath.WalkDir(tdir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(chartDir, path)
		name := chartName + "/" + filepath.ToSlash(rel)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if _, err := root.New(name).Parse(string(data)); err != nil {
			return err
		}
		names = append(names, name)
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)

	var manifests []manifest
	notes := ""
	for _, name := range names {
		base := filepath.Base(name)
		if strings.HasPrefix(base, "_") {
			continue
		}
		data := map[string]interface{}{
			"Values": values, "Release": release, "Chart": chart,
			"Template": map[string]interface{}{"Name": name, "BasePath": chartName + "/templates"},
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		if name == chartName+"/templates/NOTES.txt" {
			notes = out
			continue
		}
		for _, doc := range splitDocuments(out) {
			var head struct {
				Kind string `yaml:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return "", fmt.Errorf("%s: the rendered YAML does not parse: %w\n%s", name, err, doc)
			}
			manifests = append(manifests, manifest{source: name, body: doc, kind: head.Kind})
		}
	}
	sort.SliceStable(manifests, func(i, j int) bool {
		a, b := kindIndex(manifests[i].kind), kindIndex(manifests[j].kind)
		switch {
		case a == -1 && b == -1:
			return manifests[i].kind < manifests[j].kind
		case a == -1:
			return false
		case b == -1:
			return true
		}
		return a < b
	})

	if o.notes {
		return notes, nil
	}
	var sb strings.Builder
	if o.includeCRDs {
		crds, _ := filepath.Glob(filepath.Join(chartDir, "crds", "*"))
		sort.Strings(crds)
		for _, c := range crds {
			data, err := os.ReadFile(c)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&sb, "---\n# Source: %s/crds/%s\n%s\n", chartName, filepath.Base(c),
				strings.TrimRight(string(data), "\n"))
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(&sb, "---\n# Source: %s\n%s\n", m.source, m.body)
	}
	return sb.String(), nil
}

func main() {
	o := parseArgs(os.Args[1:])
	out, err := render(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "deploy-render: %v\n", err)
		os.Exit(1)
	}
	os.Stdout.WriteString(out)
}
