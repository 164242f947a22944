// Package profile holds the use-case profiles of `tokbench bench --profile`:
// each sets a workload and the service-level objectives that use case needs,
// so one command answers "is this endpoint good enough for chat?".
//
// The thresholds follow the figures commonly quoted for each use case (see
// docs/metrics.md): chat wants a short TTFT and at least 30–40 tokens/s per
// user (faster than reading); code completion wants ~80 ms TTFT and a
// ~20-token suggestion within 200–400 ms (≥ 100 tokens/s); voice wants TTFT
// under 150 ms and ≥ 60 tokens/s (faster than speech synthesis consumes
// it); batch cares only about aggregate throughput and cost; agents care
// about the wall-clock of chained calls.
package profile

import (
	"fmt"
	"sort"
	"strings"
)

// Profile is one use case.
type Profile struct {
	Name         string
	Description  string
	InputTokens  int
	OutputTokens int
	// SLOs in the syntax of metrics.ParseSLOs; empty for batch.
	SLOs string
	// Steps > 1 runs agent chains of that many dependent calls.
	Steps int
}

var profiles = map[string]Profile{
	"chat": {Name: "chat", Description: "interactive chat: answer starts within a second, streams faster than reading",
		InputTokens: 1024, OutputTokens: 256, SLOs: "ttft_p95<=1s,tps_p5>=30,tps_p50>=40"},
	"code": {Name: "code", Description: "code completion: ~80 ms to first token, a 20-token suggestion within 400 ms",
		InputTokens: 1536, OutputTokens: 20, SLOs: "ttft_p50<=80ms,ttft_p95<=150ms,e2e_p95<=400ms,tps_p50>=100"},
	"voice": {Name: "voice", Description: "voice agents: first token under 150 ms, faster than speech",
		InputTokens: 512, OutputTokens: 128, SLOs: "ttft_p95<=150ms,tps_p5>=60"},
	"batch": {Name: "batch", Description: "offline batch: aggregate throughput and cost per token only",
		InputTokens: 1024, OutputTokens: 512},
	"agent": {Name: "agent", Description: "agents: wall-clock of 5 chained calls of 600 tokens each",
		InputTokens: 1024, OutputTokens: 600, Steps: 5, SLOs: "tps_p5>=40"},
}

// Names lists the profiles.
func Names() []string {
	var n []string
	for k := range profiles {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Lookup returns a profile by name.
func Lookup(name string) (Profile, error) {
	p, ok := profiles[strings.ToLower(name)]
	if !ok {
		return Profile{}, fmt.Errorf("unknown profile %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return p, nil
}
