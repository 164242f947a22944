package cli

import (
	"context"
	"fmt"

	"github.com/tokbench/tokbench/sim"
)

// embedded is the simulator bench starts when no --url is given.
type embedded struct {
	srv   *sim.Server
	url   string
	model string
	desc  string
}

func startEmbedded(ctx context.Context, f *benchFlags) (*embedded, error) {
	cfg := sim.DefaultConfig()
	if f.model != "" {
		cfg.Model = f.model
	}
	if f.quant != "" {
		cfg.Quant = f.quant
	}
	if f.hardware != "" {
		cfg.Hardware = f.hardware
	}
	if f.gpus > 0 {
		cfg.GPUs = f.gpus
	}
	cfg.Engine.Seed = f.seed
	srv, err := sim.NewServer(cfg)
	if err != nil {
		return nil, usagef("embedded simulator (--model/--quant/--hardware/--gpus): %v", err)
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

func (e *embedded) close() { e.srv.Close() }
