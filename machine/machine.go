// Package machine measures the machine tokbench runs on, so that a
// benchmark of a server on it (llama.cpp, Ollama on a laptop) can be
// judged against its own memory bandwidth: `--hardware local`.
//
// Measure reads large buffers from every core at once and keeps the best
// rate of several passes, with the load other processes put on the
// machine meanwhile; Local caches the quiet figures per machine, with how
// and when they were measured, so later runs reuse the best of them, and
// says when the figure in use is doubtful. GPUs reads the NVIDIA parts
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
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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
	// Measurement is the bandwidth figure in use: the best quiet one kept.
	Measurement
	// Measurements are the quiet measurements the cache keeps, best
	// first, each with its date and load.
	Measurements []Measurement `json:"measurements,omitempty"`
	// Source says where the figure came from this time (the cache,
	// confirmed or not by a quick check, or a measurement now and why);
	// Doubt, when not empty, why it may read low. Neither is cached.
	Source string `json:"-"`
	Doubt  string `json:"-"`
	// At is when Local was asked, the instant the figure's age is from.
	At time.Time `json:"-"`
}

// Measurement is one reading of the machine's memory bandwidth.
type Measurement struct {
	// BandwidthBytesPerSec is the best streaming read rate of all cores
	// at once; Method says how it was measured.
	BandwidthBytesPerSec float64   `json:"bandwidth_bytes_per_sec"`
	Method               string    `json:"method"`
	MeasuredAt           time.Time `json:"measured_at"`
	// Load is how busy the machine was during it; nil where that is
	// unknown (a cache from before tokbench recorded it, no /proc).
	Load *Load `json:"load,omitempty"`
}

// Options size a measurement; zero values take the defaults.
type Options struct {
	// BufferBytes is the memory read in all (default 512 MiB, far beyond
	// any last-level cache; less on a machine with little free memory).
	BufferBytes int
	// Passes over the buffers per trial, and trials (the best is kept).
	Passes, Trials int
	Threads        int // default runtime.NumCPU()
	// Probe reads the machine's load around the trials (default
	// ProcLoad).
	Probe LoadProbe
}

// Measure reads the machine's memory bandwidth: Threads goroutines each
// scan their own part of BufferBytes (written first, so every page is
// real memory, not the shared zero page) with the runtime's vectorized
// byte search, Passes times per trial; the best trial's bytes per second
// is the figure, and the load of other processes during the trials is
// recorded beside it.
func Measure(ctx context.Context, o Options) (Measurement, error) {
	threads := cmp.Or(o.Threads, runtime.NumCPU())
	total := cmp.Or(o.BufferBytes, 512<<20)
	if avail := memAvailable(); avail > 0 {
		total = min(total, int(avail/4))
	}
	per := total / threads
	if per < 1<<20 {
		return Measurement{}, fmt.Errorf("%d bytes of free memory are too few to measure bandwidth", total)
	}
	passes, trials := cmp.Or(o.Passes, 4), cmp.Or(o.Trials, 5)
	probe := o.Probe
	if probe == nil {
		probe = ProcLoad
	}
	bufs := make([][]byte, threads)
	for i := range bufs {
		bufs[i] = bytes.Repeat([]byte{0x5a}, per)
	}
	done := probe()
	best := 0.0
	for range trials {
		if err := ctx.Err(); err != nil {
			return Measurement{}, err
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
	m := Measurement{
		BandwidthBytesPerSec: best, MeasuredAt: time.Now().UTC().Truncate(time.Second),
		Method: fmt.Sprintf("streaming read of %d MiB by %d threads at once (vectorized byte scan), best of %d trials of %d passes",
			per*threads>>20, threads, trials, passes),
	}
	if l, ok := done(); ok {
		m.Load = &l
	}
	return m, nil
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

// System is this machine as the system describes it: its CPU model,
// cores and memory, no bandwidth. A cache is of this machine when these
// match.
func System() Info {
	return Info{CPU: cpuModel(), Cores: runtime.NumCPU(), MemoryBytes: memTotal()}
}

// LocalOptions say where Local keeps its figures and when it trusts
// them; zero values take the defaults.
type LocalOptions struct {
	// Path is the cache file ("": none, measured every time).
	Path string
	// Remeasure measures now whatever the cache holds.
	Remeasure bool
	// MaxAge is how long a cached figure is used (default 30 days).
	MaxAge time.Duration
	// BusyCores is the CPU other processes may use during a measurement,
	// in cores, before it counts as busy: not cached, and doubtful when
	// it is all there is (default 0.25).
	BusyCores float64
	// Keep is how many quiet measurements the cache keeps (default 5).
	Keep int
	// CheckTolerance is how far a quiet quick check may read from the
	// cached figure before the cache is measured again (default 0.15).
	CheckTolerance float64
	// Measure takes a full measurement, Check a quick one (defaults:
	// Measure with its defaults, and with 128 MiB, 2 passes, 2 trials).
	Measure, Check func(context.Context) (Measurement, error)
	// Now is the clock ages are judged by (default time.Now).
	Now func() time.Time
}

func (o *LocalOptions) defaults() {
	o.MaxAge = cmp.Or(o.MaxAge, 30*24*time.Hour)
	o.BusyCores = cmp.Or(o.BusyCores, 0.25)
	o.Keep = cmp.Or(o.Keep, 5)
	o.CheckTolerance = cmp.Or(o.CheckTolerance, 0.15)
	if o.Measure == nil {
		o.Measure = func(ctx context.Context) (Measurement, error) { return Measure(ctx, Options{}) }
	}
	if o.Check == nil {
		o.Check = func(ctx context.Context) (Measurement, error) {
			return Measure(ctx, Options{BufferBytes: 128 << 20, Passes: 2, Trials: 2})
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Local is this machine: its CPU, cores and memory as the system says,
// and its bandwidth. A bandwidth measured while other processes ran
// reads low, so only quiet measurements are cached (at o.Path, the best
// o.Keep of them with their dates), and the best quiet one younger than
// o.MaxAge is used. A cached figure is checked by a quick measurement;
// when that one, quiet, reads more than o.CheckTolerance away, the cache
// no longer describes the machine and it is measured again. With no
// quiet figure at all, the one measured now is used and Doubt says why
// it may read low. A path that cannot be written is no error: the
// figure is measured again next time.
func Local(ctx context.Context, o LocalOptions) (Info, error) {
	o.defaults()
	info := System()
	info.At = o.Now().UTC()
	kept, why := o.cached(info)
	if o.Remeasure {
		why = "asked to measure again"
	} else if len(kept) > 0 {
		best := kept[0]
		chk, err := o.Check(ctx)
		switch {
		case err != nil:
			info.Source = fmt.Sprintf("cached, unchecked (%v)", err)
		case chk.Load == nil || chk.Load.Busy(o.BusyCores):
			info.Source = fmt.Sprintf("cached; a quick check read %.1f GB/s on a busy machine (%s), not compared", chk.BandwidthBytesPerSec/1e9, loadText(chk.Load))
		case math.Abs(chk.BandwidthBytesPerSec/best.BandwidthBytesPerSec-1) <= o.CheckTolerance:
			info.Source = fmt.Sprintf("cached, confirmed by a quick check (%.1f GB/s)", chk.BandwidthBytesPerSec/1e9)
		default:
			why = fmt.Sprintf("a quiet quick check read %.1f GB/s against the cached %.1f GB/s", chk.BandwidthBytesPerSec/1e9, best.BandwidthBytesPerSec/1e9)
			kept = nil // the cache no longer describes this machine
		}
		if kept != nil {
			info.Measurement, info.Measurements = best, kept
			return info, nil
		}
	}
	m, err := o.Measure(ctx)
	if err != nil {
		return info, err
	}
	if m.MeasuredAt.IsZero() {
		m.MeasuredAt = info.At.Truncate(time.Second)
	}
	quiet := m.Load != nil && !m.Load.Busy(o.BusyCores)
	switch {
	case quiet:
		kept = append(kept, m)
		slices.SortStableFunc(kept, func(a, b Measurement) int { return cmp.Compare(b.BandwidthBytesPerSec, a.BandwidthBytesPerSec) })
		kept = kept[:min(len(kept), o.Keep)]
		info.Measurement, info.Measurements = kept[0], kept
		info.Source = "measured now (" + why + ")"
		if kept[0] != m {
			info.Source = fmt.Sprintf("best of %d quiet measurements; %.1f GB/s measured now (%s)", len(kept), m.BandwidthBytesPerSec/1e9, why)
		}
		o.write(info)
	case len(kept) > 0:
		info.Measurement, info.Measurements = kept[0], kept
		info.Source = fmt.Sprintf("cached; %.1f GB/s measured now on a busy machine (%s), not kept", m.BandwidthBytesPerSec/1e9, loadText(m.Load))
	default:
		info.Measurement = m
		info.Source = "measured now (" + why + "), not cached"
		if m.Load == nil {
			info.Doubt = "the machine's load during the measurement is unknown: it may read low, so ceilings low and MBUs high"
			break
		}
		info.Doubt = fmt.Sprintf("measured on a busy machine (other processes used %.2f of its %d cores, load average %.2f): it likely reads low, so ceilings read low and MBUs high; measure again when the machine is quiet",
			m.Load.OtherCPUCores, info.Cores, m.Load.LoadAvg1)
	}
	return info, nil
}

func loadText(l *Load) string {
	if l == nil {
		return "load unknown"
	}
	return l.String()
}

// cached is the cache's quiet measurements of this machine younger than
// MaxAge, best first, or why there are none.
func (o *LocalOptions) cached(info Info) ([]Measurement, string) {
	if o.Path == "" {
		return nil, "no cache"
	}
	b, err := os.ReadFile(o.Path)
	if err != nil {
		return nil, "nothing cached"
	}
	var c Info
	if json.Unmarshal(b, &c) != nil {
		return nil, "the cache is unreadable"
	}
	if c.CPU != info.CPU || c.Cores != info.Cores || c.MemoryBytes != info.MemoryBytes {
		return nil, "the cache is of another machine"
	}
	all := c.Measurements
	if len(all) == 0 && c.BandwidthBytesPerSec > 0 {
		all = []Measurement{c.Measurement} // a cache from before tokbench kept several
	}
	var kept []Measurement
	why := "nothing cached"
	for _, m := range all {
		switch age := info.At.Sub(m.MeasuredAt); {
		case !(m.BandwidthBytesPerSec > 0):
		case m.Load == nil:
			why = fmt.Sprintf("the cached %.1f GB/s has no record of the machine's load then", m.BandwidthBytesPerSec/1e9)
		case m.Load.Busy(o.BusyCores):
			why = fmt.Sprintf("the cached %.1f GB/s was measured on a busy machine (%s)", m.BandwidthBytesPerSec/1e9, m.Load)
		case age > o.MaxAge:
			why = fmt.Sprintf("the cached %.1f GB/s is %s old", m.BandwidthBytesPerSec/1e9, Age(age))
		default:
			kept = append(kept, m)
		}
	}
	slices.SortStableFunc(kept, func(a, b Measurement) int { return cmp.Compare(b.BandwidthBytesPerSec, a.BandwidthBytesPerSec) })
	return kept, why
}

func (o *LocalOptions) write(info Info) {
	if o.Path == "" {
		return
	}
	if b, err := json.MarshalIndent(info, "", "  "); err == nil && os.MkdirAll(filepath.Dir(o.Path), 0o755) == nil {
		_ = os.WriteFile(o.Path, append(b, '\n'), 0o644)
	}
}

// Age is a duration as a reader says an age: "40 s", "12 min", "5 h",
// "3 days".
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

// Hardware is the machine as a catalog entry for the physics: its
// measured bandwidth (so the ceiling is what this machine reads, not a
// datasheet's peak) and memory, llama.cpp's CPU calibration, and no
// compute figure (none is measured: the prefill floor is not computed).
// Its Source names the figure's date, age and where it came from; its
// Doubt is the Info's.
func (i Info) Hardware() physics.Hardware {
	h := physics.Hardware{
		Name: "local", Class: physics.ClassCPU, MemoryBytes: i.MemoryBytes, BandwidthBytesPerSec: i.BandwidthBytesPerSec,
		Source: fmt.Sprintf("this machine (%s, %d cores, %.0f GB): %.1f GB/s measured %s, %s ago, %s, %s, by a %s",
			i.CPU, i.Cores, i.MemoryBytes/1e9, i.BandwidthBytesPerSec/1e9, i.MeasuredAt.Format("2006-01-02 15:04 UTC"),
			Age(i.At.Sub(i.MeasuredAt)), loadText(i.Load), cmp.Or(i.Source, "source unknown"), i.Method),
		Doubt: i.Doubt,
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
