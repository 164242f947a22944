package benchmark

import (
	"github.com/dustin/go-humanize"

	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/machine"
	"github.com/tokbench/tokbench/metrics"
)

// Host is what the machine allows a run: how many files the process may
// open and how much memory is available. A zero field is unknown and not
// checked.
type Host struct {
	OpenFiles   int
	MemoryBytes float64
}

// LocalHost is this machine's Host: the open-file limit (RLIMIT_NOFILE,
// which Go raises to the hard limit at start) and /proc/meminfo's
// MemAvailable.
func LocalHost() Host {
	return Host{OpenFiles: openFileLimit(), MemoryBytes: machine.MemoryAvailable()}
}

// What a level costs the client, by estimate (measured on this tree: a
// synthetic prompt is 5–6 bytes a token; a stream in flight holds its
// connection's buffers, two goroutines and its request body twice):
//   - each planned request, made before the level starts: its prompt
//     and 512 bytes;
//   - each stream in flight: 16 KiB, twice its prompt, 32 bytes an
//     output token (the chunks' stamps).
const (
	promptBytesPerToken = 6
	requestOverhead     = 512
	streamOverhead      = 16 << 10
	spareFiles          = 64 // the process's own: stdio, the run directory, probes
)

// CheckHost refuses a plan the machine cannot run, before any request:
// more streams in flight than the process may open connections, or a
// level whose prompts and streams would need more memory than is
// available. The error names the Plan field and the numbers.
func (p *Plan) CheckHost(h Host) error {
	in, out := p.Workload.Lengths()
	for _, lv := range p.levels() {
		streams, field := lv.Load.Concurrency, "Load.Concurrency"
		if lv.Load.Mode == metrics.ModeRate {
			streams, field = lv.MaxInFlight, "Load.MaxInFlight"
		}
		if h.OpenFiles > 0 && streams+spareFiles > h.OpenFiles {
			return fieldErrorf(field, "%d streams at %s need %d connections, and this process may open %d files (ulimit -n): raise the limit, lower the streams, or split the load over machines in shards",
				streams, lv.Load, streams, h.OpenFiles)
		}
		if h.MemoryBytes <= 0 {
			continue
		}
		li := in
		if lv.Load.InputTokens > 0 {
			li = lv.Load.InputTokens
		}
		prompt := float64((p.Workload.PrefixTokens + li) * promptBytesPerToken)
		need := float64(plannedRequests(lv))*(prompt+requestOverhead) + float64(streams)*(streamOverhead+2*prompt+32*float64(out))
		if need > h.MemoryBytes {
			return fieldErrorf(loadField(lv), "%s would need about %s of memory for its %d prompts of %d tokens and %d streams, and %s is available: lower the users, the requests or the prompt length, or split the load into shards",
				lv.Load, humanize.IBytes(uint64(need)), plannedRequests(lv), p.Workload.PrefixTokens+li, streams, humanize.IBytes(uint64(h.MemoryBytes)))
		}
	}
	return nil
}

// plannedRequests is how many requests a level makes before it starts
// (as the run's source does).
func plannedRequests(lv load.Level) int {
	n := lv.Requests * max(lv.Steps, 1)
	if lv.Duration > 0 && lv.Requests == 0 {
		n = max(256, 4*lv.Load.Concurrency)
	}
	return n
}

func loadField(lv load.Level) string {
	if lv.Load.Mode == metrics.ModeRate {
		return "Load.Rates"
	}
	return "Load.Concurrency"
}
