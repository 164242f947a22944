package load

import (
	"slices"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

func TestShardSplitsExactly(t *testing.T) {
	if _, err := ParseShard("4/4"); err == nil {
		t.Error("4/4 accepted")
	}
	for _, bad := range []string{"", "1", "a/2", "-1/2", "0/0"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) accepted", bad)
		}
	}
	for _, n := range []int{1, 3, 4, 7} {
		for _, total := range []int{0, 1, 5, 16, 17, 1000} {
			sum := 0
			for i := 0; i < n; i++ {
				s, err := ParseShard(fmtShard(i, n))
				if err != nil {
					t.Fatal(err)
				}
				p := s.Part(total)
				if p < total/n || p > total/n+1 {
					t.Errorf("shard %d/%d of %d = %d: uneven", i, n, total, p)
				}
				sum += p
			}
			if sum != total {
				t.Errorf("%d shards of %d sum to %d", n, total, sum)
			}
		}
	}
}

func fmtShard(i, n int) string { return string(rune('0'+i)) + "/" + string(rune('0'+n)) }

// TestShardConstantRateInterleaves: 4 shards at 100 req/s in total each
// send at 25 req/s, phase-shifted so the union is one send every 10 ms.
func TestShardConstantRateInterleaves(t *testing.T) {
	lv := Level{Load: metrics.Load{Mode: "rate", RateRPS: 100, Arrival: ArrivalConstant}, Requests: 40}
	var all []time.Duration
	for i := 0; i < 4; i++ {
		part := Shard{Index: i, Count: 4}.Apply(lv)
		if part.Load.RateRPS != 25 || part.Requests != 10 {
			t.Fatalf("shard %d: %+v", i, part)
		}
		offs, _ := Schedule(part.Load.Arrival, part.Load.RateRPS, 0, part.Requests, part.Seed)
		for _, o := range offs {
			all = append(all, o+part.Phase)
		}
	}
	seen := map[time.Duration]bool{}
	for _, o := range all {
		seen[o.Round(time.Millisecond)] = true
	}
	for k := 0; k < 40; k++ {
		if !seen[time.Duration(k)*10*time.Millisecond] {
			t.Errorf("no send at %d ms in the union of the shards", 10*k)
		}
	}
	c := Shard{Index: 1, Count: 4}.Apply(Level{Load: metrics.Load{Mode: "concurrency", Concurrency: 10}, Requests: 30, Warmup: 2})
	if c.Load.Concurrency != 3 || c.Requests != 8 || c.Warmup != 1 {
		t.Errorf("concurrency shard 1/4 of 10 users, 30 requests = %+v", c)
	}
}

// TestEveryShardWarmsUp is issue 34's case: --warmup 1 (the default) over
// 4 shards left shards 1–3 none, and their users started together. Each
// shard runs its share of the warm-up, at least one; none without one
// asked.
func TestEveryShardWarmsUp(t *testing.T) {
	for _, c := range []struct {
		warmup, shards int
		want           []int
	}{
		{1, 4, []int{1, 1, 1, 1}},
		{8, 4, []int{2, 2, 2, 2}},
		{5, 4, []int{2, 1, 1, 1}},
		{0, 4, []int{0, 0, 0, 0}},
	} {
		for i, want := range c.want {
			for _, mode := range []metrics.Mode{metrics.ModeConcurrency, metrics.ModeRate} {
				lv := Level{Load: metrics.Load{Mode: mode, Concurrency: 8, RateRPS: 4}, Requests: 40, Warmup: c.warmup}
				if got := (Shard{Index: i, Count: c.shards}).Apply(lv).Warmup; got != want {
					t.Errorf("%s: --warmup %d, shard %d/%d: %d warm-up requests, want %d", mode, c.warmup, i, c.shards, got, want)
				}
			}
		}
	}
}

// TestShardRampInterleaves: N shards of a ramped level start their users
// at the instants one unsharded ramp would — also when the users do not
// divide evenly among the shards.
func TestShardRampInterleaves(t *testing.T) {
	for _, c := range []struct{ users, shards int }{{8, 4}, {10, 3}, {5, 4}, {3, 4}, {1000, 7}} {
		ramp := time.Duration(c.users) * 100 * time.Millisecond
		lv := Level{Load: metrics.Load{Mode: "concurrency", Concurrency: c.users}, Requests: c.users, RampUp: ramp}
		var starts []time.Duration
		for i := 0; i < c.shards; i++ {
			part := Shard{Index: i, Count: c.shards}.Apply(lv)
			for u := 0; u < part.Load.Concurrency; u++ {
				starts = append(starts, part.userStart(u))
			}
		}
		slices.Sort(starts)
		if len(starts) != c.users {
			t.Fatalf("%d users over %d shards: %d starts", c.users, c.shards, len(starts))
		}
		for k, s := range starts {
			if want := lv.userStart(k); s != want || want != time.Duration(k)*100*time.Millisecond {
				t.Errorf("%d users over %d shards: start %d = %v, want %v", c.users, c.shards, k, s, want)
				break
			}
		}
	}
}
