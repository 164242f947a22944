package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/internal/pace"
	"github.com/tokbench/tokbench/physics"
)

// Config configures a simulated server. Zero fields take the defaults of
// [DefaultConfig].
type Config struct {
	// Model, Quant and Hardware are catalog names of package physics;
	// GPUs is the tensor-parallel degree.
	Model    string
	Quant    string
	Hardware string
	GPUs     int
	// ServedModel is the model id the API reports; defaults to Model.
	ServedModel string

	// Engine configures the scheduler (batch size, token budget, seed,
	// EOS draw, speculative decoding).
	Engine EngineConfig
	// Cost, when set, replaces the physics cost model (tests use fixed
	// step times).
	Cost Cost

	// MaxModelLen bounds prompt + max tokens of one request (vLLM
	// max-model-len); zero means the model's own context length from the
	// catalog (131,072 for Llama 3.1), or 32,768 for a model it lacks.
	MaxModelLen int
	// DefaultMaxTokens is the output length of a request that names none; 256.
	DefaultMaxTokens int
	// MaxBodyBytes caps a request body (413 beyond it); 64 MiB, room
	// for a few large images or a long sound in base64.
	MaxBodyBytes int64
	// MaxInflight caps requests in flight (429 beyond it); 4096.
	MaxInflight int
	// MaxConns caps open connections when serving with Start. At the cap a
	// new connection replaces the one idle longest (idle, or new and
	// silent, for half a second at least); when none is, it waits until one
	// closes or idles that long. 8192.
	MaxConns int
	// BodyTimeout bounds reading one request's body (408 beyond it), so
	// clients that send part of a body cannot hold the server; 10 s.
	BodyTimeout time.Duration
	// ToolCallShare is the share of the streamed chat requests carrying
	// tools (OpenAI chat, Anthropic) that are answered with a call of one
	// (seeded per request); 0 means all of them, a negative share none.
	ToolCallShare float64
	// EmbedDims is the dimension of the simulator's embeddings; 384.
	EmbedDims int

	// onFlush, when set, is told how late each flush of a stream is against
	// the engine's schedule (benchmarks).
	onFlush func(late time.Duration, firstToken int)
	// onWake, when set, is told how late the engine loop woke for each step.
	onWake func(late time.Duration)
	// onStep, when set, is told each step's duration (engine time).
	onStep func(d time.Duration)
	// onArrival, when set, is told each request's arrival (engine time)
	// as the loop hands it to the engine.
	onArrival func(arrival time.Duration)
}

// Defaults of the preset.
const (
	DefaultModel       = "llama-3.1-8b"
	DefaultQuant       = "bf16"
	DefaultHardware    = "h100-sxm"
	defaultMaxModelLen = 32768
	defaultMaxTokens   = 256
	defaultMaxBody     = 64 << 20
	defaultMaxInflight = 4096
	defaultMaxConns    = 8192
	defaultBodyTimeout = 10 * time.Second
)

// DefaultConfig is the documented default preset: Llama 3.1 8B in BF16 on
// one H100 SXM, vLLM-like scheduling (256 sequences, 8192-token steps), no
// EOS (requests run to their max tokens), no speculative decoding.
func DefaultConfig() Config {
	return Config{
		Model: DefaultModel, Quant: DefaultQuant, Hardware: DefaultHardware, GPUs: 1,
		Engine: EngineConfig{
			MaxNumSeqs:       DefaultMaxNumSeqs,
			MaxBatchedTokens: DefaultMaxBatchedTokens,
		},
		DefaultMaxTokens: defaultMaxTokens,
		MaxBodyBytes:     defaultMaxBody,
		MaxInflight:      defaultMaxInflight,
		MaxConns:         defaultMaxConns,
		BodyTimeout:      defaultBodyTimeout,
	}
}

// ModelLen is the most tokens one request, or one input of an
// embeddings request, may hold: MaxModelLen, or its default for the
// model.
func (c Config) ModelLen() int { return c.withDefaults().MaxModelLen }

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Model == "" {
		c.Model = d.Model
	}
	if c.Quant == "" {
		c.Quant = d.Quant
	}
	if c.Hardware == "" {
		c.Hardware = d.Hardware
	}
	if c.GPUs == 0 {
		c.GPUs = d.GPUs
	}
	if c.ServedModel == "" {
		c.ServedModel = c.Model
	}
	if c.MaxModelLen == 0 {
		// Like vLLM: the model's own context length when known.
		c.MaxModelLen = defaultMaxModelLen
		if m, err := physics.LookupModel(c.Model); err == nil && m.MaxContext > 0 {
			c.MaxModelLen = m.MaxContext
		}
	}
	if c.DefaultMaxTokens == 0 {
		c.DefaultMaxTokens = d.DefaultMaxTokens
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = d.MaxInflight
	}
	if c.MaxConns == 0 {
		c.MaxConns = d.MaxConns
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = d.BodyTimeout
	}
	if c.EmbedDims <= 0 {
		c.EmbedDims = defaultEmbedDims
	}
	c.Engine = c.Engine.withDefaults()
	return c
}

// resyncAfter is how far the engine may fall behind the wall clock (a
// stalled machine) before it gives up catching up and restarts its schedule
// from now.
const resyncAfter = 50 * time.Millisecond

// Server is a simulated OpenAI-compatible inference server. It is safe for
// concurrent use. NewServer starts its engine goroutine; Close ends it.
type Server struct {
	cfg     Config
	eng     *Engine // owned by the loop goroutine
	kvCap   int
	base    time.Time // engine time zero on the monotonic clock
	created int64     // unix seconds, for response "created" fields
	handler http.Handler
	met     *serverMetrics

	mu      sync.Mutex
	inbox   []*stream
	cancels []uint64
	wake    chan struct{} // cap 1

	nextID   atomic.Uint64
	inflight atomic.Int64

	stop     context.CancelFunc
	loopDone chan struct{}
	// writers take each step's chunks for streaming responses, one channel
	// per writer goroutine; a stream always goes to the same writer, so its
	// chunks stay in order. The loop closes them when it ends.
	writers     []chan []job
	writersDone sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
	httpMu    sync.Mutex
	httpSrv   *http.Server
	serveDone chan struct{}
	watchDone chan struct{}
}

// NewServer builds the engine from cfg and starts its loop.
func NewServer(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	cost := cfg.Cost
	if cost == nil {
		var err error
		cost, err = DeploymentCost(cfg.Model, cfg.Quant, cfg.Hardware, cfg.GPUs)
		if err != nil {
			return nil, err
		}
	}
	eng, err := NewEngine(cfg.Engine, cost)
	if err != nil {
		return nil, err
	}
	if cfg.MaxModelLen < 2 {
		return nil, fmt.Errorf("max model len %d: must be >= 2", cfg.MaxModelLen)
	}
	now := time.Now()
	s := &Server{
		cfg: cfg, eng: eng, kvCap: eng.KVCapacityTokens(),
		base: now, created: now.Unix(),
		wake:     make(chan struct{}, 1),
		loopDone: make(chan struct{}),
	}
	s.met = newServerMetrics(s.kvCap)
	s.handler = s.routes()
	s.writers = make([]chan []job, runtime.GOMAXPROCS(0))
	for i := range s.writers {
		ch := make(chan []job, 256)
		s.writers[i] = ch
		s.writersDone.Go(func() {
			for jobs := range ch {
				for _, j := range jobs {
					s.write(j)
				}
			}
		})
	}
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.loop(ctx)
	return s, nil
}

// Config returns the server's configuration with defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// KVCapacityTokens is the simulated KV cache size in tokens.
func (s *Server) KVCapacityTokens() int { return s.kvCap }

// Handler returns the HTTP handler: /v1/chat/completions, /v1/completions,
// /v1/models, /metrics and /health.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on addr (such as "127.0.0.1:0") and serves until ctx is
// canceled or Close is called. It returns the OpenAI base URL, for example
// "http://127.0.0.1:8000/v1".
func (s *Server) Start(ctx context.Context, addr string) (string, error) {
	s.httpMu.Lock()
	defer s.httpMu.Unlock()
	if s.httpSrv != nil {
		return "", errors.New("sim server: already started")
	}
	select {
	case <-s.loopDone:
		return "", errors.New("sim server: closed")
	default:
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("sim server: listen %s: %w", addr, err)
	}
	lim := limitListener(ln, s.cfg.MaxConns)
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
		ConnState:         lim.connState,
	}
	s.httpSrv = srv
	s.serveDone = make(chan struct{})
	s.watchDone = make(chan struct{})
	go func() {
		defer close(s.serveDone)
		_ = srv.Serve(lim) // returns http.ErrServerClosed after Close
	}()
	// Stop when ctx ends; this goroutine ends with ctx or with Close.
	go func() {
		defer close(s.watchDone)
		select {
		case <-ctx.Done():
			_ = s.shutdown()
		case <-s.loopDone:
		}
	}()
	return "http://" + ln.Addr().String() + "/v1", nil
}

// Close stops the engine, ends every in-flight stream, shuts the listener
// down and waits for the server's goroutines to end. It is safe to call
// more than once.
func (s *Server) Close() error {
	err := s.shutdown()
	s.httpMu.Lock()
	watchDone := s.watchDone
	s.httpMu.Unlock()
	if watchDone != nil {
		<-watchDone
	}
	return err
}

// Shutdown stops taking requests (the listener of Start closes), lets the
// streams in flight end until ctx ends, then closes the server as Close
// does, cutting the streams still open.
func (s *Server) Shutdown(ctx context.Context) error {
	s.httpMu.Lock()
	srv := s.httpSrv
	s.httpMu.Unlock()
	if srv != nil {
		_ = srv.Shutdown(ctx) // an error is ctx's end: Close cuts what is left
	}
	return s.Close()
}

func (s *Server) shutdown() error {
	s.closeOnce.Do(func() {
		s.stop()
		<-s.loopDone
		s.httpMu.Lock()
		srv := s.httpSrv
		s.httpMu.Unlock()
		if srv == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
			s.closeErr = fmt.Errorf("sim server: shutdown: %w", err)
		}
		<-s.serveDone
	})
	return s.closeErr
}

// chunk is the output of one step for one stream.
type chunk struct {
	at     time.Duration // engine time of the step's end
	first  int           // index of the first token
	tokens int
	finish Finish
}

// stream connects one HTTP request to the engine loop. For a streaming
// response (sink set) the loop hands each step's chunk to a writer
// goroutine, which writes it to the response directly; otherwise the loop
// pushes chunks to the queue and the handler takes them.
type stream struct {
	req    Request
	sink   *sink // nil for a non-streaming response
	mu     sync.Mutex
	queue  []chunk
	closed bool          // engine stopped: no more chunks will come
	notify chan struct{} // cap 1: "queue changed"
}

// job is one chunk (or, with end set, the server's shutdown) for a
// streaming response.
type job struct {
	st  *stream
	c   chunk
	end bool
}

// writerFor is the writer goroutine that serves a stream.
func (s *Server) writerFor(id uint64) int { return int(id % uint64(len(s.writers))) }

// endStream tells a stream that no more chunks will come (loop goroutine).
func (s *Server) endStream(st *stream) {
	if st.sink == nil {
		st.close()
		return
	}
	s.writers[s.writerFor(st.req.ID)] <- []job{{st: st, end: true}}
}

func newStream(r Request) *stream {
	return &stream{req: r, notify: make(chan struct{}, 1)}
}

func (st *stream) push(c chunk) {
	st.mu.Lock()
	st.queue = append(st.queue, c)
	st.mu.Unlock()
	st.signal()
}

func (st *stream) close() {
	st.mu.Lock()
	st.closed = true
	st.mu.Unlock()
	st.signal()
}

func (st *stream) signal() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// take moves the queued chunks into buf.
func (st *stream) take(buf []chunk) ([]chunk, bool) {
	st.mu.Lock()
	buf = append(buf[:0], st.queue...)
	st.queue = st.queue[:0]
	closed := st.closed
	st.mu.Unlock()
	return buf, closed
}

// submit hands a stream to the engine loop.
func (s *Server) submit(st *stream) {
	s.mu.Lock()
	s.inbox = append(s.inbox, st)
	s.mu.Unlock()
	s.poke()
}

// cancel removes a request from the engine (its client went away).
func (s *Server) cancel(id uint64) {
	s.mu.Lock()
	s.cancels = append(s.cancels, id)
	s.mu.Unlock()
	s.poke()
}

func (s *Server) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop is the engine goroutine: the only one touching s.eng. It runs a step,
// sleeps until the wall clock reaches the step's end, then hands each stream
// its tokens. Requests that arrive meanwhile join at the next step boundary,
// as in a real engine. It ends when ctx is canceled (Close).
func (s *Server) loop(ctx context.Context) {
	defer close(s.loopDone)
	streams := make(map[uint64]*stream)
	defer func() {
		s.mu.Lock()
		for _, st := range s.inbox {
			streams[st.req.ID] = st
		}
		s.inbox = nil
		s.mu.Unlock()
		for _, st := range streams {
			s.endStream(st)
		}
		for _, ch := range s.writers {
			close(ch)
		}
		s.writersDone.Wait()
	}()
	timer := pace.NewTimer()
	defer timer.Close()
	var rate tokenRate
	// delivered is the engine time the loop has reached: the last step's
	// chunks went out then, which can be after the engine's clock (the
	// end of that step) when the front end writes chunks out.
	var delivered time.Duration
	for {
		if s.eng.Idle() {
			s.met.idle()
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
			}
			s.eng.AdvanceTo(time.Since(s.base))
		}
		s.drain(streams, max(s.eng.Now(), delivered))
		res, ok := s.eng.Step()
		if !ok {
			continue
		}
		// The step's chunks leave when the front end has written them
		// out (at its end without a front end).
		if !sleepUntil(ctx, timer, s.base.Add(res.Delivered)) {
			return
		}
		delivered = res.Delivered
		if s.cfg.onWake != nil {
			s.cfg.onWake(time.Since(s.base.Add(res.Delivered)))
		}
		if s.cfg.onStep != nil {
			s.cfg.onStep(res.End - res.Start)
		}
		if late := time.Since(s.base.Add(res.Delivered)); late > resyncAfter {
			s.eng.AdvanceTo(res.Delivered + late)
		}
		// One hand-off per writer per step, not a wake-up per stream.
		jobs := make([][]job, len(s.writers))
		var pushes []job
		generated := 0
		for _, em := range res.Emits {
			generated += em.Tokens
			st := streams[em.ID]
			if st == nil {
				continue
			}
			c := chunk{at: res.Delivered, first: em.First, tokens: em.Tokens, finish: em.Finish}
			if st.sink != nil {
				w := s.writerFor(em.ID)
				jobs[w] = append(jobs[w], job{st: st, c: c})
			} else {
				pushes = append(pushes, job{st: st, c: c})
			}
			if em.Finish != FinishNone {
				delete(streams, em.ID)
				s.met.finished(em.Finish)
			}
		}
		// /metrics counts the step before any of its chunks leaves: a
		// client that scrapes the moment its answer ended finds its
		// tokens counted (it found them a step late, now and then).
		s.met.step(res, generated, rate.add(res.End, generated))
		for _, p := range pushes {
			p.st.push(p.c)
		}
		for w, js := range jobs {
			if len(js) > 0 {
				s.writers[w] <- js
			}
		}
	}
}

// spinHard is the final stretch before a step's end spun on the clock:
// the engine sleeps on a precise timer (pace.Timer: a timerfd, and a Go
// timer at the same instant that a busy processor notices as it
// schedules) until then, which wakes it well within this margin, so token
// instants stay within microseconds of the schedule. A longer spin, or one
// that yields, would keep its processor from polling the network.
const spinHard = 200 * time.Microsecond

// sleepUntil waits until the monotonic clock reaches t. It reports false
// when ctx ends first.
func sleepUntil(ctx context.Context, timer *pace.Timer, t time.Time) bool {
	if ok, _ := timer.Until(ctx.Done(), t.Add(-spinHard)); !ok {
		return false
	}
	for time.Now().Before(t) {
	}
	return ctx.Err() == nil
}

// drain moves new streams into the engine, arrived at now, and applies
// cancellations.
func (s *Server) drain(streams map[uint64]*stream, now time.Duration) {
	s.mu.Lock()
	inbox, cancels := s.inbox, s.cancels
	s.inbox, s.cancels = nil, nil
	s.mu.Unlock()
	for _, st := range inbox {
		st.req.Arrival = now
		if s.cfg.onArrival != nil {
			s.cfg.onArrival(now)
		}
		if err := s.eng.Submit(st.req); err != nil {
			// Handlers check lengths first; this is a bug guard.
			s.endStream(st)
			continue
		}
		streams[st.req.ID] = st
		s.met.prompt(st.req.PromptTokens)
	}
	for _, id := range cancels {
		if s.eng.Cancel(id) {
			s.met.cancelled()
		}
		delete(streams, id)
	}
}
