package load

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/busy"
	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/internal/gcroom"
	"github.com/tokbench/tokbench/metrics"
)

// TestOpenLoopNeverEarly: the pacer wakes ahead of each instant and the
// send's goroutine waits out the rest, so no request reaches the server
// before its scheduled instant (the server's kernel receive stamp), over
// gaps both longer and shorter than the pacer's lead; and each record's
// queue is its t0 after that instant, never before it.
func TestOpenLoopNeverEarly(t *testing.T) {
	for _, rate := range []float64{40, 400} {
		srv := fakellm.New(fakellm.Script{TTFT: 2 * time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
		r := newRunner(t, srv)
		lv := Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: rate, Arrival: ArrivalConstant}, Requests: 40}
		res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 2})
		streams := srv.Streams()
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != 40 || len(streams) != 40 {
			t.Fatalf("%v req/s: %d records, %d requests at the server, want 40 of each", rate, len(res.Records), len(streams))
		}
		var due, arrived []time.Time
		for _, rec := range res.Records {
			if rec.QueueMs < 0 {
				t.Errorf("%v req/s: record %d left %.3f ms before its instant", rate, rec.ID, -rec.QueueMs)
			}
			due = append(due, rec.Start.Add(-time.Duration(rec.QueueMs*float64(time.Millisecond))))
		}
		for _, s := range streams {
			arrived = append(arrived, s.Arrived)
		}
		// The lead reported is one the sleeps aimed for: at most a quarter
		// of the gap, whatever the pacer learned. A level whose every sleep
		// was skipped (a machine holding the process) has none, and no
		// wake-ups either.
		if p := res.Level.Pacer; p == nil || (p.WakeLateMs != nil) != (p.LeadMs > 0) || p.LeadMs > 1e3/rate/4 || p.LearnedLeadMs < 0.3 {
			t.Errorf("%v req/s: pacer %+v, want lead_ms in (0, %.3f] where the pacer slept, and lead_learned_ms at least 0.3", rate, p, 1e3/rate/4)
		}
		slices.SortFunc(due, time.Time.Compare)
		slices.SortFunc(arrived, time.Time.Compare)
		for i := range due {
			// The records' instants are rounded to the ns by their ms
			// figures: a microsecond is far below any early send.
			if early := due[i].Sub(arrived[i]); early > time.Microsecond {
				t.Errorf("%v req/s: request %d reached the server %v before its instant", rate, i, early)
			}
		}
	}
}

// TestConversationTurnsOnTheirInstant: a conversation's later turn is
// built within its think time and sent on its instant (the previous
// answer's end and the think time): never before it, and, on a machine
// that let the test run, within a fraction of a millisecond of it (a Go
// timer alone wakes up to a millisecond late, and building the turn after
// it came on top).
func TestConversationTurnsOnTheirInstant(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 2 * time.Millisecond, Gap: time.Millisecond, Tokens: 3, Usage: true})
	defer srv.Close()
	r := newRunner(t, srv)
	const think = 12 * time.Millisecond
	// One conversation at a time: the test's own waits do not keep each
	// other off the cores.
	lv := Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 1}, Requests: 4, Steps: 4, ThinkTime: think}
	watch := busy.Start()
	res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 3})
	timed := watch.Stop().Judge(t, "the turns' lateness")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 16 {
		t.Fatalf("%d records, want 4 conversations of 4 turns", len(res.Records))
	}
	ends := map[[2]int]time.Time{}
	for _, rec := range res.Records {
		ends[[2]int{rec.Chain, rec.Step}] = rec.Start.Add(time.Duration(rec.DoneMs * float64(time.Millisecond)))
	}
	var late []float64
	for _, rec := range res.Records {
		if rec.Step < 2 {
			continue
		}
		prev, ok := ends[[2]int{rec.Chain, rec.Step - 1}]
		if !ok {
			t.Fatalf("conversation %d has no turn %d", rec.Chain, rec.Step-1)
		}
		l := float64(rec.Start.Sub(prev.Add(think))) / 1e6
		if l < 0 {
			t.Errorf("conversation %d turn %d went %.3f ms before its instant", rec.Chain, rec.Step, -l)
		}
		late = append(late, l)
	}
	slices.Sort(late)
	if len(late) != 12 {
		t.Fatalf("%d later turns, want 12", len(late))
	}
	if p50 := late[len(late)/2]; timed && p50 > 0.3 {
		t.Errorf("later turns left p50 %.3f ms after their instants, want within 0.3 ms", p50)
	}
}

// stampedSource records the instant each request was built.
type stampedSource struct {
	fixedSource
	mu    sync.Mutex
	built map[int]time.Time
}

func (s *stampedSource) Request(i int) (*api.Request, int) {
	s.mu.Lock()
	s.built[i] = time.Now()
	s.mu.Unlock()
	return s.fixedSource.Request(i)
}

// TestBuilderBuildsAfterASend: once the builder is as far ahead as it may
// go, it builds the next request only when a send has reached its instant,
// so that a long prompt's body is built in the gap after a write, not
// while the next send prepares: request depth+k is built no earlier than
// request k's instant, and every request is still sent.
func TestBuilderBuildsAfterASend(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	r := newRunner(t, srv)
	const n = aheadRequests + 30
	lv := Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: 500, Arrival: ArrivalConstant}, Requests: n}
	src := &stampedSource{fixedSource: fixedSource{maxTokens: 2}, built: map[int]time.Time{}}
	res, err := r.RunLevel(context.Background(), 0, lv, src)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != n {
		t.Fatalf("%d records, want %d", len(res.Records), n)
	}
	start := time.Unix(0, r.Progress.Start.Load())
	offsets, err := Schedule(ArrivalConstant, 500, 0, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := aheadRequests; i < n; i++ {
		due := start.Add(offsets[i-aheadRequests])
		if at, ok := src.built[i]; !ok {
			t.Errorf("request %d was never built", i)
		} else if at.Before(due) {
			t.Errorf("request %d was built %v before request %d's instant: the builder ran beside a send preparing", i, due.Sub(at), i-aheadRequests)
		}
	}
}

// TestOpenLoopInterruptSendsNothingAhead: the sends started ahead of
// their instants and parked (up to startAhead) do not go out when the
// level is interrupted before their instants, and no goroutine is left
// behind (TestMain's leak check). A send the pacer let go before the
// interrupt still goes out, on its instant: at most its lead (a quarter of
// the 5 ms gap) after the pacer woke, so any send due more than a whole
// gap after the interrupt went out parked.
func TestOpenLoopInterruptSendsNothingAhead(t *testing.T) {
	const rate, gap = 200, 5 * time.Millisecond
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Tokens: 2, Usage: true})
	r := newRunner(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The interrupt comes as the fifth record is kept, however long the
	// level took to start; its instant is taken after the cancel, so a
	// send let go after it was let go before the pacer saw it.
	var kept, cancelled atomic.Int64
	r.Sink = func(metrics.Record) {
		if kept.Add(1) == 5 {
			cancel()
			cancelled.Store(time.Now().UnixNano())
		}
	}
	lv := Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: rate, Arrival: ArrivalConstant}, Requests: 400}
	res, err := r.RunLevel(ctx, 0, lv, fixedSource{maxTokens: 2})
	streams := srv.Streams()
	srv.Close()
	if err != ErrInterrupted {
		t.Fatalf("err %v, want ErrInterrupted", err)
	}
	if len(res.Records) < 5 || len(res.Records) >= 400 {
		t.Fatalf("%d records, want 5 or more of the 400, not all", len(res.Records))
	}
	if len(streams) > len(res.Records) {
		t.Errorf("the server saw %d requests, the level recorded %d: a send went out unrecorded", len(streams), len(res.Records))
	}
	end := time.Unix(0, cancelled.Load())
	for _, rec := range res.Records {
		if due := rec.Start.Add(-time.Duration(rec.QueueMs * float64(time.Millisecond))); due.Sub(end) > gap {
			t.Errorf("record %d was due %v after the interrupt, and went out: it was parked", rec.ID, due.Sub(end))
		}
	}
}

// growingSource asks request i for i+1 tokens, so that the fake server's
// stream of each request says which it was.
type growingSource struct{}

func (growingSource) Request(i int) (*api.Request, int) {
	return &api.Request{Model: "fake-model", MaxTokens: i + 1,
		Messages: []api.Message{{Role: "user", Content: "hello there"}}}, 2
}

// TestOpenLoopCatchesUpInOrder: sends behind their instants (here a
// trace's burst, all due at once) reach the server in the schedule's
// order, on one processor too, where each send's goroutine is readied
// behind whatever ran before it: the pacer lets the next send go only once
// the one before has reached its write.
func TestOpenLoopCatchesUpInOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Usage: true})
	r := wireRunner(t, srv)
	const n = 24
	lv := Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: 1000, Arrival: metrics.ArrivalTrace}, Requests: n, Offsets: make([]time.Duration, n)}
	res, err := r.RunLevel(context.Background(), 0, lv, growingSource{})
	streams := srv.Streams()
	srv.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != n || len(streams) != n {
		t.Fatalf("%d records, %d requests at the server, want %d of each", len(res.Records), len(streams), n)
	}
	if c := res.Level.Connections; c != nil && c.Opened > 0 {
		t.Errorf("%d connections dialled by a send, want every one opened before the level", c.Opened)
	}
	slices.SortStableFunc(streams, func(a, b fakellm.Stream) int { return a.Arrived.Compare(b.Arrived) })
	var order []int
	for _, s := range streams {
		order = append(order, len(s.Tokens)-1)
	}
	for i, k := range order {
		if k != i {
			t.Errorf("the burst's requests reached the server in the order %v, want the schedule's", order)
			break
		}
	}
}

// TestKeepAwakeLevel: with KeepAwake, a level runs with a loop on each of
// the process's processors and says so in its client health, and none is
// left running once it ends.
func TestKeepAwakeLevel(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SCHED_IDLE is Linux's")
	}
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	r := wireRunner(t, srv)
	r.KeepAwake = true
	lv := Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: 200, Arrival: ArrivalConstant}, Requests: 20}
	res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Level.Requests.Completed != 20 {
		t.Errorf("%d of 20 requests completed", res.Level.Requests.Completed)
	}
	c := res.Level.Client
	if c == nil || c.KeptAwake == nil || c.KeptAwake.CPUs < 1 || c.KeptAwake.CPUs > runtime.NumCPU() {
		t.Fatalf("client health %+v, want kept_awake on this process's processors", c)
	}
	if left := loopsOf(os.Getpid()); len(left) > 0 {
		t.Errorf("loops %v still run after the level", left)
	}
	// Without it, no loop and no figure.
	r.KeepAwake = false
	res, err = r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Level.Client == nil || res.Level.Client.KeptAwake != nil {
		t.Errorf("client health %+v without KeepAwake, want no kept_awake", res.Level.Client)
	}
}

// loopsOf lists the pids of processes whose command line names parent
// as the pid they keep awake for.
func loopsOf(parent int) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 5 && strings.Contains(args[2], "/proc/$$/stat") && args[4] == strconv.Itoa(parent) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// A level gives the collector room while it runs and says how much, puts
// GOGC back when it ends, and leaves a GOGC set in the environment alone.
func TestLevelGivesCollectorRoom(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	r := wireRunner(t, srv)
	lv := Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: 200, Arrival: ArrivalConstant}, Requests: 10}
	t.Setenv("GOGC", "")
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	room, release := gcroom.Hold(0)
	release()
	if room == 0 {
		t.Skip("the machine has no memory to spare for the collector's room")
	}
	res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Level.Client; c == nil || c.GCRoomBytes < 4<<20 || c.GCRoomBytes > gcroom.DefaultRoom {
		t.Errorf("client health %+v, want gc_room_bytes between 4 MiB and %d", c, gcroom.DefaultRoom)
	}
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GOGC %d after the level, want 100 back", p)
	}
	t.Setenv("GOGC", "100")
	res, err = r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Level.Client; c == nil || c.GCRoomBytes != 0 {
		t.Errorf("client health %+v with GOGC in the environment, want no gc_room_bytes", c)
	}
}
