package cli

import (
	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/workload"
)

// maxTools bounds --tools: more definitions than any model's context
// holds.
const maxTools = 1024

// embedShape checks --embed-inputs (n, 0 when not given) against the
// --api named and returns each request's inputs: n or 1 for an embeddings
// API, 0 for any other.
func embedShape(apiName string, n int) (int, error) {
	embed := false
	if a, err := api.ByName(apiName); err == nil {
		embed = api.IsEmbeddings(a)
	}
	switch {
	case n < 0:
		return 0, usagef("--embed-inputs: must be at least 1, got %d", n)
	case n > 0 && !embed:
		return 0, usagef("--embed-inputs: applies to an embeddings API (--api %s, %s or %s)", api.EmbedOpenAI, api.EmbedOllama, api.EmbedTEI)
	case n > 1<<16:
		return 0, usagef("--embed-inputs: at most 65536 inputs a request, got %d", n)
	case !embed:
		return 0, nil
	}
	return max(n, 1), nil
}

// requestShape checks --embed-inputs, --tools and --tools-file against
// --api and sets what the plan's requests carry beyond their prompts: an
// embeddings API's inputs per request, a chat API's tool definitions
// (seeded by --seed, or read from the file).
func (o *planning) requestShape(p *benchmark.Plan) error {
	inputs, err := embedShape(o.API, o.EmbedInputs)
	if err != nil {
		return err
	}
	embed := inputs > 0
	takesTools := o.API == "auto"
	if a, err := api.ByName(o.API); err == nil {
		takesTools = api.SendsTools(a)
	}
	switch {
	case embed && o.Workload != "" && o.Workload != "synthetic":
		return usagef("--workload %s: an embeddings API has no conversation; leave --workload out", o.Workload)
	case o.Tools < 0:
		return usagef("--tools: must not be negative, got %d", o.Tools)
	case o.Tools > maxTools:
		return usagef("--tools: at most %d definitions, got %d", maxTools, o.Tools)
	case o.Tools > 0 && o.ToolsFile != "":
		return usagef("--tools-file: gives the definitions --tools would draw; give one or the other")
	case (o.Tools > 0 || o.ToolsFile != "") && !takesTools:
		return usagef("--tools: %s takes no tool definitions (openai-chat and anthropic do)", o.API)
	}
	p.Workload.EmbedInputs = inputs
	switch {
	case o.Tools > 0:
		p.Workload.Tools = workload.Tools(o.Tools, o.Seed)
	case o.ToolsFile != "":
		tools, err := workload.ReadTools(o.ToolsFile)
		if err != nil {
			return usagef("--tools-file: %v", err)
		}
		p.Workload.Tools, p.Workload.ToolsFile = tools, o.ToolsFile
	}
	return nil
}
