// Package machine measures the machine tokbench runs on, so that a
// benchmark of a server on it (llama.cpp, Ollama on a laptop) can be
// judged against its own memory bandwidth: `--hardware local`.
//
// Measure reads large buffers from every core at once and keeps the best
// rate of several passes; Local caches the figure per machine, with how
// it was measured, so later runs reuse it. GPUs reads the NVIDIA parts
// from nvidia-smi, where there is one, to pick a catalog entry.
package machine

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tokbench/tokbench/physics"
)

// Info is this machine as measured.
type Info struct {
	CPU         string  `json:"cpu"`
	Cores       int     `json:"cores"`
	MemoryBytes float64 `json:"memory_bytes"`
	// BandwidthBytesPerSec is the best streaming read rate of all cores
	// at once; Method says how it was measured.
	BandwidthBytesPerSec float64   `json:"bandwidth_bytes_per_sec"`
	Method               string    `json:"method"`
	MeasuredAt           time.Time `json:"measured_at"`
}

// Options size a measurement; zero values take the defaults.
type Options struct {
	// BufferBytes is the memory read in all (default 512 MiB, far beyond
	// any last-level cache; less on a machine with little free memory).
	BufferBytes int
	// Passes over the buffers per trial, and trials (the best is kept).
	Passes, Trials int
	Threads        int // default runtime.NumCPU()
}

// Measure reads the machine's memory bandwidth: Threads goroutines each
// scan their own part of BufferBytes (written first, so every page is
// real memory, not the shared zero page) with the runtime's vectorized
// byte search, Passes times per trial; the best trial's bytes per second
// is the figure.
func Measure(ctx context.Context, o Options) (float64, string, error) {
	threads := cmp.Or(o.Threads, runtime.NumCPU())
	total := cmp.Or(o.BufferBytes, 512<<20)
	if avail := memAvailable(); avail > 0 {
		total = min(total, int(avail/4))
	}
	per := total / threads
	if per < 1<<20 {
		return 0, "", fmt.Errorf("%d bytes of free memory are too few to measure bandwidth", total)
	}
	passes, trials := cmp.Or(o.Passes, 4), cmp.Or(o.Trials, 5)
	bufs := make([][]byte, threads)
	for i := range bufs {
		bufs[i] = bytes.Repeat([]byte{0x5a}, per)
	}
	best := 0.0
	for range trials {
		if err := ctx.Err(); err != nil {
			return 0, "", err
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, b := range bufs {
			wg.Go(func() {
				<-start
				for range passes {
					if bytes.IndexByte(b, 0) >= 0 {
						panic("machine: the buffer changed")
					}
				}
			})
		}
		t0 := time.Now()
		close(start)
		wg.Wait()
		if el := time.Since(t0).Seconds(); el > 0 {
			best = max(best, float64(per*threads*passes)/el)
		}
	}
	method := fmt.Sprintf("streaming read of %d MiB by %d threads at once (vectorized byte scan), best of %d trials of %d passes",
		per*threads>>20, threads, trials, passes)
	return best, method, nil
}

// CacheFile is where Local keeps the measurement: the user's cache
// directory (os.UserCacheDir), tokbench/machine.json.
func CacheFile() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "tokbench", "machine.json"), nil
}

// Local is this machine: its CPU, cores and memory as the system says,
// and its bandwidth from the cache at path when one of this same machine
// is there, else measured now and written there (a path that cannot be
// written is no error: the figure is measured again next time). cached
// reports whether the figure came from the cache.
func Local(ctx context.Context, path string) (info Info, cached bool, err error) {
	info = Info{CPU: cpuModel(), Cores: runtime.NumCPU(), MemoryBytes: memTotal()}
	if path != "" {
		if b, err := os.ReadFile(path); err == nil {
			var c Info
			if json.Unmarshal(b, &c) == nil && c.CPU == info.CPU && c.Cores == info.Cores &&
				c.MemoryBytes == info.MemoryBytes && c.BandwidthBytesPerSec > 0 {
				return c, true, nil
			}
		}
	}
	bw, method, err := Measure(ctx, Options{})
	if err != nil {
		return info, false, err
	}
	info.BandwidthBytesPerSec, info.Method, info.MeasuredAt = bw, method, time.Now().UTC().Truncate(time.Second)
	if path != "" {
		if b, err := json.MarshalIndent(info, "", "  "); err == nil && os.MkdirAll(filepath.Dir(path), 0o755) == nil {
			_ = os.WriteFile(path, append(b, '\n'), 0o644)
		}
	}
	return info, false, nil
}

// Hardware is the machine as a catalog entry for the physics: its
// measured bandwidth (so the ceiling is what this machine reads, not a
// datasheet's peak) and memory, llama.cpp's CPU calibration, and no
// compute figure (none is measured: the prefill floor is not computed).
func (i Info) Hardware() physics.Hardware {
	h := physics.Hardware{
		Name: "local", Class: physics.ClassCPU, MemoryBytes: i.MemoryBytes, BandwidthBytesPerSec: i.BandwidthBytesPerSec,
		Source: fmt.Sprintf("this machine (%s, %d cores, %.0f GB): %.1f GB/s measured %s by a %s",
			i.CPU, i.Cores, i.MemoryBytes/1e9, i.BandwidthBytesPerSec/1e9, i.MeasuredAt.Format("2006-01-02"), i.Method),
	}
	cpu, _ := physics.LookupHardware("epyc-9004") // the CPU class's calibration
	h.MBU, h.MFUPrefill, h.MFUDecode = cpu.MBU, cpu.MFUPrefill, cpu.MFUDecode
	h.StepOverhead, h.LayerOverhead = cpu.StepOverhead, cpu.LayerOverhead
	return h
}

// GPU is one NVIDIA part as nvidia-smi names it.
type GPU struct {
	Name        string
	MemoryBytes float64
}

// ErrNoNvidiaSMI: nvidia-smi is not on PATH (no NVIDIA driver).
var ErrNoNvidiaSMI = errors.New("nvidia-smi not found")

// GPUs lists the NVIDIA GPUs nvidia-smi reports.
func GPUs(ctx context.Context) ([]GPU, error) {
	bin, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, ErrNoNvidiaSMI
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	var gpus []GPU
	for line := range strings.Lines(string(out)) {
		name, mem, ok := strings.Cut(strings.TrimSpace(line), ",")
		if !ok {
			continue
		}
		mib, _ := strconv.ParseFloat(strings.TrimSpace(mem), 64)
		gpus = append(gpus, GPU{Name: strings.TrimSpace(name), MemoryBytes: mib * (1 << 20)})
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("nvidia-smi listed no GPU: %q", strings.TrimSpace(string(out)))
	}
	return gpus, nil
}

// CatalogName is the catalog entry for an NVIDIA part's name, "" when
// the catalog has none.
func CatalogName(g GPU) string {
	n := strings.ToLower(g.Name)
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(n, x) {
				return false
			}
		}
		return true
	}
	switch {
	case has("gb200"):
		return "gb200"
	case has("b200"):
		return "b200"
	case has("h200"):
		return "h200-sxm"
	case has("h100", "pcie"):
		return "h100-pcie"
	case has("h100"):
		return "h100-sxm"
	case has("a100") && g.MemoryBytes > 0 && g.MemoryBytes < 50e9:
		return "a100-40gb"
	case has("a100"):
		return "a100-80gb"
	case has("l40s"):
		return "l40s"
	case has("l4"):
		return "l4"
	case has("a10g"):
		return "a10g"
	case has("rtx", "5090"):
		return "rtx-5090"
	case has("rtx", "4090"):
		return "rtx-4090"
	}
	return ""
}

// cpuModel is /proc/cpuinfo's first model name ("" where there is none).
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// memTotal and memAvailable are /proc/meminfo's figures in bytes (0 where
// there are none).
func memTotal() float64     { return meminfo("MemTotal") }
func memAvailable() float64 { return meminfo("MemAvailable") }

// MemoryAvailable is the memory available to a new process, in bytes
// (/proc/meminfo's MemAvailable; 0 where there is none).
func MemoryAvailable() float64 { return memAvailable() }

func meminfo(key string) float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0
		}
		kb, _ := strconv.ParseFloat(f[0], 64)
		return kb * 1024
	}
	return 0
}
