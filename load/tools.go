package load

import (
	"encoding/json"
	"sync"

	"github.com/tokbench/tokbench/api"
)

// toolCount is the token count of a request's tool definitions, counted
// once for the set a level's requests share (a workload's requests carry
// the same slice).
type toolCount struct {
	mu    sync.Mutex
	first *api.Tool // the set counted: its first element
	n     int
	count int
}

// toolTokens is the local token count of tools' JSON, as a chat API's
// tools member carries them; 0 for none.
func (r *Runner) toolTokens(tools []api.Tool) int {
	if len(tools) == 0 {
		return 0
	}
	c := &r.toolCount
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first == &tools[0] && c.n == len(tools) {
		return c.count
	}
	buf, err := json.Marshal(tools)
	if err != nil {
		return 0
	}
	c.first, c.n, c.count = &tools[0], len(tools), r.counter.Count(string(buf))
	return c.count
}

// ToolResult is what an agent chain sends back after an answer that
// called a tool, before the next turn: the tool's result, as a user
// message every chat API takes (the answer's call itself is the
// assistant's message before it).
var ToolResult = api.Message{Role: "user", Content: `Tool result: {"status": "ok", "items": 3, "note": "the call succeeded"}`}
