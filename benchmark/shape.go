package benchmark

import (
	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/workload"
)

// MaxTools bounds --tools: more definitions than any model's context
// holds.
const MaxTools = 1024

// RequestShape is what a run's requests carry beyond their prompts: an
// embeddings API's inputs per request, a chat API's tool definitions.
type RequestShape struct {
	// EmbedInputs are the texts of each embeddings request (0: one).
	EmbedInputs int
	// Tools is the number of seeded tool definitions (workload.Tools);
	// ToolsFile a JSON file of them instead (workload.ReadTools).
	Tools     int
	ToolsFile string
	// Workload is the run's --workload (synthetic, agent, chat).
	Workload string
}

// Shape checks s against the API (an --api spelling or auto) and returns
// the embeddings inputs per request and the tool definitions the plan's
// workload carries; seed draws the tools. Its errors are InputErrors
// naming the flag.
func (s RequestShape) Shape(apiName string, seed uint64) (embedInputs int, tools []api.Tool, err error) {
	embed := false
	takesTools := apiName == "auto"
	if a, err := api.ByName(apiName); err == nil {
		embed, takesTools = api.IsEmbeddings(a), api.SendsTools(a)
	}
	switch {
	case s.EmbedInputs < 0:
		return 0, nil, inputErrorf("--embed-inputs: must be at least 1, got %d", s.EmbedInputs)
	case s.EmbedInputs > 0 && !embed:
		return 0, nil, inputErrorf("--embed-inputs: applies to an embeddings API (--api %s, %s or %s)", api.EmbedOpenAI, api.EmbedOllama, api.EmbedTEI)
	case s.EmbedInputs > 1<<16:
		return 0, nil, inputErrorf("--embed-inputs: at most 65536 inputs a request, got %d", s.EmbedInputs)
	case embed && s.Workload != "" && s.Workload != "synthetic":
		return 0, nil, inputErrorf("--workload %s: an embeddings API has no conversation; leave --workload out", s.Workload)
	case s.Tools < 0:
		return 0, nil, inputErrorf("--tools: must not be negative, got %d", s.Tools)
	case s.Tools > MaxTools:
		return 0, nil, inputErrorf("--tools: at most %d definitions, got %d", MaxTools, s.Tools)
	case s.Tools > 0 && s.ToolsFile != "":
		return 0, nil, inputErrorf("--tools-file: gives the definitions --tools would draw; give one or the other")
	case (s.Tools > 0 || s.ToolsFile != "") && !takesTools:
		return 0, nil, inputErrorf("--tools: %s takes no tool definitions (openai-chat and anthropic do)", apiName)
	}
	if embed {
		embedInputs = max(s.EmbedInputs, 1)
	}
	switch {
	case s.Tools > 0:
		tools = workload.Tools(s.Tools, seed)
	case s.ToolsFile != "":
		if tools, err = workload.ReadTools(s.ToolsFile); err != nil {
			return 0, nil, inputErrorf("--tools-file: %v", err)
		}
	}
	return embedInputs, tools, nil
}
