// Package advise answers which endpoint should serve which use: from the
// runs of several endpoints, for each use-case profile (chat, code,
// voice, batch, agent, with their objectives) it says which endpoints
// meet it, up to which load, at what cost per million output tokens, and
// which is the cheapest that does — with the figures that decide it.
package advise

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/profile"
)

// Endpoint is one endpoint's measured levels.
type Endpoint struct {
	Name   string
	Levels []metrics.Level
	// Prices, when set, price its levels (else each level's own Cost,
	// from the prices its run was given).
	Prices metrics.Prices
}

// Advice is the answer for every profile.
type Advice struct {
	Uses []Use `json:"uses"`
}

// Use is one profile's answer.
type Use struct {
	Profile     string `json:"profile"`
	Description string `json:"description"`
	SLOs        string `json:"slos,omitempty"`
	// Choice is the endpoint to use: the cheapest that meets the profile
	// (the one meeting it at the highest load when no cost is known); ""
	// when none meets it. Why says what decided it.
	Choice string `json:"choice,omitempty"`
	Why    string `json:"why"`
	// Endpoints are every endpoint's standing for this use.
	Endpoints []Standing `json:"endpoints"`
	// Note says where the runs' requests were not the profile's own
	// (their lengths decide TTFT and E2E): a bench --profile run judges
	// like for like.
	Note string `json:"note,omitempty"`
}

// Standing is one endpoint for one use.
type Standing struct {
	Endpoint string `json:"endpoint"`
	Meets    bool   `json:"meets"`
	// UpTo is the highest load meeting the profile's objectives
	// (metrics.Capacity: users or req/s); for batch, the load of the
	// highest throughput.
	UpTo      float64      `json:"up_to"`
	LoadUnit  string       `json:"load_unit"`
	Statement string       `json:"statement"`
	Level     *LevelFigure `json:"level,omitempty"`
}

// Load is UpTo in its unit, as a sentence says it: "1 user", "8 users",
// "2.5 req/s".
func (s Standing) Load() string {
	switch {
	case s.LoadUnit == "users" && s.UpTo == 1:
		return "1 user"
	case s.LoadUnit == "":
		return fmt.Sprintf("%g", s.UpTo)
	}
	return fmt.Sprintf("%g %s", s.UpTo, s.LoadUnit)
}

// LevelFigure is the level an endpoint is judged at for a use (its
// highest passing level; batch: its highest throughput): the figures that
// decide.
type LevelFigure struct {
	Load           string  `json:"load"`
	TTFTP95Ms      float64 `json:"ttft_p95_ms"`
	DecodeTPSP50   float64 `json:"decode_tps_p50"`
	DecodeTPSP5    float64 `json:"decode_tps_p5"`
	OutputTPS      float64 `json:"output_tps"`
	CostPerMillion float64 `json:"cost_per_million_output,omitempty"`
	CostBasis      string  `json:"cost_basis,omitempty"`
	// AgentChainS is the wall-clock of the agent profile's chain at this
	// level's speed: its calls' TTFT p50 plus their output tokens at the
	// decode rate p50, one after another.
	AgentChainS float64 `json:"agent_chain_s"`
}

// Of advises on endpoints for every profile.
func Of(endpoints []Endpoint) (*Advice, error) {
	agent, err := profile.Lookup("agent")
	if err != nil {
		return nil, err
	}
	out := &Advice{}
	for _, name := range profile.Names() {
		p, _ := profile.Lookup(name)
		var slos []metrics.SLO
		if p.SLOs != "" {
			if slos, err = metrics.ParseSLOs(p.SLOs); err != nil {
				return nil, fmt.Errorf("profile %s: %w", name, err)
			}
		}
		u := Use{Profile: p.Name, Description: p.Description, SLOs: p.SLOs}
		for _, e := range endpoints {
			u.Endpoints = append(u.Endpoints, stand(e, slos, agent))
		}
		u.Choice, u.Why = choose(u.Endpoints, len(slos) == 0)
		u.Note = shapeNote(p, endpoints)
		out.Uses = append(out.Uses, u)
	}
	return out, nil
}

// stand judges one endpoint against slos: its capacity and the figures
// of the level it is judged at.
func stand(e Endpoint, slos []metrics.SLO, agent profile.Profile) Standing {
	st := Standing{Endpoint: e.Name}
	levels := slices.Clone(e.Levels)
	if len(levels) == 0 {
		st.Statement = "no level measured"
		return st
	}
	mode := levels[0].Load.Mode
	st.LoadUnit = "users"
	if mode == metrics.ModeRate {
		st.LoadUnit = "req/s"
	}
	var at *metrics.Level
	if len(slos) == 0 {
		// Batch: the highest throughput is the use, at its cost.
		for i := range levels {
			if levels[i].Load.Mode == mode && (at == nil || levels[i].OutputTPS > at.OutputTPS) {
				at = &levels[i]
			}
		}
		st.Meets = at != nil && at.Requests.Completed > 0
		st.UpTo = metrics.LoadValue(at.Load)
		st.Statement = fmt.Sprintf("%.0f tok/s aggregate at %s", at.OutputTPS, at.Load)
	} else {
		for i := range levels {
			levels[i].SLO = nil
			metrics.JudgeSLOs(&levels[i], slos)
		}
		c := metrics.FindCapacity(levels, slos)
		st.Statement = c.Statement
		if c.MeasuredPassing > 0 {
			st.Meets, st.UpTo = true, c.Value
			for i := range levels {
				if levels[i].Load.Mode == mode && metrics.LoadValue(levels[i].Load) == c.MeasuredPassing {
					at = &levels[i]
				}
			}
		} else {
			at = lowest(levels, mode) // the figures that fail it
		}
	}
	if at != nil {
		st.Level = figure(at, e.Prices, agent)
	}
	return st
}

// lowest is the level of mode with the least load.
func lowest(levels []metrics.Level, mode metrics.Mode) *metrics.Level {
	var out *metrics.Level
	for i := range levels {
		if levels[i].Load.Mode == mode && (out == nil || metrics.LoadValue(levels[i].Load) < metrics.LoadValue(out.Load)) {
			out = &levels[i]
		}
	}
	return out
}

func figure(lv *metrics.Level, prices metrics.Prices, agent profile.Profile) *LevelFigure {
	f := &LevelFigure{Load: lv.Load.String(), TTFTP95Ms: lv.TTFT.P95, DecodeTPSP50: lv.DecodeTPS.P50,
		DecodeTPSP5: lv.DecodeTPS.P5, OutputTPS: lv.OutputTPS}
	cost := lv.Cost
	if c := metrics.CostOf(lv, prices); c != nil {
		cost = c
	}
	if cost != nil {
		f.CostPerMillion, f.CostBasis = cost.PerMillionOutput, cost.Basis
	}
	if lv.DecodeTPS.P50 > 0 {
		steps := float64(max(agent.Steps, 1))
		f.AgentChainS = steps * (lv.TTFT.P50/1000 + float64(agent.OutputTokens)/lv.DecodeTPS.P50)
	}
	return f
}

// choose names the endpoint to use among the standings and says why: the
// cheapest that meets the use; without costs, the one meeting it at the
// highest load (for batch, the highest throughput).
func choose(st []Standing, batch bool) (string, string) {
	var meets []Standing
	for _, s := range st {
		if s.Meets && s.Level != nil {
			meets = append(meets, s)
		}
	}
	if len(meets) == 0 {
		return "", "no endpoint meets it"
	}
	priced := slices.DeleteFunc(slices.Clone(meets), func(s Standing) bool { return s.Level.CostPerMillion <= 0 })
	if len(priced) > 0 {
		best := slices.MinFunc(priced, func(a, b Standing) int { return cmp.Compare(a.Level.CostPerMillion, b.Level.CostPerMillion) })
		why := fmt.Sprintf("the cheapest that meets it: %s per million output tokens at %s", money(best.Level.CostPerMillion), best.Level.Load)
		if len(priced) > 1 {
			next := math.Inf(1)
			for _, s := range priced {
				if s.Endpoint != best.Endpoint {
					next = min(next, s.Level.CostPerMillion)
				}
			}
			why += fmt.Sprintf(" (next %s)", money(next))
		}
		if n := len(meets) - len(priced); n > 0 {
			why += fmt.Sprintf("; %d that meet it have no price", n)
		}
		return best.Endpoint, why
	}
	if batch {
		best := slices.MaxFunc(meets, func(a, b Standing) int { return cmp.Compare(a.Level.OutputTPS, b.Level.OutputTPS) })
		return best.Endpoint, fmt.Sprintf("no price known; the highest throughput, %.0f tok/s at %s", best.Level.OutputTPS, best.Level.Load)
	}
	best := slices.MaxFunc(meets, func(a, b Standing) int { return cmp.Compare(a.UpTo, b.UpTo) })
	return best.Endpoint, fmt.Sprintf("no price known; meets it up to the highest load, %s", best.Load())
}

// shapeNote names the endpoints whose runs sent requests of other
// lengths than the profile's (by over a quarter, in or out).
func shapeNote(p profile.Profile, endpoints []Endpoint) string {
	off := func(got float64, want int) bool { return math.Abs(got/float64(want)-1) > 0.25 }
	var names []string
	in, out := 0.0, 0.0
	for _, e := range endpoints {
		n, i, o := 0, 0, 0
		for _, lv := range e.Levels {
			n, i, o = n+lv.Requests.Completed, i+lv.InputTokens, o+lv.OutputTokens
		}
		if n == 0 {
			continue
		}
		in, out = float64(i)/float64(n), float64(o)/float64(n)
		if off(in, p.InputTokens) || off(out, p.OutputTokens) {
			names = append(names, fmt.Sprintf("%s (%.0f in, %.0f out)", e.Name, in, out))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("judged on requests unlike the profile's %d in / %d out tokens: %s; bench --profile %s judges like for like",
		p.InputTokens, p.OutputTokens, strings.Join(names, ", "), p.Name)
}

func money(v float64) string {
	if math.IsInf(v, 0) {
		return "?"
	}
	return metrics.Figure(v)
}
