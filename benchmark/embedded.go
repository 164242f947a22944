package benchmark

import (
	"context"
	"fmt"

	"github.com/tokbench/tokbench/sim"
)

// embedded is the simulator a plan without a URL runs against.
type embedded struct {
	srv   *sim.Server
	url   string
	model string
	desc  string
}

func startEmbedded(ctx context.Context, o SimOptions, model string) (*embedded, error) {
	cfg := sim.DefaultConfig()
	if model != "" {
		cfg.Model = model
	}
	if o.Quant != "" {
		cfg.Quant = o.Quant
	}
	if o.Hardware != "" {
		cfg.Hardware = o.Hardware
	}
	if o.GPUs > 0 {
		cfg.GPUs = o.GPUs
	}
	cfg.Engine.Seed = o.Seed
	srv, err := sim.NewServer(cfg)
	if err != nil {
		return nil, fieldErrorf("Sim", "%v", err)
	}
	url, err := srv.Start(ctx, "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("start embedded simulator: %w", err)
	}
	c := srv.Config()
	return &embedded{
		srv: srv, url: url, model: c.ServedModel,
		desc: fmt.Sprintf("%s %s on %d× %s", c.Model, c.Quant, c.GPUs, c.Hardware),
	}, nil
}
