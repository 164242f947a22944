package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/tokbench/tokbench/api"
)

// Tools is a seeded set of n function definitions with JSON-schema
// parameters, of the size and shape real agents send (a name, a sentence
// of description, two to five typed parameters, some required). The same
// n and seed give the same set; each function's name is distinct.
func Tools(n int, seed uint64) []api.Tool {
	rng := rand.New(rand.NewPCG(seed, 0x7001))
	out := make([]api.Tool, n)
	for i := range out {
		verb, noun := toolVerbs[rng.IntN(len(toolVerbs))], toolNouns[rng.IntN(len(toolNouns))]
		props := map[string]any{}
		var required []string
		for k := range 2 + rng.IntN(4) {
			p := toolParams[(rng.IntN(len(toolParams))+k)%len(toolParams)]
			if _, dup := props[p.name]; dup {
				continue
			}
			props[p.name] = map[string]any{"type": p.typ, "description": p.desc}
			if k == 0 || rng.IntN(2) == 0 {
				required = append(required, p.name)
			}
		}
		params, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
		out[i] = api.Tool{
			Name:        fmt.Sprintf("%s_%s_%d", verb, noun, i+1),
			Description: fmt.Sprintf("%s the %s that match the given parameters and return them as JSON.", strings.ToUpper(verb[:1])+verb[1:], noun),
			Parameters:  params,
		}
	}
	return out
}

var (
	toolVerbs  = []string{"get", "search", "create", "update", "list", "delete", "summarize", "lookup"}
	toolNouns  = []string{"weather", "orders", "tickets", "files", "users", "invoices", "flights", "events", "documents", "repositories"}
	toolParams = []struct{ name, typ, desc string }{
		{"query", "string", "Free-text search terms."},
		{"id", "string", "The identifier of the item."},
		{"limit", "integer", "The most results to return."},
		{"location", "string", "A city and country, e.g. Paris, France."},
		{"since", "string", "An ISO 8601 date: only items after it."},
		{"include_archived", "boolean", "Whether archived items are included."},
		{"units", "string", "metric or imperial."},
		{"owner", "string", "The user who owns the items."},
	}
)

// MaxToolsFileBytes bounds a tool definitions file (--tools-file): a
// megabyte holds a thousand large definitions; a model's context, never
// more.
const MaxToolsFileBytes = 1 << 20

// ReadTools reads tool definitions from a JSON file: an array of OpenAI
// chat tools ({"type": "function", "function": {...}}), of Anthropic
// tools ({name, description, input_schema}) or of plain {name,
// description, parameters}. Its errors name the file; a file larger than
// MaxToolsFileBytes is refused unread.
func ReadTools(path string) ([]api.Tool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, MaxToolsFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(buf) > MaxToolsFileBytes {
		return nil, fmt.Errorf("%s: larger than %d KiB: not a set of tool definitions", path, MaxToolsFileBytes>>10)
	}
	var raw []struct {
		Type        string          `json:"type"`
		Function    *api.Tool       `json:"function"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(buf, &raw); err != nil {
		return nil, fmt.Errorf("%s: want a JSON array of tool definitions: %w", path, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s: %w", path, errors.New("no tool definitions"))
	}
	out := make([]api.Tool, len(raw))
	for i, r := range raw {
		t := api.Tool{Name: r.Name, Description: r.Description, Parameters: r.Parameters}
		switch {
		case r.Function != nil:
			t = *r.Function
		case len(r.InputSchema) > 0:
			t.Parameters = r.InputSchema
		}
		if t.Name == "" {
			return nil, fmt.Errorf("%s: tool %d: no name", path, i)
		}
		if len(t.Parameters) == 0 {
			t.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out[i] = t
	}
	return out, nil
}

// ToolSource gives every request of a source the same tool definitions.
type ToolSource struct {
	base  Requester
	tools []api.Tool
}

// NewToolSource returns base's requests carrying tools.
func NewToolSource(base Requester, tools []api.Tool) *ToolSource {
	return &ToolSource{base: base, tools: tools}
}

// Request implements load.Source.
func (s *ToolSource) Request(i int) (*api.Request, int) {
	req, n := s.base.Request(i)
	return s.with(req), n
}

// WarmupRequest implements load.WarmupSource.
func (s *ToolSource) WarmupRequest(i int) (*api.Request, int) {
	if w, ok := s.base.(warmupRequester); ok {
		req, n := w.WarmupRequest(i)
		return s.with(req), n
	}
	return s.Request(i + 1<<30)
}

func (s *ToolSource) with(req *api.Request) *api.Request {
	r := *req
	r.Tools = s.tools
	return &r
}
