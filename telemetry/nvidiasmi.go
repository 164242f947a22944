package telemetry

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// NvidiaSMIQuery is the query nvidia-smi repeats: power.draw (W),
// utilization.gpu and utilization.memory (%, the fraction of the last
// sample period a kernel ran, and memory was read or written),
// memory.used (MiB), clocks.mem (MHz).
const NvidiaSMIQuery = "power.draw,utilization.gpu,utilization.memory,memory.used,clocks.mem"

// NvidiaSMI samples `nvidia-smi --query-gpu=NvidiaSMIQuery
// --format=csv,noheader,nounits -lms N` until Close, which ends the
// process. It prints one line per GPU per period; gpus lines are one
// Sample.
func NvidiaSMI(ctx context.Context, gpus int, every time.Duration) (*Sampler, error) {
	bin, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, ErrNoGPU
	}
	gpus = max(gpus, 1)
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, bin, "--query-gpu="+NvidiaSMIQuery, "--format=csv,noheader,nounits",
		"-lms", strconv.Itoa(max(int(every/time.Millisecond), 1)))
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	s := newSampler(ctx, "nvidia-smi", func(ctx context.Context, s *Sampler) {
		// Close cancels ctx, the sampler's: that ends the process, and its
		// output with it.
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		defer cancel()
		sc := bufio.NewScanner(out)
		var group []gpuReading
		for sc.Scan() {
			r, err := parseNvidiaSMI(sc.Text())
			if err != nil {
				s.fail(err)
				continue
			}
			if group = append(group, r); len(group) == gpus {
				s.add(fold(group, time.Now()))
				group = group[:0]
			}
		}
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			s.fail(fmt.Errorf("nvidia-smi: %w", err))
		}
	})
	return s, nil
}

// gpuReading is one GPU's line; a field nvidia-smi gives as [N/A] or
// [Not Supported] is NaN.
type gpuReading struct {
	power, util, memUtil, memUsedMiB, memClock float64
}

func parseNvidiaSMI(line string) (gpuReading, error) {
	f := strings.Split(line, ",")
	if len(f) != 5 {
		return gpuReading{}, fmt.Errorf("nvidia-smi: want %d comma-separated fields (%s), got %q", 5, NvidiaSMIQuery, line)
	}
	v := make([]float64, 5)
	for i, s := range f {
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			if strings.HasPrefix(strings.TrimSpace(s), "[") { // [N/A], [Not Supported]
				x = nan
			} else {
				return gpuReading{}, fmt.Errorf("nvidia-smi: field %d of %q: %v", i+1, line, err)
			}
		}
		v[i] = x
	}
	return gpuReading{v[0], v[1], v[2], v[3], v[4]}, nil
}

var nan = math.NaN()

// fold is one sample of every GPU's reading.
func fold(rs []gpuReading, at time.Time) Sample {
	x := Sample{At: at, GPUs: len(rs), MemoryActivitySource: "nvidia-smi utilization.memory"}
	var mem, sm, clock float64
	var nMem, nSM, nClock int
	for _, r := range rs {
		if finite(r.power) {
			x.PowerWatts += r.power
		}
		if finite(r.memUsedMiB) {
			x.MemoryUsedBytes += r.memUsedMiB * (1 << 20)
		}
		if finite(r.memUtil) {
			mem += r.memUtil / 100
			nMem++
		}
		if finite(r.util) {
			sm += r.util / 100
			nSM++
		}
		if finite(r.memClock) {
			clock += r.memClock
			nClock++
		}
	}
	if nMem > 0 {
		x.MemoryActivity, x.HasMemoryActivity = mem/float64(nMem), true
	}
	if nSM > 0 {
		x.SMActivity, x.HasSMActivity = sm/float64(nSM), true
	}
	if nClock > 0 {
		x.MemClockMHz = clock / float64(nClock)
	}
	return x
}
