package machine

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Load is how busy the machine was while a figure was measured: any other
// process running then took cores and memory bandwidth from the reader,
// so the figure reads low.
type Load struct {
	// LoadAvg1 is the one-minute load average when the measurement began
	// (/proc/loadavg): context, since it lags and counts the reader too.
	LoadAvg1 float64 `json:"load_avg_1m"`
	// OtherCPUCores is the CPU every other process (and the hypervisor's
	// steal) used during the measurement, in cores: the machine's busy
	// time from /proc/stat less this process's own (getrusage).
	OtherCPUCores float64 `json:"other_cpu_cores"`
}

// Busy reports whether other processes used more than limit cores.
func (l Load) Busy(limit float64) bool { return l.OtherCPUCores > limit }

func (l Load) String() string {
	return fmt.Sprintf("other processes %.2f cores, load average %.2f", l.OtherCPUCores, l.LoadAvg1)
}

// A LoadProbe reads the machine's load around a measurement: it is called
// before it, and the function it returns after it. ok is false where the
// system does not say (no /proc).
type LoadProbe func() (done func() (l Load, ok bool))

// ProcLoad is the LoadProbe of Linux's /proc/stat, /proc/loadavg and this
// process's getrusage.
func ProcLoad() func() (Load, bool) {
	avg := loadAvg1()
	busy0, ok0 := procBusy()
	self0, okSelf := selfCPU()
	t0 := time.Now()
	return func() (Load, bool) {
		busy1, ok1 := procBusy()
		self1, _ := selfCPU()
		el := time.Since(t0)
		if !ok0 || !ok1 || !okSelf || el <= 0 {
			return Load{LoadAvg1: avg}, false
		}
		other := (busy1 - busy0 - (self1 - self0)).Seconds() / el.Seconds()
		return Load{LoadAvg1: avg, OtherCPUCores: max(other, 0)}, true
	}
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux
// architecture Go runs on.
const clockTicks = 100

// procBusy is the CPU time every core spent not idle since boot: user,
// nice, system, irq, softirq and steal of /proc/stat's first line (guest
// time is inside user).
func procBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	return parseStat(string(b))
}

// parseStat is procBusy of /proc/stat's text.
func parseStat(stat string) (time.Duration, bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var ticks float64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system [idle iowait] irq softirq steal
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0, false
		}
		ticks += v
	}
	return time.Duration(ticks / clockTicks * float64(time.Second)), true
}

func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
