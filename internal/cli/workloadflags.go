package cli

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/workload"
)

// workloadFlags are bench's prompt and length flags; the logic is in
// package workload.
type workloadFlags struct {
	input, output string
	dataset       string
	datasetFormat string
	prefixTokens  int
	prefixGroups  int
	minTokens     int

	inputs  []workload.Dist
	outDist workload.Dist
	rows    []workload.Row
	format  string
	server  bool // --tokenizer server
	tok     tokenize.Tokenizer
}

func (w *workloadFlags) register(fl *pflag.FlagSet, f *benchFlags) {
	fl.StringVar(&w.input, "input-tokens", "512", "prompt length in tokens, exact under --tokenizer: N, MEAN:STDDEV (normal), LO-HI (uniform); a comma list (1k,8k,32k) sweeps it")
	fl.StringVar(&w.output, "output-tokens", "128", "max_tokens of each request: N, MEAN:STDDEV or LO-HI")
	fl.StringVar(&f.tokenizer, "tokenizer", tokenize.Default, "tokenizer for prompts and for counting output without usage: cl100k_base, o200k_base, PATH/tokenizer.json, or server (the engine's /tokenize counts prompts)")
	fl.StringVar(&w.dataset, "dataset", "", "prompts from a file: JSONL ({\"prompt\"} or {\"messages\"}, optional max_tokens), ShareGPT JSON, or plain text to cut prompts from")
	fl.StringVar(&w.datasetFormat, "dataset-format", workload.FormatAuto, "auto, jsonl, sharegpt, text")
	fl.IntVar(&w.prefixTokens, "prefix-tokens", 0, "a shared prefix of N tokens before each prompt (added to --input-tokens), to measure prefix caching")
	fl.IntVar(&w.prefixGroups, "prefix-groups", 1, "distinct shared prefixes; request i uses prefix i mod G")
	fl.IntVar(&w.minTokens, "min-tokens", 0, "send min_tokens (vLLM) so outputs are at least this long (capped at max_tokens)")
}

// validate parses the workload flags, loads the tokenizer and checks every
// dataset row, so a bad file stops the run before any request. A
// --profile's lengths stand in for --input-tokens and --output-tokens when
// they are not given.
func (w *workloadFlags) validate(f *benchFlags, set func(string) bool) error {
	var err error
	prof := f.lf.prof // its lengths stand in for the flags not given
	if prof != nil && !set("input-tokens") && prof.InputTokens > 0 {
		w.inputs = []workload.Dist{workload.Fixed(prof.InputTokens)}
	} else if w.inputs, err = workload.ParseDists(w.input); err != nil {
		return usagef("--input-tokens: %v", err)
	}
	if prof != nil && !set("output-tokens") && prof.OutputTokens > 0 {
		w.outDist = workload.Fixed(prof.OutputTokens)
	} else if w.outDist, err = workload.ParseDist(w.output); err != nil {
		return usagef("--output-tokens: %v", err)
	}
	switch {
	case len(w.inputs) > 1 && f.lf.sweep != "":
		return usagef("--input-tokens: a list sweeps input length; it does not combine with --sweep")
	case len(w.inputs) > 1 && w.dataset != "":
		return usagef("--input-tokens: a list sweeps synthetic input length; it does not combine with --dataset")
	case w.prefixTokens < 0:
		return usagef("--prefix-tokens: must be 0 or more, got %d", w.prefixTokens)
	case w.prefixGroups < 1:
		return usagef("--prefix-groups: must be at least 1, got %d", w.prefixGroups)
	case w.minTokens < 0:
		return usagef("--min-tokens: must be 0 or more, got %d", w.minTokens)
	}
	name := f.tokenizer
	if name == "server" {
		w.server = true
		name = tokenize.Default // builds prompts and counts output without usage
	}
	if w.tok, err = tokenize.Open(name); err != nil {
		return usagef("--tokenizer: %v", err)
	}
	if w.dataset == "" {
		return nil
	}
	ds, err := workload.OpenDataset(w.dataset, w.datasetFormat, 100_000, f.seed)
	if errors.Is(err, workload.ErrFormat) {
		return usagef("--dataset-format: %v", err)
	} else if err != nil {
		return usagef("--dataset: %v", err)
	}
	w.format, w.rows = ds.Format, ds.Rows
	return nil
}

// plan is the validated workload as the plan's.
func (w *workloadFlags) plan(tok tokenize.Tokenizer, promptSeed uint64) benchmark.Workload {
	wl := benchmark.Workload{
		Inputs: w.inputs, Output: w.outDist, Rows: w.rows,
		PrefixTokens: w.prefixTokens, PrefixGroups: w.prefixGroups, MinTokens: w.minTokens,
		Tokenizer: tok, ServerTokenizer: w.server, PromptSeed: promptSeed,
		// The first length stands for the run where one number is needed
		// (run.json, the physics context).
		InputTokens: int(w.inputs[0].Mean), OutputTokens: int(w.outDist.Mean),
	}
	if w.format == workload.FormatText {
		wl.Corpus = w.dataset
	}
	return wl
}

// describe is the prompt part of run.json's configuration.
func (w *workloadFlags) describe() benchmark.PromptConfig {
	var in []string
	for _, d := range w.inputs {
		in = append(in, d.String())
	}
	return benchmark.PromptConfig{
		InputTokens: in, OutputTokens: w.outDist.String(), Dataset: w.dataset,
		DatasetFormat: w.format, PrefixTokens: w.prefixTokens, PrefixGroups: w.prefixGroups,
		MinTokens: w.minTokens, TokenizerServer: w.server,
	}
}
