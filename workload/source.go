package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"unsafe"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/tokenize"
)

// Counter counts a prompt's tokens exactly, e.g. with the server's own
// tokenizer (tokenize.Server).
type Counter interface {
	CountContext(ctx context.Context, text string) (int, error)
}

// Config says what requests a Source makes.
type Config struct {
	// Tokenizer builds and counts prompts.
	Tokenizer tokenize.Tokenizer
	// Counter, when set, counts every prompt instead (the model's own
	// tokenizer on the server); synthetic prompts are grown or trimmed
	// until it agrees with the requested length.
	Counter Counter
	// Input and Output are the lengths; Input is the unique part of each
	// prompt, after any shared prefix.
	Input, Output Dist
	// Rows, when set, are the prompts (cycled); a row's own length (its
	// max_tokens, or the token count of its recorded reply) overrides Output.
	Rows []Row
	// Corpus, when set, is cut into prompts of Input tokens.
	Corpus *Corpus
	// Media go with every request whose row has none of its own.
	Media MediaSpec
	// PrefixTokens of shared text start every prompt, one of PrefixGroups
	// distinct prefixes (request i uses prefix i mod groups), so an engine
	// with prefix caching serves those tokens from its cache.
	PrefixTokens, PrefixGroups int
	Model                      string
	IgnoreEOS                  bool
	// MinTokens is sent as min_tokens (vLLM), capped at each request's max_tokens.
	MinTokens int
	// Steps, above 1, is the length of the conversations (agent chains,
	// chat turns) the requests make: request i is turn i mod Steps of
	// conversation i / Steps. With rows, a conversation keeps its row, and
	// its later turns send the row's later human turns (ShareGPT) where it
	// has them.
	Steps int
	// Seed fixes everything; Level varies the prompts (and the order of
	// dataset rows) between the levels of a run, so no level is served
	// from the prompt cache an earlier one filled. Prefixes stay the same.
	Seed  uint64
	Level int
	// MaxBytes, when positive, bounds the memory the requests take
	// beyond Rows (see Config.CheckCopies): past it NewSource makes none
	// and says so, with ErrBudget.
	MaxBytes int64
}

// Source is a fixed list of requests made before a level starts. Request
// i is the (i mod len)-th; each time the list comes round again (a level
// run for a duration), and for every warm-up request, the request's first
// two words are drawn anew, so that no prompt of a run is sent twice and
// no measured request finds its prompt in the server's cache (a shared
// prefix, --prefix-tokens, stays shared). It implements load.Source and
// load.WarmupSource and is safe for concurrent use (it is read-only once
// made).
type Source struct {
	reqs     []*api.Request
	inTokens []int
	// where each request's own text starts: the message, and the byte
	// offset in its content past any shared prefix; synthetic when that
	// text is single-token words (" w1 w2 …"), whose first two are then
	// replaced in place, keeping the length exact; other text gets two
	// words put in front.
	at      []textAt
	words   []string
	seed    uint64
	tok     tokenize.Tokenizer
	counted bool // the prompts were counted by a Counter (the server's tokenizer)
	// media are the synthetic media's spec, and rowMedia says which
	// requests send their row's files instead.
	media    MediaSpec
	rowMedia []bool
}

type textAt struct {
	msg, off  int
	synthetic bool
}

// NewSource makes n requests from cfg. The same cfg and n give the same
// requests.
func NewSource(ctx context.Context, cfg Config, n int) (*Source, error) {
	if n < 1 {
		n = 1
	}
	seed, rng, order := cfg.order()
	syn, err := NewSynthetic(cfg.Tokenizer, seed)
	if err != nil {
		return nil, err
	}
	prefixes, err := cfg.prefixes()
	if err != nil {
		return nil, err
	}
	if cfg.MaxBytes > 0 {
		if err := cfg.checkCopies(order, prefixes, n); err != nil {
			return nil, err
		}
	}
	s := &Source{words: syn.words, seed: seed, tok: cfg.Tokenizer, counted: cfg.Counter != nil, media: cfg.Media}
	var mediaHeld int64
	for i := range n {
		prefix := ""
		if len(prefixes) > 0 {
			prefix = prefixes[i%len(prefixes)]
		}
		req := &api.Request{Model: cfg.Model, IgnoreEOS: cfg.IgnoreEOS, MaxTokens: cfg.Output.Sample(rng)}
		var text string
		var at textAt
		want := 0 // the exact length intended, when there is one
		var row Row
		turn := -1
		if len(cfg.Rows) > 0 {
			row, turn = cfg.rowOf(order, i)
		}
		switch {
		case turn >= 0:
			// A later turn of a recorded conversation: its human turn,
			// answered as long as the recorded reply.
			text = row.Turns[turn]
			if r := row.TurnReplies[turn]; r != "" {
				req.MaxTokens = max(1, cfg.Tokenizer.Count(r))
			}
		case len(cfg.Rows) > 0:
			switch {
			case row.MaxTokens > 0:
				req.MaxTokens = row.MaxTokens
			case row.Reply != "":
				req.MaxTokens = max(1, cfg.Tokenizer.Count(row.Reply))
			}
			if len(row.Messages) > 0 {
				req.Messages = append([]api.Message(nil), row.Messages...)
				if prefix != "" {
					req.Messages[0].Content = prefix[1:] + "\n\n" + req.Messages[0].Content
					at = textAt{off: len(prefix) + 1}
				}
			} else {
				text = row.Prompt
				if prefix != "" {
					text = prefix[1:] + "\n\n" + text
					at = textAt{off: len(prefix) + 1}
				}
			}
		case cfg.Corpus != nil:
			n := cfg.Input.Sample(rng)
			if text, err = cfg.Corpus.Cut(cfg.Tokenizer, n, rng); err != nil {
				return nil, err
			}
			if prefix != "" {
				text = prefix[1:] + "\n\n" + text
				at = textAt{off: len(prefix) + 1}
			} else {
				want = n
			}
		default:
			n := cfg.Input.Sample(rng)
			if prefix != "" {
				text = syn.Continue(n)
			} else if text, err = syn.Prompt(n); err != nil {
				return nil, err
			}
			// " w1 … wk" + " u1 … un": every word stays one token.
			at = textAt{off: len(prefix), synthetic: true}
			text = prefix + text
			want = cfg.PrefixTokens + n
		}
		if req.Messages == nil {
			req.Messages = []api.Message{{Role: "user", Content: text}}
		}
		round := i // the row's round: a conversation's, with Steps
		if cfg.Steps > 1 {
			round = i / cfg.Steps
		}
		if len(order) > 0 && round >= len(order) {
			// A dataset smaller than the level: its rows come round again,
			// each time with words of their own in front.
			s.redraw(req, at, 1<<50+uint64(i), 0)
		}
		if cfg.MinTokens > 0 {
			req.Extra = map[string]any{"min_tokens": min(cfg.MinTokens, req.MaxTokens)}
		}
		count, err := cfg.count(ctx, req, want, syn)
		if err != nil {
			return nil, err
		}
		if turn >= 0 {
			row = Row{} // a row's files go with its first turn
		}
		if err := cfg.attachMedia(req, row, i, seed, &mediaHeld); err != nil {
			return nil, err
		}
		s.rowMedia = append(s.rowMedia, len(row.Media) > 0)
		s.reqs = append(s.reqs, req)
		s.inTokens = append(s.inTokens, count)
		s.at = append(s.at, at)
	}
	return s, nil
}

// order is the seed of cfg's level, the generator its requests draw from,
// and the order its rows are sent in (nil without rows).
func (cfg Config) order() (seed uint64, rng *rand.Rand, order []int) {
	seed = cfg.Seed + uint64(cfg.Level)*0x9e3779b97f4a7c15
	rng = rand.New(rand.NewPCG(seed, seed^0x5eed0f1e))
	if len(cfg.Rows) > 0 {
		order = rng.Perm(len(cfg.Rows))
	}
	return seed, rng, order
}

// prefixes are the shared prefixes (none without PrefixTokens). They come
// from their own generator so that they are the same for every level and
// input length of a run.
func (cfg Config) prefixes() ([]string, error) {
	if cfg.PrefixTokens <= 0 {
		return nil, nil
	}
	pg, err := NewSynthetic(cfg.Tokenizer, cfg.Seed^0x9f1e5)
	if err != nil {
		return nil, err
	}
	var out []string
	for range max(cfg.PrefixGroups, 1) {
		p, err := pg.Prompt(cfg.PrefixTokens)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// rowOf is the row request i sends (order is cfg.order's), and which of
// its human turns: -1 its first (its prompt or messages), k ≥ 0 its
// Turns[k], a later turn of a recorded conversation.
func (cfg Config) rowOf(order []int, i int) (Row, int) {
	if cfg.Steps > 1 && i%cfg.Steps > 0 {
		row := cfg.Rows[order[i/cfg.Steps%len(order)]]
		if k := i%cfg.Steps - 1; k < len(row.Turns) {
			return row, k
		}
	}
	ri := i
	if cfg.Steps > 1 && i%cfg.Steps == 0 {
		ri = i / cfg.Steps // a conversation's first turn is its row's
	}
	return cfg.Rows[order[ri%len(order)]], -1
}

// messageBytes is what one message of a request's own list takes.
const messageBytes = int64(unsafe.Sizeof(api.Message{}))

// redrawBytes bounds the words redraw puts in front of a row's text (two
// of candidates, which are 8 bytes at most, and two spaces).
const redrawBytes = 64

// rowCopy is the memory request i's prompt (of rows in order, with
// prefixes) takes beyond its row: its own list of the row's messages,
// and a copy of the row's text when the shared prefix goes in front of it
// or, once every row has been sent, two words of its own (redraw); a
// row's text sent as it is is the row's, shared.
func (cfg Config) rowCopy(order []int, prefixes []string, i int) int64 {
	row, turn := cfg.rowOf(order, i)
	round := i
	if cfg.Steps > 1 {
		round = i / cfg.Steps
	}
	again := round >= len(order)
	prefix, text, msgs := 0, 0, int64(1)
	switch {
	case turn >= 0:
		text = len(row.Turns[turn])
	case len(row.Messages) > 0:
		text, msgs = len(row.Messages[0].Content), int64(len(row.Messages))
		if len(prefixes) > 0 {
			prefix = len(prefixes[i%len(prefixes)]) + 1
		}
	default:
		text = len(row.Prompt)
		if len(prefixes) > 0 {
			prefix = len(prefixes[i%len(prefixes)]) + 1
		}
	}
	n := msgs * messageBytes
	if prefix > 0 || again {
		n += int64(text + prefix)
		if again {
			n += redrawBytes
		}
	}
	return n
}

// CheckCopies refuses, with ErrBudget and before any request is made, n
// requests of NewSource(ctx, cfg, n) whose copies of the rows would take
// more than MaxBytes (none when it is 0), naming the row with which they
// pass it. The requests share cfg.Rows' text where they send it as it
// is; each has its own list of its row's messages, and a copy of the
// row's text where the shared prefix goes in front of it or where it is
// sent again once every row has been (with two words of its own): a
// dataset of 1,000 rows sent by a level of 5,000 requests is held four
// times over besides the rows. Synthetic and corpus prompts are not
// counted.
func (cfg Config) CheckCopies(n int) error {
	if cfg.MaxBytes <= 0 || len(cfg.Rows) == 0 {
		return nil
	}
	_, _, order := cfg.order()
	prefixes, err := cfg.prefixes()
	if err != nil {
		return err
	}
	return cfg.checkCopies(order, prefixes, max(n, 1))
}

// checkCopies is CheckCopies with the level's order and prefixes.
func (cfg Config) checkCopies(order []int, prefixes []string, n int) error {
	if len(cfg.Rows) == 0 {
		return nil
	}
	var total int64
	for i := range n {
		if total += cfg.rowCopy(order, prefixes, i); total > cfg.MaxBytes {
			row, _ := cfg.rowOf(order, i)
			return budgetError(fmt.Sprintf("the %d requests of a level made of its %d rows would take more than the %d bytes its rows leave of its budget: they pass it at request %d, the row of line %d",
				n, len(cfg.Rows), cfg.MaxBytes, i+1, row.Line))
		}
	}
	return nil
}

// budgetError is an ErrBudget with its own words.
type budgetError string

func (e budgetError) Error() string        { return string(e) }
func (e budgetError) Is(target error) bool { return target == ErrBudget }

// count returns the prompt's tokens. Without a Counter the synthetic
// length is exact by construction and other prompts are counted with the
// tokenizer. With one, the server's count is the truth: a synthetic prompt
// gets words appended or removed until it matches want.
func (cfg Config) count(ctx context.Context, req *api.Request, want int, syn *Synthetic) (int, error) {
	if cfg.Counter == nil {
		if want > 0 {
			return want, nil
		}
		return cfg.Tokenizer.Count(req.Prompt()), nil
	}
	msg := &req.Messages[len(req.Messages)-1]
	for attempt := 0; ; attempt++ {
		got, err := cfg.Counter.CountContext(ctx, req.Prompt())
		if err != nil {
			return 0, err
		}
		if want == 0 || got == want || attempt == 16 {
			if want > 0 && got != want {
				return 0, fmt.Errorf("the server counts %d tokens in a prompt built for %d; use a local --tokenizer", got, want)
			}
			return got, nil
		}
		switch {
		case got < want && attempt < 4:
			msg.Content += syn.Continue(want - got)
		case got < want:
			// Random words may each be two of the server's tokens, and a
			// word added and dropped in turn need never land on the count:
			// close in one of the shortest words at a time.
			msg.Content += syn.Short(1)
		default:
			msg.Content = dropWords(msg.Content, got-want)
		}
	}
}

// dropWords removes the last k space-led words of s.
func dropWords(s string, k int) string {
	for ; k > 0; k-- {
		i := len(s) - 1
		for i > 0 && s[i] != ' ' {
			i--
		}
		if i <= 0 {
			return s
		}
		s = s[:i]
	}
	return s
}

// Len is the number of distinct requests.
func (s *Source) Len() int { return len(s.reqs) }

// Request implements load.Source: the i-th request and its prompt's token
// count. The request is shared; callers must not modify it.
func (s *Source) Request(i int) (*api.Request, int) {
	j := i % len(s.reqs)
	if round := i / len(s.reqs); round > 0 {
		return s.variant(j, uint64(round))
	}
	return s.reqs[j], s.inTokens[j]
}

// WarmupRequest implements load.WarmupSource: a request like the i-th
// measured one, its first words drawn anew, so that the warm-up never
// fills the server's prompt cache with a prompt the level then sends.
func (s *Source) WarmupRequest(i int) (*api.Request, int) {
	return s.variant(i%len(s.reqs), 1<<40+uint64(i))
}

// variant is request j with two words of its own text drawn for round.
func (s *Source) variant(j int, round uint64) (*api.Request, int) {
	base := s.reqs[j]
	req := *base
	req.Messages = append([]api.Message(nil), base.Messages...)
	s.redrawMedia(&req, j, round)
	if s.redraw(&req, s.at[j], round, j) {
		if s.counted {
			// The prompts were counted by the server's tokenizer, which a
			// level must not call for every request: two words more.
			return &req, s.inTokens[j] + 2
		}
		return &req, s.tok.Count(req.Prompt()) // the words join the text's first: count it whole
	}
	return &req, s.inTokens[j]
}

// redraw changes req's own text (at) for round of request j, in place: a
// synthetic text's first two words are drawn anew (its length stays
// exact), other text gets two words in front, and then redraw reports
// true: the prompt must be counted again.
func (s *Source) redraw(req *api.Request, at textAt, round uint64, j int) (recount bool) {
	h := mix(s.seed ^ mix(round*0x9e3779b97f4a7c15+uint64(j)))
	w1, w2 := s.words[h%uint64(len(s.words))], s.words[(h>>32)%uint64(len(s.words))]
	m := &req.Messages[at.msg]
	own := m.Content[at.off:]
	if at.synthetic {
		rest := skipWords(own, 2)
		switch n := strings.Count(own[:len(own)-len(rest)], " "); n {
		case 0: // no words of its own to redraw
		case 1:
			m.Content = m.Content[:at.off] + " " + w1 + rest
		default:
			m.Content = m.Content[:at.off] + " " + w1 + " " + w2 + rest
		}
		return false
	}
	m.Content = m.Content[:at.off] + w1 + " " + w2 + " " + own
	return true
}

// skipWords is s (space-led words) without its first k words.
func skipWords(s string, k int) string {
	i := 0
	for ; k > 0 && i < len(s); k-- {
		i++ // the space
		for i < len(s) && s[i] != ' ' {
			i++
		}
	}
	return s[i:]
}

// mix is splitmix64's finaliser: a well-spread hash of x.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
