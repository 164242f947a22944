// Package k8scheck decodes tokbench's Kubernetes manifests (deploy/k8s)
// into Kubernetes' own types, strictly: a field the API does not have is
// an error, as `kubectl apply --validate=strict` makes it. It is a module
// of its own, so that tokbench does not depend on the Kubernetes API;
// .ci/real runs it.
package k8scheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// docs reads a manifest's documents.
func docs(t *testing.T, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "k8s", name))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

func stripComments(s string) string {
	return regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(s, "")
}

// strict decodes one document into T, refusing a field T lacks.
func strict[T any](t *testing.T, name string, doc []byte) *T {
	t.Helper()
	v := new(T)
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// decode is the one document of name, strictly as T.
func decode[T any](t *testing.T, name string) *T {
	t.Helper()
	d := docs(t, name)
	if len(d) != 1 {
		t.Fatalf("%s: %d documents, want 1", name, len(d))
	}
	return strict[T](t, name, d[0])
}

// TestManifestsDecodeStrictly: every document of every manifest in
// deploy/k8s is an object of a known kind with no field its type lacks.
func TestManifestsDecodeStrictly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "k8s", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	kinds := 0
	for _, f := range files {
		name := filepath.Base(f)
		for _, doc := range docs(t, name) {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			switch meta.APIVersion + " " + meta.Kind {
			case "batch/v1 Job":
				strict[batchv1.Job](t, name, doc)
			case "v1 PersistentVolumeClaim":
				strict[corev1.PersistentVolumeClaim](t, name, doc)
			case "v1 Service":
				strict[corev1.Service](t, name, doc)
			case "v1 ConfigMap":
				strict[corev1.ConfigMap](t, name, doc)
			case "apps/v1 Deployment":
				strict[appsv1.Deployment](t, name, doc)
			default:
				t.Errorf("%s: %s %s is not checked", name, meta.APIVersion, meta.Kind)
				continue
			}
			kinds++
		}
	}
	t.Logf("%d objects in %d manifests decoded strictly", kinds, len(files))
}

// TestShardJobs: the Indexed Job runs one pod per shard, each shard's
// --shard and --out follow its completion index, and the merge Job reads
// exactly the shards' outputs.
func TestShardJobs(t *testing.T) {
	bench := decode[batchv1.Job](t, "bench-job.yaml")
	s := bench.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("bench-job: completionMode %v, want Indexed", s.CompletionMode)
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Completions != *s.Parallelism {
		t.Fatalf("bench-job: completions %v, parallelism %v: want equal, every shard at once", s.Completions, s.Parallelism)
	}
	n := int(*s.Completions)
	args := s.Template.Spec.Containers[0].Args
	want := map[string]string{
		"--shard": "$(JOB_COMPLETION_INDEX)/" + itoa(n),
		"--out":   "/results/run/shard-$(JOB_COMPLETION_INDEX)",
	}
	for flag, v := range want {
		if got := argOf(args, flag); got != v {
			t.Errorf("bench-job: %s=%q, want %q", flag, got, v)
		}
	}
	merge := decode[batchv1.Job](t, "merge-job.yaml")
	margs := merge.Spec.Template.Spec.Containers[0].Args
	var inputs []string
	for _, a := range margs[1:] {
		if !strings.HasPrefix(a, "--") {
			inputs = append(inputs, a)
		}
	}
	var shards []string
	for i := range n {
		shards = append(shards, "/results/run/shard-"+itoa(i))
	}
	if margs[0] != "merge" || !slices.Equal(inputs, shards) {
		t.Errorf("merge-job: args %v, want merge of %v", margs, shards)
	}
	// Both Jobs mount the same claim.
	claim := func(j *batchv1.Job) string {
		for _, v := range j.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				return v.PersistentVolumeClaim.ClaimName
			}
		}
		return ""
	}
	pvc := decode[corev1.PersistentVolumeClaim](t, "results-pvc.yaml")
	if claim(bench) != pvc.Name || claim(merge) != pvc.Name {
		t.Errorf("claims: bench %q, merge %q, the PVC is %q", claim(bench), claim(merge), pvc.Name)
	}
}

func argOf(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

func itoa(i int) string { return strconv.Itoa(i) }
