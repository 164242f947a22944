package load

import (
	"math"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

func gaps(s []time.Duration) []float64 {
	out := make([]float64, 0, len(s)-1)
	for i := 1; i < len(s); i++ {
		out = append(out, (s[i] - s[i-1]).Seconds())
	}
	return out
}

func meanCV(x []float64) (mean, cv float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	var sq float64
	for _, v := range x {
		sq += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sq/float64(len(x))) / mean
}

func TestSchedule(t *testing.T) {
	c, err := Schedule(ArrivalConstant, 4, 0, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range c {
		if d != time.Duration(i)*250*time.Millisecond {
			t.Errorf("constant[%d] = %v, want %v", i, d, time.Duration(i)*250*time.Millisecond)
		}
	}
	cases := []struct {
		arrival metrics.Arrival
		burst   float64
		wantCV  float64
	}{
		{ArrivalPoisson, 0, 1},
		{ArrivalGamma, 1, 1},
		{ArrivalGamma, 0.25, 2}, // CV = 1/sqrt(shape)
		{ArrivalGamma, 4, 0.5},
	}
	for _, c := range cases {
		s, err := Schedule(c.arrival, 50, c.burst, 40001, 7)
		if err != nil {
			t.Fatal(err)
		}
		mean, cv := meanCV(gaps(s))
		if math.Abs(mean-0.02)/0.02 > 0.03 {
			t.Errorf("%s(%g): mean gap %g s, want 0.02", c.arrival, c.burst, mean)
		}
		if math.Abs(cv-c.wantCV)/c.wantCV > 0.05 {
			t.Errorf("%s(%g): CV %g, want %g", c.arrival, c.burst, cv, c.wantCV)
		}
	}
	a, _ := Schedule(ArrivalPoisson, 10, 0, 100, 3)
	b, _ := Schedule(ArrivalPoisson, 10, 0, 100, 3)
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed, different schedule")
		}
	}
	if _, err := Schedule("bursty", 1, 0, 1, 1); err == nil {
		t.Error("unknown arrival accepted")
	}
	if _, err := Schedule(ArrivalConstant, 0, 0, 1, 1); err == nil {
		t.Error("zero rate accepted")
	}
}
