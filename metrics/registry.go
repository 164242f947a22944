package metrics

import (
	"fmt"
	"slices"
	"strings"
)

// Metric is one measured quantity, the one place that says what it is
// called, its unit, which way is better, how to read it from a level and
// from one request, and which of its statistics each output keeps. SLOs,
// repeated runs (Repeats), compare and its gates, and CSV all range over
// Registry.
type Metric struct {
	Name        string   // as SLOs, gates and CSV spell it: "ttft", "decode_tps", "output_tps"
	Aliases     []string // other spellings an SLO or gate may use: "tps"
	Label       string   // for people: "TTFT"
	Unit        string   // "ms", "tok/s", "req/s", "" (a fraction)
	LowerBetter bool
	// Dist is the level's distribution of the metric; nil for a level
	// aggregate, which is one number per level (Value).
	Dist  func(*Level) *Stats
	Value func(*Level) float64
	// Sample is one completed request's own value, false when the request
	// has none (a one-token answer's decode rate); nil when no request has
	// one of its own (ITL pools every request's gaps; aggregates).
	Sample func(*Record) (float64, bool)
	// FromSchedule says the metric is a latency from t0: an SLO judges a
	// request by it from the scheduled instant (QueueMs added), so a
	// client that fell behind its schedule cannot hide latency.
	FromSchedule bool
	// Stream says the metric is a figure of a token stream, which an
	// embeddings level has none of: compare leaves it out there.
	Stream bool
	// Has, when set, says whether a level has the metric at all (an
	// embeddings level has no TTFT; a chat level no embedding rate):
	// compare leaves out a metric neither level has.
	Has func(*Level) bool
	// Key are the statistics compare shows for every level; Spread those
	// Repeats keeps the range over the runs of; CSV those CSV gives a
	// column. An aggregate lists "" (itself). Repeats keeps each run's
	// value of every statistic (RunStats).
	Key, Spread, CSV []string
}

// Registry is every metric, in the order outputs list them.
var Registry = []Metric{
	{Name: "ttft", Stream: true, Label: "TTFT", Unit: "ms", LowerBetter: true, FromSchedule: true,
		Dist:   func(l *Level) *Stats { return &l.TTFT },
		Sample: func(r *Record) (float64, bool) { return r.TTFTMs, r.EmbedInputs == 0 }, // an embeddings answer has no first token
		Key:    []string{"p50", "p95", "p99"}, Spread: []string{"p50", "p95"}, CSV: []string{"p50", "p95", "p99", "mean"}},
	{Name: "ttfvt", Stream: true, Label: "TTFVT", Unit: "ms", LowerBetter: true, FromSchedule: true,
		Dist:   func(l *Level) *Stats { return &l.TTFVT },
		Sample: func(r *Record) (float64, bool) { return r.TTFVTMs, r.TTFVTMs > 0 }},
	{Name: "decode_tps", Stream: true, Aliases: []string{"tps"}, Label: "decode TPS", Unit: "tok/s",
		Dist:   func(l *Level) *Stats { return &l.DecodeTPS },
		Sample: (*Record).DecodeTPS,
		Key:    []string{"p50", "p5"}, Spread: []string{"p50", "p5"}, CSV: []string{"p50", "p5", "mean"}},
	{Name: "tpot", Stream: true, Label: "TPOT", Unit: "ms", LowerBetter: true,
		Dist:   func(l *Level) *Stats { return &l.TPOT },
		Sample: (*Record).TPOTMs,
		Key:    []string{"p50"}, Spread: []string{"p50"}, CSV: []string{"p50", "p95"}},
	{Name: "itl", Stream: true, Label: "ITL", Unit: "ms", LowerBetter: true,
		Dist: func(l *Level) *Stats { return &l.ITL },
		CSV:  []string{"p50", "p99"}},
	{Name: "e2e", Stream: true, Label: "E2E", Unit: "ms", LowerBetter: true, FromSchedule: true,
		Dist:   func(l *Level) *Stats { return &l.E2E },
		Sample: func(r *Record) (float64, bool) { return r.E2EMs, r.EmbedInputs == 0 },
		Key:    []string{"p50", "p95"}, Spread: []string{"p50"}, CSV: []string{"p50", "p95"}},
	{Name: "e2e_tps", Stream: true, Label: "E2E TPS", Unit: "tok/s",
		Dist:   func(l *Level) *Stats { return &l.E2ETPS },
		Sample: (*Record).E2ETPS},
	{Name: "output_tps", Stream: true, Label: "output", Unit: "tok/s",
		Value: func(l *Level) float64 { return l.OutputTPS },
		Key:   []string{""}, Spread: []string{""}, CSV: []string{""}},
	{Name: "steady_output_tps", Stream: true, Label: "steady output", Unit: "tok/s",
		Value: func(l *Level) float64 { return l.SteadyOutputTPS },
		CSV:   []string{""}},
	{Name: "request_rps", Label: "requests", Unit: "req/s",
		Value: func(l *Level) float64 { return l.RequestRPS },
		Key:   []string{""}, Spread: []string{""}, CSV: []string{""}},
	{Name: "goodput_rps", Label: "goodput", Unit: "req/s",
		Value: func(l *Level) float64 { return l.GoodputRPS },
		CSV:   []string{""}},
	{Name: "error_rate", Label: "error rate", LowerBetter: true,
		Value: func(l *Level) float64 { return l.ErrorRate },
		Key:   []string{""}, CSV: []string{""}},
	{Name: "embed_latency", Label: "embedding latency", Unit: "ms", LowerBetter: true, FromSchedule: true,
		Dist: func(l *Level) *Stats {
			if l.Embeddings == nil {
				return &Stats{}
			}
			return &l.Embeddings.Latency
		},
		Sample: func(r *Record) (float64, bool) { return r.DoneMs, r.EmbedInputs > 0 },
		Has:    func(l *Level) bool { return l.Embeddings != nil },
		Key:    []string{"p50", "p95"}, Spread: []string{"p50"}, CSV: []string{"p50", "p95", "p99"}},
	{Name: "embed_inputs_per_s", Label: "inputs embedded", Unit: "inputs/s",
		Value: func(l *Level) float64 {
			if l.Embeddings == nil {
				return 0
			}
			return l.Embeddings.InputsPerS
		},
		Has: func(l *Level) bool { return l.Embeddings != nil },
		Key: []string{""}, Spread: []string{""}, CSV: []string{""}},
	{Name: "embed_tps", Label: "tokens embedded", Unit: "tok/s",
		Value: func(l *Level) float64 {
			if l.Embeddings == nil {
				return 0
			}
			return l.Embeddings.TokensPerS
		},
		Has: func(l *Level) bool { return l.Embeddings != nil },
		Key: []string{""}, CSV: []string{""}},
	{Name: "tool_call", Label: "first tool call", Unit: "ms", LowerBetter: true, FromSchedule: true,
		Dist: func(l *Level) *Stats {
			if l.ToolCalls == nil {
				return &Stats{}
			}
			return &l.ToolCalls.FirstCall
		},
		Sample: func(r *Record) (float64, bool) { return r.ToolCallMs, r.ToolCalled },
		Has:    func(l *Level) bool { return l.ToolCalls != nil },
		Key:    []string{"p50", "p95"}, CSV: []string{"p50", "p95"}},
	{Name: "tool_call_share", Label: "tool-call share", Unit: "",
		Value: func(l *Level) float64 {
			if l.ToolCalls == nil {
				return 0
			}
			return l.ToolCalls.Share
		},
		Has: func(l *Level) bool { return l.ToolCalls != nil },
		Key: []string{""}, CSV: []string{""}},
}

// Present reports whether level l has the metric (see Has).
func (m Metric) Present(l *Level) bool { return m.Has == nil || m.Has(l) }

// StatNames are the statistics of a distribution a name may take
// ("ttft_p95"); "median" is read as p50.
var StatNames = []string{"mean", "min", "max", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"}

// RunStats are the statistics Repeats keeps each run's value of
// (Repeats.PerRun): every one a compare row or gate may name — each of
// StatNames of a distribution, an aggregate itself ("") — so that repeated
// runs are compared one value per run whatever the gate names.
func (m Metric) RunStats() []string {
	if m.Aggregate() {
		return []string{""}
	}
	return StatNames
}

// Aggregate reports whether the metric is one number per level.
func (m Metric) Aggregate() bool { return m.Dist == nil }

// StatName is the name of one of the metric's statistics: "ttft_p95",
// or the aggregate's own name for stat "".
func (m Metric) StatName(stat string) string {
	if stat == "" {
		return m.Name
	}
	return m.Name + "_" + stat
}

// Of is the level's value of the statistic (stat "" for an aggregate),
// and whether the level has it: a distribution without samples has none.
func (m Metric) Of(l *Level, stat string) (float64, bool) {
	if m.Dist == nil {
		return m.Value(l), stat == "" && m.Present(l)
	}
	s := m.Dist(l)
	v, ok := s.Get(stat)
	return v, ok && s.Count > 0
}

// Lookup finds a metric by its name or an alias.
func Lookup(name string) (Metric, bool) {
	for _, m := range Registry {
		if m.Name == name || slices.Contains(m.Aliases, name) {
			return m, true
		}
	}
	return Metric{}, false
}

// ParseStat reads a statistic's name: a distribution's with its
// statistic ("ttft_p95", "tps_median"), or an aggregate's ("output_tps").
// It returns the metric and the statistic ("" for an aggregate; "median"
// becomes "p50"); its errors name what is wrong and what is known.
func ParseStat(name string) (Metric, string, error) {
	if m, ok := Lookup(name); ok {
		if !m.Aggregate() {
			return m, "", fmt.Errorf("name a statistic, e.g. %s_p95 or %s_p50", name, name)
		}
		return m, "", nil
	}
	i := strings.LastIndex(name, "_")
	if i < 0 {
		return Metric{}, "", fmt.Errorf("unknown metric %q (known: %s)", name, KnownNames())
	}
	m, ok := Lookup(name[:i])
	if !ok {
		return Metric{}, "", fmt.Errorf("unknown metric %q (known: %s)", name[:i], KnownNames())
	}
	stat := name[i+1:]
	if stat == "median" {
		stat = "p50"
	}
	if m.Aggregate() {
		return Metric{}, "", fmt.Errorf("%s is one number per level and takes no statistic", m.Name)
	}
	if !slices.Contains(StatNames, stat) {
		return Metric{}, "", fmt.Errorf("unknown statistic %q (known: %s, median)", name[i+1:], strings.Join(StatNames, " "))
	}
	return m, stat, nil
}

// KnownNames lists the names ParseStat takes, for error messages.
func KnownNames() string {
	var s []string
	for _, m := range Registry {
		n := m.Name
		if !m.Aggregate() {
			n += "_pNN"
		}
		for _, a := range m.Aliases {
			n += " (" + a + ")"
		}
		s = append(s, n)
	}
	return strings.Join(s, ", ")
}
