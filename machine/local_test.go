package machine

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// quiet and busy are loads as the probe reads them: nothing else
// running, and a CPU hog beside the reader.
var (
	quiet = &Load{LoadAvg1: 0.3, OtherCPUCores: 0.04}
	busy  = &Load{LoadAvg1: 3.1, OtherCPUCores: 1.6}
)

var now = time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)

// fake is a machine whose measurements read what the test says.
type fake struct {
	measure, check []Measurement // consumed in order
	measured       int           // full measurements taken
}

func (f *fake) opts(path string) LocalOptions {
	return LocalOptions{
		Path: path, Now: func() time.Time { return now },
		Measure: func(context.Context) (Measurement, error) {
			m := f.measure[f.measured]
			f.measured++
			return m, nil
		},
		Check: func(context.Context) (Measurement, error) {
			m := f.check[0]
			f.check = f.check[1:]
			return m, nil
		},
	}
}

func gbs(v float64, l *Load, at time.Time) Measurement {
	return Measurement{BandwidthBytesPerSec: v * 1e9, Method: "fake", MeasuredAt: at, Load: l}
}

func readCache(t *testing.T, path string) (Info, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return Info{}, false
	}
	var c Info
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("cache: %v", err)
	}
	return c, true
}

// TestBusyMeasurementIsNotCached is the case: 8.0 GB/s measured
// beside a CPU hog is used once, said to be doubtful, and not cached; the
// next quiet measurement (13.4) is cached, and a later busy one does not
// replace it, even when asked to measure again.
func TestBusyMeasurementIsNotCached(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokbench", "machine.json")
	f := &fake{measure: []Measurement{gbs(8.0, busy, now), gbs(13.4, quiet, now), gbs(8.1, busy, now)}}
	info, err := Local(context.Background(), f.opts(path))
	if err != nil {
		t.Fatal(err)
	}
	if info.BandwidthBytesPerSec != 8.0e9 || !strings.Contains(info.Doubt, "busy machine (other processes used 1.60 of its") {
		t.Fatalf("busy measurement: %.1f GB/s, doubt %q", info.BandwidthBytesPerSec/1e9, info.Doubt)
	}
	if h := info.Hardware(); h.Doubt != info.Doubt || !strings.Contains(h.Source, "not cached") {
		t.Errorf("hardware of a busy figure: doubt %q, source %q", h.Doubt, h.Source)
	}
	if _, ok := readCache(t, path); ok {
		t.Fatal("a busy measurement was cached")
	}

	info, err = Local(context.Background(), f.opts(path))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := readCache(t, path)
	if info.BandwidthBytesPerSec != 13.4e9 || info.Doubt != "" || !ok || c.BandwidthBytesPerSec != 13.4e9 || c.Load == nil || *c.Load != *quiet {
		t.Fatalf("quiet measurement: %.1f GB/s, doubt %q; cache %+v (%v)", info.BandwidthBytesPerSec/1e9, info.Doubt, c, ok)
	}

	// Cached and confirmed by a quiet quick check: no full measurement.
	f.check = []Measurement{gbs(12.9, quiet, now)}
	info, err = Local(context.Background(), f.opts(path))
	if err != nil {
		t.Fatal(err)
	}
	if f.measured != 2 || info.BandwidthBytesPerSec != 13.4e9 || !strings.Contains(info.Source, "confirmed by a quick check (12.9 GB/s)") {
		t.Fatalf("cached: %d measurements, %.1f GB/s, %q", f.measured, info.BandwidthBytesPerSec/1e9, info.Source)
	}

	// Asked to measure again on a busy machine: the quiet figure stays.
	o := f.opts(path)
	o.Remeasure = true
	info, err = Local(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	c, _ = readCache(t, path)
	if f.measured != 3 || info.BandwidthBytesPerSec != 13.4e9 || info.Doubt != "" || len(c.Measurements) != 1 || c.BandwidthBytesPerSec != 13.4e9 ||
		!strings.Contains(info.Source, "8.1 GB/s measured now on a busy machine") {
		t.Fatalf("remeasured while busy: %.1f GB/s, %q; cache %+v", info.BandwidthBytesPerSec/1e9, info.Source, c)
	}
}

// TestPoisonedCacheIsReplaced: a cache written before loads were
// recorded (the 8.0 GB/s) is not trusted; nor is one older than
// MaxAge; nor one a quiet quick check reads far from.
func TestPoisonedCacheIsReplaced(t *testing.T) {
	for _, c := range []struct {
		name   string
		cached Info
		check  []Measurement
		why    string
	}{
		{"no load recorded", Info{Measurement: gbs(8.0, nil, now.Add(-time.Hour))}, nil, "no record of the machine's load"},
		{"busy", Info{Measurement: gbs(8.0, busy, now.Add(-time.Hour))}, nil, "measured on a busy machine"},
		{"old", Info{Measurements: []Measurement{gbs(13.0, quiet, now.Add(-40*24*time.Hour))}}, nil, "is 40 days old"},
		{"check disagrees", Info{Measurements: []Measurement{gbs(8.0, quiet, now.Add(-time.Hour))}}, []Measurement{gbs(13.2, quiet, now)},
			"a quiet quick check read 13.2 GB/s against the cached 8.0 GB/s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "machine.json")
			c.cached.CPU, c.cached.Cores, c.cached.MemoryBytes = cpuModel(), runtime.NumCPU(), memTotal()
			if c.cached.BandwidthBytesPerSec == 0 {
				c.cached.Measurement = c.cached.Measurements[0]
			}
			b, _ := json.Marshal(c.cached)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			f := &fake{measure: []Measurement{gbs(13.4, quiet, now)}, check: c.check}
			info, err := Local(context.Background(), f.opts(path))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := readCache(t, path)
			if f.measured != 1 || info.BandwidthBytesPerSec != 13.4e9 || !strings.Contains(info.Source, c.why) ||
				got.BandwidthBytesPerSec != 13.4e9 || len(got.Measurements) != 1 {
				t.Fatalf("%d measurements, %.1f GB/s, source %q (want %q); cache %+v", f.measured, info.BandwidthBytesPerSec/1e9, info.Source, c.why, got)
			}
		})
	}
}

// TestCacheKeepsTheBestWithDates: quiet measurements accumulate, best
// first with their dates, up to Keep; the best is the figure, and its
// age is named where it is used.
func TestCacheKeepsTheBestWithDates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "machine.json")
	f := &fake{measure: []Measurement{
		gbs(13.1, quiet, now.Add(-3*time.Hour)), gbs(13.8, quiet, now.Add(-2*time.Hour)), gbs(13.4, quiet, now.Add(-time.Hour)),
	}}
	var info Info
	for range 3 {
		o := f.opts(path)
		o.Remeasure, o.Keep = true, 2
		var err error
		if info, err = Local(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := readCache(t, path)
	if len(c.Measurements) != 2 || c.Measurements[0].BandwidthBytesPerSec != 13.8e9 || c.Measurements[1].BandwidthBytesPerSec != 13.4e9 ||
		!c.Measurements[0].MeasuredAt.Equal(now.Add(-2*time.Hour)) {
		t.Fatalf("cache keeps %+v", c.Measurements)
	}
	if info.BandwidthBytesPerSec != 13.8e9 || !strings.Contains(info.Source, "best of 2 quiet measurements; 13.4 GB/s measured now") {
		t.Fatalf("figure %.1f GB/s, %q", info.BandwidthBytesPerSec/1e9, info.Source)
	}
	h := info.Hardware()
	for _, want := range []string{"13.8 GB/s measured 2026-12-02 14:00 UTC, 2 h ago", "other processes 0.04 cores, load average 0.30", "best of 2"} {
		if !strings.Contains(h.Source, want) {
			t.Errorf("source %q lacks %q", h.Source, want)
		}
	}
	if h.Name != "local" || h.BandwidthBytesPerSec != 13.8e9 || h.MBU <= 0 || h.Doubt != "" {
		t.Errorf("hardware %+v", h)
	}
}

func TestParseStat(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	got, ok := parseStat("cpu  100 50 30 9000 70 5 10 5 40 0\ncpu0 1 2 3\n")
	if want := 2 * time.Second; !ok || got != want { // 100+50+30+5+10+5 ticks at 100 Hz
		t.Fatalf("parseStat = %v %v, want %v", got, ok, want)
	}
	if _, ok := parseStat("intr 1 2 3\n"); ok {
		t.Fatal("parseStat took a line that is not cpu")
	}
}

// TestProcLoadSeesAnotherProcess: a CPU hog in a child process counts as
// another process's CPU, at least what the hog itself used (its rusage),
// while this process's own busy loop, run at the same time, is not
// counted: other and own CPU together fit in the cores' time.
func TestProcLoadSeesAnotherProcess(t *testing.T) {
	if _, ok := procBusy(); !ok {
		t.Skip("no /proc/stat")
	}
	if _, ok := selfCPU(); !ok {
		t.Skip("no getrusage")
	}
	const tick = 30 * time.Millisecond // /proc/stat's 10 ms ticks, on three readings
	self0, _ := selfCPU()
	t0 := time.Now()
	done := ProcLoad()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for time.Since(t0) < 300*time.Millisecond { // this process's own loop
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	l, ok := done()
	el := time.Since(t0)
	self1, _ := selfCPU()
	if !ok {
		t.Fatal("ProcLoad: not ok on Linux")
	}
	hog := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	other := time.Duration(l.OtherCPUCores * float64(el))
	own := self1 - self0
	t.Logf("over %v: hog %v, own %v, other processes %v (%s)", el, hog, own, other, l)
	if other < hog-tick {
		t.Errorf("a hog using %v of CPU: other processes counted %v", hog, other)
	}
	if capacity := time.Duration(runtime.NumCPU()) * el; other+own > capacity+tick {
		t.Errorf("other %v + own %v exceed the cores' %v: this process's CPU was counted as another's", other, own, capacity)
	}
}
