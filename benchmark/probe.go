package benchmark

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/probe"
	"github.com/tokbench/tokbench/sim"
)

// setAPIKey sends key in the adapter's own header (Authorization: Bearer,
// or Anthropic's x-api-key) unless the plan's header already sets that
// header, and keeps it among the secrets. Called again after API auto
// picks the protocol, it moves the key to that protocol's header.
func (r *run) setAPIKey(key string) {
	if key == "" {
		return
	}
	if r.keyHdr != "" {
		r.header.Del(r.keyHdr)
		r.keyHdr = ""
	}
	name, value := api.KeyHeader(r.adapter, key)
	if r.header.Get(name) != "" {
		return
	}
	r.header.Set(name, value)
	r.key, r.keyHdr = key, name
	for _, s := range r.secrets {
		if s == key {
			return
		}
	}
	r.secrets = append(r.secrets, key)
}

// detect probes the server. With API auto it picks the adapter (an
// InputError listing what was tried when nothing answers) and, without a
// model, the first model listed. With a native API (Ollama, llama.cpp,
// TGI) it only gathers the engine and model facts for run.json, quietly.
func (r *run) detect(ctx context.Context) error {
	auto := r.p.API == "auto"
	switch name := r.adapter.Name(); {
	case auto:
	case strings.HasPrefix(name, "ollama"), name == "llamacpp", name == "tgi":
	default:
		return nil
	}
	d, err := probe.Detect(ctx, r.http, r.base, r.header, r.model)
	if err != nil {
		if !auto {
			return nil
		}
		if _, ok := errors.AsType[*probe.UnreachableError](err); ok {
			return modelListError(err, r.secrets)
		}
		return fieldErrorf("API", "auto: %s", api.Scrub(err.Error(), r.secrets))
	}
	r.detected = &d
	if !auto {
		return nil
	}
	if r.adapter, err = api.ByName(d.API); err != nil {
		return err
	}
	r.setAPIKey(r.key)
	r.target.API = r.adapter.Name()
	if r.model == "" && len(d.Models) > 0 {
		r.model = d.Models[0]
		r.target.Model = r.model
	}
	desc := d.Engine
	if d.Version != "" {
		desc += " " + d.Version
	}
	r.notice("--api auto: %s speaks %s (%s)", api.RedactURL(r.base), d.API, strings.TrimSpace(desc))
	return nil
}

// CheckContinuousUsage refuses ContinuousUsage on for a protocol that
// cannot carry it: only openai-chat and openai-completions ask (auto, the
// default, asks once probing knows the API).
func CheckContinuousUsage(apiName string, mode Switch) error {
	if mode != On || apiName == "auto" {
		return nil
	}
	a, err := api.ByName(apiName)
	if err != nil {
		return fieldErrorf("API", "%v", err)
	}
	if _, ok := a.(api.OpenAI); !ok {
		return fieldErrorf("ContinuousUsage", "on: %s does not take it (only openai-chat and openai-completions do)", a.Name())
	}
	return nil
}

// setContinuousUsage applies ContinuousUsage to the adapter: on asks for
// the running usage in every chunk, off never, auto when engine — what API
// auto detected, or the owned_by of the model list — is vLLM or tokbench's
// simulator, which answers it the same way. Other servers may reject the
// field, so auto never guesses.
func (r *run) setContinuousUsage(engine string) error {
	mode := r.p.ContinuousUsage
	o, ok := r.adapter.(api.OpenAI)
	if !ok {
		if mode == On {
			return fieldErrorf("ContinuousUsage", "on: %s does not take it (only openai-chat and openai-completions do)", r.adapter.Name())
		}
		return nil
	}
	o.ContinuousUsage = mode == On || (mode == Auto || mode == "") && (engine == "vllm" || engine == sim.EngineName)
	r.adapter = o
	return nil
}

// continuousUsage reports whether requests ask for usage in every chunk.
func (r *run) continuousUsage() bool {
	o, ok := r.adapter.(api.OpenAI)
	return ok && o.ContinuousUsage
}

// meta is run.json's meta: the plan's, the run's token lengths
// (Workload.Lengths), then what probing found (server_engine,
// server_version, server_models, server_max_context, the model facts,
// vLLM's max_model_len); what the plan says wins.
func (r *run) meta() map[string]string {
	m := make(map[string]string, len(r.p.Meta)+8)
	for k, v := range r.p.Meta {
		m[k] = v
	}
	add := func(k, v string) {
		if _, ok := m[k]; !ok && v != "" {
			m[k] = v
		}
	}
	in, out := r.p.Workload.Lengths()
	add("input_tokens", fmt.Sprint(in))
	add("output_tokens", fmt.Sprint(out))
	if d := r.detected; d != nil {
		add("server_engine", d.Engine)
		add("server_version", d.Version)
		add("server_models", strings.Join(d.Models, ","))
		if d.MaxContext > 0 {
			add("server_max_context", fmt.Sprint(d.MaxContext))
		}
		for k, v := range d.Facts {
			add(k, v)
		}
	}
	for k, v := range mediaMeta(r.p.Workload) {
		add(k, v)
	}
	if r.maxModelLen > 0 {
		add("server_max_context", fmt.Sprint(r.maxModelLen))
		add("model_context_length", fmt.Sprint(r.maxModelLen))
	}
	return m
}

// config is run.json's configuration: the plan's (Plan.Config), with what
// set-up decided (the protocol, the model, what the requests ask for).
func (r *run) config() Config {
	c := r.p.Config()
	c.API, c.Model = r.adapter.Name(), r.model
	c.ContinuousUsage = r.continuousUsage()
	c.IgnoreEOSSent = r.p.IgnoreEOS && api.SendsIgnoreEOS(r.adapter)
	c.Tokenizer = r.p.Workload.Tokenizer.Name()
	c.Detected = r.detected
	return c
}

// serverPhysics completes a plan's deployment from the server: the model
// it serves by name in the catalog, else what it says of the model (a
// GGUF path, parameter counts), probing for it when --api did not. The
// source goes in every level's physics; a server that says too little
// leaves a note instead.
func (r *run) serverPhysics(ctx context.Context) error {
	in := r.p.PhysicsIn
	if r.physics != nil || in == nil {
		if r.physics != nil && r.detected != nil {
			r.physics.setFacts(r.detected.Facts)
		}
		return nil
	}
	named := *in
	named.Model = r.model
	ph, note, err := ResolvePhysics(named)
	if err != nil {
		return err
	}
	if ph == nil {
		if r.detected == nil {
			if d, err := probe.Detect(ctx, r.http, r.base, r.header, r.model); err == nil {
				r.detected = &d
			}
		}
		if d := r.detected; d != nil {
			var ok bool
			if ph, note, ok, err = named.FromServer(d.Facts, cmp.Or(d.Engine, "the server")); err != nil {
				return err
			} else if !ok {
				ph = nil
			}
		}
	}
	if ph == nil {
		r.notes = append(r.notes, fmt.Sprintf("no ceiling or MBU: model %q is not in the catalog and the server said nothing of its size (give --gguf FILE or --params in billions)", r.model))
		return nil
	}
	if note != "" {
		r.notes = append(r.notes, note)
	}
	if r.detected != nil {
		ph.setFacts(r.detected.Facts)
	}
	r.physics = ph
	return nil
}

// serverSlots is how many sequences the server said it runs at once
// (llama.cpp's total_slots), 0 when it did not.
func (r *run) serverSlots() int {
	if r.detected == nil {
		return 0
	}
	n, _ := strconv.Atoi(r.detected.Facts["server_slots"])
	return max(n, 0)
}

// checkModel warns when --model is not among the models the probe found
// listed, and records the served one when the server lists only one.
func (r *run) checkModel() {
	d := r.detected
	if d == nil || r.model == "" || len(d.Models) == 0 || slices.Contains(d.Models, r.model) {
		return
	}
	listed := fmt.Sprintf("%q", d.Models[0])
	if len(d.Models) > 1 {
		listed = fmt.Sprintf("%d models (%q, …)", len(d.Models), d.Models[0])
	}
	note := fmt.Sprintf("--model %q: the server does not list it; it lists %s", r.model, listed)
	if len(d.Models) == 1 {
		r.target.ServedModel = d.Models[0]
		if d.Engine == "llama.cpp" {
			note += fmt.Sprintf(" and answers any name with it, so the run measured %q (recorded as served_model)", d.Models[0])
		} else {
			note += fmt.Sprintf(": requests may fail, or be answered by %q (recorded as served_model)", d.Models[0])
		}
	}
	r.notes = append(r.notes, note)
	r.notice("%s", note)
}
