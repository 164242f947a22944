package benchmark

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/machine"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/telemetry"
)

// GPUTelemetry is where a run reads the GPUs' counters: Mode is "off",
// "nvidia-smi" or "dcgm" (URL the exporter's /metrics); Every the period.
type GPUTelemetry struct {
	Mode  string
	URL   string
	Every time.Duration
	// PricePerKWh prices the energy of the output tokens (0: not priced).
	PricePerKWh float64
}

// ParseGPUTelemetry reads --gpu-telemetry: auto (nvidia-smi when it is on
// PATH and the server is on this machine, else off), off, nvidia-smi, or
// dcgm=URL (a DCGM exporter, http://host:9400/metrics). target is the
// benchmark's --url ("" for the embedded simulator).
func ParseGPUTelemetry(s, target string) (*GPUTelemetry, error) {
	g := &GPUTelemetry{Every: 100 * time.Millisecond}
	switch mode, rest, _ := strings.Cut(strings.TrimSpace(s), "="); mode {
	case "off", "":
		return nil, nil
	case "auto":
		if _, err := lookNvidiaSMI(); err != nil || !onThisMachine(target) {
			return nil, nil
		}
		g.Mode = "nvidia-smi"
	case "nvidia-smi":
		g.Mode = mode
	case "dcgm":
		u, err := url.Parse(rest)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fieldErrorf("GPUTelemetry", "dcgm=URL wants the exporter's http(s) URL, e.g. dcgm=http://gpu-host:9400/metrics, got %q", rest)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/metrics"
		}
		g.Mode, g.URL = mode, u.String()
	default:
		return nil, fieldErrorf("GPUTelemetry", "unknown %q (known: auto, off, nvidia-smi, dcgm=URL)", s)
	}
	return g, nil
}

// ParseEnergyPrice reads --energy-price: a price per kWh, "0.12" or
// "0.12/kWh" ("" is none).
func ParseEnergyPrice(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	num, unit, hasUnit := strings.Cut(s, "/")
	if hasUnit && !strings.EqualFold(strings.TrimSpace(unit), "kwh") {
		return 0, fieldErrorf("GPUTelemetry.PricePerKWh", "unit %q, want a price per kWh such as 0.12/kWh", unit)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(num, "$")), 64)
	if err != nil || !(v > 0) {
		return 0, fieldErrorf("GPUTelemetry.PricePerKWh", "want a positive price per kWh such as 0.12/kWh, got %q", s)
	}
	return v, nil
}

func lookNvidiaSMI() (string, error) { return exec.LookPath("nvidia-smi") }

// onThisMachine: the URL's host is a loopback address or localhost.
func onThisMachine(target string) bool {
	u, err := url.Parse(target)
	if err != nil || u.Hostname() == "" {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// gpuSampling samples the GPUs for the whole run and cuts each level's
// runs out of it.
type gpuSampling struct {
	cfg     GPUTelemetry
	sampler *telemetry.Sampler
	level   telemetry.Level
	warn    *[]string
}

func startGPUSampling(ctx context.Context, cfg GPUTelemetry, client *http.Client, warn *[]string) (*gpuSampling, error) {
	g := &gpuSampling{cfg: cfg, warn: warn}
	switch cfg.Mode {
	case "dcgm":
		g.sampler = telemetry.DCGM(ctx, client, cfg.URL, cfg.Every)
	case "nvidia-smi":
		gpus, err := machine.GPUs(ctx)
		if errors.Is(err, machine.ErrNoNvidiaSMI) {
			return nil, fieldErrorf("GPUTelemetry", "nvidia-smi is not on PATH")
		} else if err != nil {
			return nil, fmt.Errorf("--gpu-telemetry: %w", err)
		}
		if g.sampler, err = telemetry.NvidiaSMI(ctx, len(gpus), cfg.Every); err != nil {
			return nil, fmt.Errorf("--gpu-telemetry: %w", err)
		}
	}
	// The first reading before the first level: a source that answers
	// nothing is said at once, not after the run.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := g.sampler.WaitSamples(wctx, 1); err != nil {
		*warn = append(*warn, fmt.Sprintf("--gpu-telemetry: %s gave no reading in 5 s: %v", g.sampler.Source, errors.Join(g.sampler.Err(), err)))
	}
	g.level.Source = g.sampler.Source
	return g, nil
}

// around samples one run of a level.
func (g *gpuSampling) around(lv load.Level, run func(load.Level) (load.Result, error)) (load.Result, error) {
	t0 := time.Now()
	res, err := run(lv)
	g.level.Add(g.sampler.Window(t0, time.Now()), res.Level.DurationS)
	return res, err
}

func (g *gpuSampling) annotate(lv *metrics.Level) {
	lv.GPU = g.level.GPU(lv.OutputTokens, g.cfg.PricePerKWh)
	g.level = telemetry.Level{Source: g.sampler.Source}
}

func (g *gpuSampling) close() {
	if err := g.sampler.Close(); err != nil {
		*g.warn = append(*g.warn, "--gpu-telemetry: "+err.Error())
	}
}
