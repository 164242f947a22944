package gcroom

import (
	"os"
	"path/filepath"
	"testing"
)

// tree writes files (path → content) under a temporary directory, which
// it returns.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCgroupSpare(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"v2, own limit, file cache not counted", map[string]string{
			"proc":                      "0::/pod/app\n",
			"fs/pod/app/memory.max":     "1073741824\n",
			"fs/pod/app/memory.current": "943718400\n", // 900 MiB, 300 of it inactive file cache
			"fs/pod/app/memory.stat":    "anon 629145600\ninactive_file 314572800\nactive_file 0\n",
			"fs/pod/memory.max":         "max\n",
			"fs/pod/memory.current":     "943718400\n",
			"fs/memory.max":             "max\n",
		}, 1024*mib - 600*mib},
		{"v2, the limit on the cgroup above", map[string]string{
			"proc":                      "0::/pod/app\n",
			"fs/pod/app/memory.max":     "max\n",
			"fs/pod/app/memory.current": "104857600\n",
			"fs/pod/memory.max":         "536870912\n",
			"fs/pod/memory.current":     "209715200\n",
		}, 512*mib - 200*mib},
		{"v2, at its limit", map[string]string{
			"proc":                  "0::/app\n",
			"fs/app/memory.max":     "536870912\n",
			"fs/app/memory.current": "536870912\n",
		}, 1},
		{"v2 in a namespace: own cgroup at the mount's root", map[string]string{
			"proc":              "0::/\n",
			"fs/memory.max":     "268435456\n",
			"fs/memory.current": "67108864\n",
		}, 192 * mib},
		{"v1 memory controller beside others", map[string]string{
			"proc":                                "4:memory:/job\n3:cpu,cpuacct:/job\n0::/\n",
			"fs/memory/job/memory.limit_in_bytes": "2147483648\n",
			"fs/memory/job/memory.usage_in_bytes": "1073741824\n",
			"fs/memory/job/memory.stat":           "cache 0\ntotal_inactive_file 536870912\n",
			"fs/memory/memory.limit_in_bytes":     "9223372036854771712\n",
			"fs/memory/memory.usage_in_bytes":     "4294967296\n",
		}, 2048*mib - 512*mib},
		{"no limit anywhere", map[string]string{
			"proc":              "0::/app\n",
			"fs/app/memory.max": "max\n",
			"fs/memory.max":     "max\n",
		}, 0},
		{"no cgroup file", map[string]string{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := tree(t, c.files)
			if got := cgroupSpare(filepath.Join(dir, "proc"), filepath.Join(dir, "fs")); got != c.want {
				t.Errorf("spare %d bytes, want %d", got, c.want)
			}
		})
	}
}
