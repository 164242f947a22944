package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/sim"
)

// setAPIKey sends key in the adapter's own header (Authorization: Bearer,
// or Anthropic's x-api-key) unless a --header already set that header, and
// keeps it among the secrets. Called again after --api auto picks the
// protocol, it moves the key to that protocol's header.
func (p *benchPlan) setAPIKey(key string) {
	if key == "" {
		return
	}
	if p.keyHeader != "" {
		p.header.Del(p.keyHeader)
		p.keyHeader = ""
	}
	name, value := api.KeyHeader(p.adapter, key)
	if p.header.Get(name) != "" {
		return
	}
	p.header.Set(name, value)
	p.apiKey, p.keyHeader = key, name
	for _, s := range p.secrets {
		if s == key {
			return
		}
	}
	p.secrets = append(p.secrets, key)
}

// detect probes the server. With --api auto it picks the adapter (a usage
// error listing what was tried when nothing answers) and, without --model,
// the first model listed. With a native API (Ollama, llama.cpp, TGI) it
// only gathers the engine and model facts for run.json, quietly.
func (p *benchPlan) detect(ctx context.Context, env Env, f *benchFlags, c *http.Client, base string, target *metrics.Target) error {
	auto := f.apiName == "auto"
	switch {
	case auto:
	case strings.HasPrefix(p.adapter.Name(), "ollama"), p.adapter.Name() == "llamacpp", p.adapter.Name() == "tgi":
	default:
		return nil
	}
	d, err := api.Detect(ctx, c, base, p.header, f.model)
	if err != nil {
		if _, ok := errors.AsType[*api.UnreachableError](err); ok && auto {
			return modelListError(err, p.secrets)
		}
		if auto {
			return usagef("--api auto: %s", api.Scrub(err.Error(), p.secrets))
		}
		return nil
	}
	p.detected = &d
	if !auto {
		return nil
	}
	if p.adapter, err = api.ByName(d.API); err != nil {
		return err
	}
	p.setAPIKey(p.apiKey)
	target.API = p.adapter.Name()
	if f.model == "" && len(d.Models) > 0 {
		f.model = d.Models[0]
		target.Model = f.model
	}
	desc := d.Engine
	if d.Version != "" {
		desc += " " + d.Version
	}
	fmt.Fprintf(env.Stderr, "tokbench: --api auto: %s speaks %s (%s)\n", api.RedactURL(base), d.API, strings.TrimSpace(desc))
	return nil
}

// setContinuousUsage applies --continuous-usage (auto, on, off) to the
// adapter: on asks for the running usage in every chunk, off never, auto
// when engine — what --api auto detected, or the owned_by of the model list
// bench read — is vLLM or tokbench's simulator, which answers it the same
// way. Other servers may reject the field, so auto never guesses. Only the OpenAI chat and completions adapters ask; on with
// another is a usage error.
func (p *benchPlan) setContinuousUsage(mode, engine string) error {
	o, ok := p.adapter.(api.OpenAI)
	if !ok {
		if mode == "on" {
			return usagef("--continuous-usage on: %s does not take it (only openai-chat and openai-completions do)", p.adapter.Name())
		}
		return nil
	}
	o.ContinuousUsage = mode == "on" || mode == "auto" && (engine == "vllm" || engine == sim.EngineName)
	p.adapter = o
	return nil
}

// continuousUsage reports whether requests ask for usage in every chunk.
func (p *benchPlan) continuousUsage() bool {
	o, ok := p.adapter.(api.OpenAI)
	return ok && o.ContinuousUsage
}

// withFacts adds what detection found to run.json meta: server_engine,
// server_version, server_models, server_max_context and the model facts.
// Flags the user gave win over the server's word.
func (p *benchPlan) withFacts(m map[string]string) map[string]string {
	d := p.detected
	if d == nil {
		return m
	}
	add := func(k, v string) {
		if _, ok := m[k]; !ok && v != "" {
			m[k] = v
		}
	}
	add("server_engine", d.Engine)
	add("server_version", d.Version)
	add("server_models", strings.Join(d.Models, ","))
	if d.MaxContext > 0 {
		add("server_max_context", fmt.Sprint(d.MaxContext))
	}
	for k, v := range d.Facts {
		add(k, v)
	}
	return m
}

// withDetection records the whole detection in run.json's config.
func (p *benchPlan) withDetection(cfg map[string]any) map[string]any {
	if p.detected != nil {
		cfg["detected"] = p.detected
		cfg["api"] = p.adapter.Name()
	}
	return cfg
}
