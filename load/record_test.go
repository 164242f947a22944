package load

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
)

// usageResponse is a completed response whose i-th token chunk arrives at
// (i+1)·10 ms, carries texts[i] (as reasoning when it starts with "r:") and
// the running completion_tokens cum[i] (0: no usage on that chunk), with
// final usage total.
func usageResponse(texts []string, cum []int, total int) *api.Response {
	start := time.Now()
	resp := &api.Response{Start: start, Done: start.Add(time.Second), Status: 200, Finish: "length", SawDone: true,
		Usage: &api.Usage{PromptTokens: 5, CompletionTokens: total}}
	for i, s := range texts {
		c := api.Chunk{At: start.Add(time.Duration(i+1) * 10 * time.Millisecond), Cumulative: cum[i]}
		if r, ok := strings.CutPrefix(s, "r:"); ok {
			c.Reasoning = r
		} else {
			c.Text = s
		}
		resp.Chunks = append(resp.Chunks, c)
	}
	return resp
}

// TestRecordUsagePerChunk: when every token chunk carries the server's
// running completion_tokens, rising and ending at the final usage, each
// chunk counts its difference from the one before, whatever its text gives
// locally; otherwise the total is spread as before (AssignTokens over local
// counts), exactly as if the chunks carried no usage.
func TestRecordUsagePerChunk(t *testing.T) {
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	// cl100k counts these 3, 1, 3, 2, 3 tokens.
	texts := []string{"Okay, the", " user", " asks why.", " thanks to", " Rayleigh scattering"}
	cases := []struct {
		name  string
		texts []string
		cum   []int
		total int
		want  []int // nil: the estimate, as without per-chunk usage
	}{
		{"one token each", []string{"The", " sky", " is", " blue"}, []int{1, 2, 3, 4}, 4, []int{1, 1, 1, 1}},
		{"3,1,2 tokens, texts counting otherwise", texts, []int{3, 4, 6, 9, 10}, 10, []int{3, 1, 2, 3, 1}},
		{"reasoning chunks count as output", []string{"r:Okay, the", "r: user", " asks why.", " thanks to", " Rayleigh scattering"},
			[]int{1, 3, 4, 7, 8}, 8, []int{1, 2, 1, 3, 1}},
		{"no per-chunk usage", texts, []int{0, 0, 0, 0, 0}, 10, nil},
		{"one chunk without usage", texts, []int{3, 4, 0, 9, 10}, 10, nil},
		{"first chunk without usage", texts, []int{0, 4, 6, 9, 10}, 10, nil},
		{"falling", texts, []int{3, 4, 6, 5, 10}, 10, nil},
		{"standing still: a token chunk of no tokens", texts, []int{3, 4, 4, 9, 10}, 10, nil},
		{"last below the final usage (EOS counted after it): the rest goes to the last chunk", texts, []int{3, 4, 6, 9, 10}, 11, []int{3, 1, 2, 3, 2}},
		{"last above the final usage", texts, []int{3, 4, 6, 9, 12}, 10, nil},
		{"last far below the final usage", texts, []int{3, 4, 6, 9, 10}, 30, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := usageResponse(c.texts, c.cum, c.total)
			rec := Record(resp, tok, RecordInfo{LevelStart: resp.Start})
			if !rec.OK || rec.OutputTokens != c.total || rec.TokenSource != metrics.SourceUsage {
				t.Fatalf("ok %v, output tokens %d (%s), want %d (usage)", rec.OK, rec.OutputTokens, rec.TokenSource, c.total)
			}
			want := c.want
			if want == nil {
				// The existing method: the same response without per-chunk usage.
				bare := usageResponse(c.texts, make([]int, len(c.texts)), c.total)
				want = Record(bare, tok, RecordInfo{LevelStart: bare.Start}).ChunkTokens
				est := make([]int, len(c.texts))
				for i, s := range c.texts {
					est[i] = tok.Count(strings.TrimPrefix(s, "r:"))
				}
				if w := metrics.AssignTokens(est, c.total); !slices.Equal(want, w) {
					t.Fatalf("without per-chunk usage: chunk tokens %v, want AssignTokens %v", want, w)
				}
			}
			if !slices.Equal(rec.ChunkTokens, want) {
				t.Errorf("Record(cumulative %v, usage %d).ChunkTokens = %v, want %v", c.cum, c.total, rec.ChunkTokens, want)
			}
			// ITL: every token after the first chunk's, each a share of its
			// chunk's 10 ms gap.
			var itl []float64
			for i := 1; i < len(want); i++ {
				for range want[i] {
					itl = append(itl, 10/float64(want[i]))
				}
			}
			got := rec.AppendITL(nil)
			if len(got) != len(itl) {
				t.Fatalf("ITL = %v, want %v", got, itl)
			}
			for i := range got {
				if d := got[i] - itl[i]; d > 1e-9 || d < -1e-9 {
					t.Fatalf("ITL = %v, want %v", got, itl)
				}
			}
		})
	}
}

// countingTokenizer records the longest text it was asked to count.
type countingTokenizer struct {
	tokenize.Tokenizer
	longest int
}

func (c *countingTokenizer) Count(s string) int {
	c.longest = max(c.longest, len(s))
	return c.Tokenizer.Count(s)
}

// TestRecordHugeChunkNotTokenized: with the server's usage known, a chunk
// of megabytes is not run through the tokenizer just to spread the total
// over the chunks; the tokens still sum to the usage.
func TestRecordHugeChunkNotTokenized(t *testing.T) {
	base, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	tok := &countingTokenizer{Tokenizer: base}
	t0 := time.Now()
	resp := &api.Response{Start: t0, Done: t0.Add(time.Second), Usage: &api.Usage{CompletionTokens: 10},
		Chunks: []api.Chunk{{At: t0.Add(10 * time.Millisecond), Text: " hello"}, {At: t0.Add(20 * time.Millisecond), Text: strings.Repeat("x", 8<<20)}}}
	rec := Record(resp, tok, RecordInfo{})
	if tok.longest > maxCountedChunk {
		t.Errorf("the tokenizer was given %d bytes", tok.longest)
	}
	if rec.OutputTokens != 10 || rec.ChunkTokens[0]+rec.ChunkTokens[1] != 10 || rec.ChunkTokens[1] < rec.ChunkTokens[0] {
		t.Errorf("tokens %d over chunks %v", rec.OutputTokens, rec.ChunkTokens)
	}
}
