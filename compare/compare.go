// Package compare sets saved runs side by side and decides, with a
// significance test, whether a change between them is real or noise. It
// also checks that runs are like for like and evaluates regression gates
// such as "ttft_p95>+10%". Its rows are the key statistics of
// metrics.Registry; a gate may name any statistic there.
//
// Which test judges a row (Row.Test): with 3 or more repeated runs a side,
// Welch's t over one value per run (Repeats.PerRun); else, for a
// percentile with enough requests beyond it on each side, the 95%
// interval of B − A from a block bootstrap of the per-request samples in
// requests.jsonl; else the Mann-Whitney U test of those samples
// (Options.Alpha).
//
// A change is called better or worse only when a test finds it (see Row)
// and it is at least Options.MinChange; "~" is a change under MinChange or
// one a test found to be noise. A row beyond MinChange that no test could
// judge reads "better?" or "worse?" and carries Row.Untested: aggregate
// metrics (output_tps, request_rps…) have one value per level, ITL pools
// the gaps of every request into one distribution; a percentile
// needs a few requests beyond it on each side for its own interval, and
// with fewer it is a change only when a rank test of all requests finds
// them moved its way. A gate that holds on a row no test could judge trips
// on its threshold alone (the threshold is the user's own tolerance) and
// says what would let it be tested. A distribution statistic of 0 is
// unknown (summaries imported from vLLM aggregates by ReadVLLM leave what
// the file does not give at 0): its row is "n/a".
//
// Everything here is pure: values in, values out, safe for concurrent use.
package compare

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

// Run is one saved run directory.
type Run struct {
	Dir     string
	Meta    results.Run // run.json; zero when the directory has none
	Summary metrics.Summary
	// Records are the per-request samples of requests.jsonl; nil when the
	// directory has none (then no significance test is possible).
	Records  []metrics.Record
	Warnings []string
}

// SampleRecords is how many records of a level compare reads; a longer
// level (a soak test's) is tested on a uniform sample of that many, which
// keeps reading it to bounded memory.
const SampleRecords = 50_000

// Load reads a run directory: summary.json is required, run.json and
// requests.jsonl are used when present.
func Load(dir string) (*Run, error) {
	r := &Run{Dir: dir}
	s, err := results.ReadSummary(dir)
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", dir, err)
	}
	r.Summary = s
	if err := readJSONFile(filepath.Join(dir, results.RunFile), &r.Meta); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read run %s: %w", dir, err)
	}
	sample, err := results.ReadSample(dir, SampleRecords)
	switch {
	case errors.Is(err, os.ErrNotExist):
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s has no %s: no significance test possible", dir, results.RequestsFile))
	case err != nil:
		return nil, fmt.Errorf("read run %s: %w", dir, err)
	default:
		r.Records = sample.Records
		r.Warnings = append(r.Warnings, sample.Warnings...)
		for _, l := range slices.Sorted(maps.Keys(sample.Total)) {
			if sample.Sampled(l) {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s: level %d has %d requests; its tests use a uniform sample of %d of them, in the order they ran",
					dir, l, sample.Total[l], SampleRecords))
			}
		}
	}
	return r, nil
}

// Options tune the verdicts. The zero value means the defaults.
type Options struct {
	// Alpha is the significance level of the test (default 0.05).
	Alpha float64
	// MinChange is the smallest relative change, as a fraction, that is
	// called better or worse even when significant (default 0.02): smaller
	// shifts are below what a benchmark can resolve.
	MinChange float64
}

func (o Options) withDefaults() Options {
	if o.Alpha <= 0 {
		o.Alpha = 0.05
	}
	if o.MinChange <= 0 {
		o.MinChange = 0.02
	}
	return o
}

// Verdicts.
const (
	Better    = "better"
	Worse     = "worse"
	NoChange  = "~"
	Undefined = "n/a" // a side has no value
)

// Row is one metric of one level, A against B.
type Row struct {
	Metric metrics.Metric
	Stat   string // "p50", "p95", "mean"…; "" for aggregates
	A, B   float64
	// Delta is B − A; Rel is Delta / A (NaN when A is 0).
	Delta, Rel float64
	// Tested says a significance test ran; P is its p-value, NA and NB the
	// sample sizes. Test names it: "per-run Welch t" with repeated runs
	// (3 or more a side: one value per run, the interval of the difference
	// of their means), else "block bootstrap" for a percentile; both give
	// the 95% interval of B − A as CILo to CIHi (a change when it excludes
	// 0); else "Mann-Whitney U" (P).
	Tested      bool
	Test        string
	P           float64
	CILo, CIHi  float64
	NA, NB      int
	Significant bool
	// Untested says why the row's change could not be judged and what
	// would let it be: an aggregate, too few requests beyond a percentile
	// (when the rank test of all requests did not find the shift either),
	// no requests.jsonl. "" when a test judged the row.
	Untested string
	Verdict  string
}

// Name is the row's gate name: "ttft_p95", "output_tps".
func (r Row) Name() string { return r.Metric.StatName(r.Stat) }

// LevelDiff is one load level present in both runs.
type LevelDiff struct {
	Load metrics.Load
	A, B *metrics.Level
	Rows []Row

	sa, sb []metrics.Record
}

// Diff is B against A.
type Diff struct {
	A, B   *Run
	Levels []LevelDiff
	// Mismatches say how the runs are not like for like, one field each.
	Mismatches []Mismatch
	Options    Options
}

// Mismatch is one field that differs between the runs.
type Mismatch struct {
	Field string `json:"field"`
	A     string `json:"a"`
	B     string `json:"b"`
}

func (m Mismatch) String() string {
	return fmt.Sprintf("%s differs: A %s, B %s", m.Field, orNone(m.A), orNone(m.B))
}

// Warnings are both runs' warnings, each once, A's first.
func (d *Diff) Warnings() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range []*Run{d.A, d.B} {
		for _, w := range r.Warnings {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Compare sets B against A, level by level (levels are matched by load).
func Compare(a, b *Run, opt Options) *Diff {
	opt = opt.withDefaults()
	d := &Diff{A: a, B: b, Options: opt, Mismatches: LikeForLike(a, b)}
	for i := range a.Summary.Levels {
		la := &a.Summary.Levels[i]
		for j := range b.Summary.Levels {
			lb := &b.Summary.Levels[j]
			if lb.Load != la.Load {
				continue
			}
			ld := LevelDiff{Load: la.Load, A: la, B: lb, sa: levelRecords(a, i), sb: levelRecords(b, j)}
			if m, ok := cacheMismatch(la, lb); ok {
				d.Mismatches = append(d.Mismatches, m)
			}
			d.Mismatches = append(d.Mismatches, levelMismatches(la, lb)...)
			for _, m := range metrics.Registry {
				if !m.Present(la) && !m.Present(lb) || m.Stream && noStream(la) && noStream(lb) {
					continue // neither level has it
				}
				for _, stat := range m.Key {
					ld.Rows = append(ld.Rows, ld.row(m, stat, opt))
				}
			}
			d.Levels = append(d.Levels, ld)
			break
		}
	}
	return d
}

// levelRecords are the records of the i-th level of a run. Records carry
// the level index they were measured in.
func levelRecords(r *Run, i int) []metrics.Record {
	var out []metrics.Record
	for _, rec := range r.Records {
		if rec.Level == i {
			out = append(out, rec)
		}
	}
	return out
}

// perRun is each run's value of the named statistic, when the level is
// the median of repeated runs.
func perRun(l *metrics.Level, name string) []float64 {
	if l.Repeats == nil {
		return nil
	}
	return l.Repeats.PerRun[name]
}

func samples(m metrics.Metric, recs []metrics.Record) []float64 {
	var out []float64
	for i := range recs {
		if !recs[i].OK {
			continue
		}
		if v, ok := m.Sample(&recs[i]); ok {
			out = append(out, v)
		}
	}
	return out
}

// row compares one metric (and stat) of the level.
func (ld *LevelDiff) row(m metrics.Metric, stat string, opt Options) Row {
	r := Row{Metric: m, Stat: stat, Verdict: Undefined}
	if m.Aggregate() {
		r.A, r.B = m.Value(ld.A), m.Value(ld.B)
	} else {
		sa, sb := m.Dist(ld.A), m.Dist(ld.B)
		if sa.Count == 0 || sb.Count == 0 {
			return r
		}
		r.A, _ = sa.Get(stat)
		r.B, _ = sb.Get(stat)
		// Times and rates of completed requests are never 0: a 0 is a
		// statistic the summary does not know (one imported from another
		// tool's aggregates), not a measurement.
		if r.A == 0 || r.B == 0 {
			return r
		}
	}
	r.Delta = r.B - r.A
	r.Rel = math.NaN()
	if r.A != 0 {
		r.Rel = r.Delta / math.Abs(r.A)
	}
	big := r.beyond(opt.MinChange)
	if pa, pb := perRun(ld.A, r.Name()), perRun(ld.B, r.Name()); len(pa) >= minRuns && len(pb) >= minRuns {
		// Repeated runs: one value per run is the sampling unit.
		_, lo, hi, _ := welch(pa, pb)
		r.Tested, r.Test, r.CILo, r.CIHi, r.NA, r.NB = true, "per-run Welch t", lo, hi, len(pa), len(pb)
		r.Significant = (lo > 0 || hi < 0) && big
	} else if m.Sample != nil {
		xa, xb := samples(m, ld.sa), samples(m, ld.sb)
		r.NA, r.NB = len(xa), len(xb)
		q, isQ := quantileName(stat)
		n := min(r.NA, r.NB)
		switch {
		case n == 0:
			r.Untested = "no per-request samples (requests.jsonl) on a side"
		case isQ && (n < minBlocks || float64(n)*min(q, 100-q)/100 < minBeyond):
			// Too few requests beyond the percentile on a side for its own
			// interval. A rank test of every request is still valid at
			// this size: when it finds B's requests as a whole moved the
			// way the percentile did, that is a change; when it does not,
			// it says nothing of the tail, and the row stays untested.
			u, p := MannWhitney(xa, xb)
			r.Tested, r.Test, r.P = true, "Mann-Whitney U", p
			up := u < float64(r.NA*r.NB)/2 // A's values rank below B's
			r.Significant = p < opt.Alpha && big && up == (r.Delta > 0)
			if !r.Significant {
				r.Untested = fmt.Sprintf("%s of %d and %d requests has fewer than %d beyond it on a side, and a rank test of all of them (p %s) shows no shift its way; %d requests a level, or --repeat %d, would let it be tested",
					stat, r.NA, r.NB, minBeyond, pValue(p), requestsToTest(q), minRuns)
			}
		case n < 2:
			r.Untested = fmt.Sprintf("%d and %d requests: 2 a side, or --repeat %d, would let it be tested", r.NA, r.NB, minRuns)
		default:
			r.Tested = true
			_, r.P = MannWhitney(xa, xb)
			if isQ {
				// A percentile is judged by its own interval, from whole
				// blocks of requests, not by a test of the distribution.
				r.Test = "block bootstrap"
				r.CILo, r.CIHi = blockBootstrap(timedSamples(m, ld.sa), timedSamples(m, ld.sb), q)
				r.Significant = (r.CILo > 0 || r.CIHi < 0) && big
			} else {
				r.Test = "Mann-Whitney U"
				r.Significant = r.P < opt.Alpha && big
			}
		}
	} else if !m.Aggregate() {
		r.Untested = fmt.Sprintf("%s pools the gaps of every request: no value per request to test", m.Label)
		if len(perRun(ld.A, r.Name())) > 0 || len(perRun(ld.B, r.Name())) > 0 {
			r.Untested += fmt.Sprintf(", and fewer than %d runs a side to test per run", minRuns)
		}
	} else {
		r.Untested = "aggregate: one value per level, no per-request test"
		if len(perRun(ld.A, r.Name())) > 0 || len(perRun(ld.B, r.Name())) > 0 {
			r.Untested += fmt.Sprintf(", and fewer than %d runs a side to test per run", minRuns)
		}
	}
	switch {
	case !big:
		r.Verdict = NoChange
	case r.Significant && (r.Delta < 0) == m.LowerBetter:
		r.Verdict = Better
	case r.Significant:
		r.Verdict = Worse
	case r.Untested != "":
		// Beyond MinChange and not tested: a "?" verdict, never "~",
		// which would claim what no test found.
		r.Verdict = Better + "?"
		if (r.Delta < 0) != m.LowerBetter {
			r.Verdict = Worse + "?"
		}
	default:
		r.Verdict = NoChange
	}
	return r
}

// beyond says the change is at least minChange (a fraction of A), the
// least that is called better or worse.
func (r Row) beyond(minChange float64) bool {
	return r.Delta != 0 && (r.A == 0 || math.Abs(r.Rel) >= minChange)
}

// requestsToTest is how many requests a side let percentile q be tested
// by its own interval: minBeyond beyond it, and minBlocks in all.
func requestsToTest(q float64) int {
	return max(minBlocks, int(math.Ceil(minBeyond*100/min(q, 100-q)-1e-9)))
}

// Changes are the rows of every level with a significant change.
func (d *Diff) Changes() []LevelRow {
	var out []LevelRow
	for _, ld := range d.Levels {
		for _, r := range ld.Rows {
			if r.Significant {
				out = append(out, LevelRow{ld.Load, r})
			}
		}
	}
	return out
}

// LevelRow is a row with the load level it belongs to.
type LevelRow struct {
	Load metrics.Load
	Row  Row
}

// LikeForLike lists every field in which two runs differ and that makes
// their numbers incomparable: target model, API and simulated-or-not; the
// run.json metadata (hardware, quant, engine, gpus, context, input and
// output tokens…, but not the free-form label); and the set of load levels.
func LikeForLike(a, b *Run) []Mismatch {
	var out []Mismatch
	ta, tb := a.Summary.Target, b.Summary.Target
	if ta.Model != tb.Model {
		out = append(out, Mismatch{"model", ta.Model, tb.Model})
	}
	if ta.API != tb.API {
		out = append(out, Mismatch{"api", ta.API, tb.API})
	}
	if ta.Simulated != tb.Simulated {
		out = append(out, Mismatch{"simulated", fmt.Sprint(ta.Simulated), fmt.Sprint(tb.Simulated)})
	}
	keys := map[string]bool{}
	for k := range a.Meta.Meta {
		keys[k] = true
	}
	for k := range b.Meta.Meta {
		keys[k] = true
	}
	delete(keys, "label")
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		va, okA := a.Meta.Meta[k]
		vb, okB := b.Meta.Meta[k]
		// Metadata only one run has (a probe the other did not make) says
		// nothing of the other: only values both runs have can differ. A
		// workload key is written whenever its workload had it, so one
		// run's lacking it is a run without it.
		if okA && okB && va != vb {
			out = append(out, Mismatch{k, va, vb})
		}
		if workloadKeys[k] && okA != okB {
			out = append(out, Mismatch{k, cmp.Or(va, "none"), cmp.Or(vb, "none")})
		}
	}
	la, lb := loadSet(a), loadSet(b)
	if la != lb {
		out = append(out, Mismatch{"load levels", la, lb})
	}
	return out
}

// workloadKeys are the run.json meta keys a run has whenever its requests
// carried what they name (bench writes them; see benchmark's meta): the
// media ("images", "audio_seconds") and an embeddings request's inputs
// ("embed_inputs"). A run without the key carried none.
var workloadKeys = map[string]bool{"images": true, "audio_seconds": true, "embed_inputs": true}

// cacheMismatch says when two runs of a level were served from the
// server's prompt cache in different measure (shares of completed requests
// more than 10 points apart): their TTFTs differ by the prefill the cache
// saved, not by the server's speed.
func cacheMismatch(a, b *metrics.Level) (Mismatch, bool) {
	share := func(l *metrics.Level) float64 {
		if l.Requests.Completed == 0 {
			return 0
		}
		return float64(l.PromptCache.Hits()) / float64(l.Requests.Completed)
	}
	sa, sb := share(a), share(b)
	if math.Abs(sa-sb) <= 0.1 {
		return Mismatch{}, false
	}
	pct := func(v float64) string { return fmt.Sprintf("%.0f%% of requests", 100*v) }
	return Mismatch{Field: "prompt cache hits at " + a.Load.String(), A: pct(sa), B: pct(sb)}, true
}

// levelMismatches are the ways two runs of one level differ in what
// decides their numbers, besides the prompt cache: where the output token
// counts came from, the error rate (more than 5 points apart), whether the
// users started in lockstep, and whether the client's self-check warned.
func levelMismatches(a, b *metrics.Level) []Mismatch {
	at := " at " + a.Load.String()
	var out []Mismatch
	if a.TokenSource != b.TokenSource && a.TokenSource != "" && b.TokenSource != "" {
		out = append(out, Mismatch{"token source" + at, a.TokenSource, b.TokenSource})
	}
	if math.Abs(a.ErrorRate-b.ErrorRate) > 0.05 {
		pct := func(v float64) string { return fmt.Sprintf("%.0f%% of requests failed", 100*v) }
		out = append(out, Mismatch{"error rate" + at, pct(a.ErrorRate), pct(b.ErrorRate)})
	}
	if a.Lockstep != b.Lockstep {
		start := func(l bool) string {
			if l {
				return "users started together (lockstep)"
			}
			return "users' starts spread"
		}
		out = append(out, Mismatch{"start" + at, start(a.Lockstep), start(b.Lockstep)})
	}
	if wa, wb := selfCheckWarned(a), selfCheckWarned(b); wa != wb {
		say := func(w bool) string {
			if w {
				return "warned: its timestamps may read late"
			}
			return "clean"
		}
		out = append(out, Mismatch{"client self-check" + at, say(wa), say(wb)})
	}
	return out
}

// selfCheckWarned reports whether the client's self-check warned on a level.
func selfCheckWarned(l *metrics.Level) bool {
	for _, w := range l.Warnings {
		if strings.HasPrefix(w, "client self-check:") {
			return true
		}
	}
	return false
}

func loadSet(r *Run) string {
	var ls []string
	for _, lv := range r.Summary.Levels {
		ls = append(ls, lv.Load.String())
	}
	sort.Strings(ls)
	return fmt.Sprint(ls)
}

// noStream reports whether lv is an embeddings level with no token
// stream: one whose stream statistics are empty on purpose, not a mixed
// one (tokbench proxy's completions and embeddings together).
func noStream(lv *metrics.Level) bool {
	return lv.Embeddings != nil && lv.TTFT.Count == 0
}
