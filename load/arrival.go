package load

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// Arrival processes for open-loop load (metrics.Arrival's).
const (
	ArrivalConstant = metrics.ArrivalConstant
	ArrivalPoisson  = metrics.ArrivalPoisson
	ArrivalGamma    = metrics.ArrivalGamma
)

// Schedule returns the send offsets of n requests at rate requests per
// second: evenly spaced (constant), exponential gaps (poisson), or gamma
// gaps with shape burstiness (gamma; below 1 is burstier than Poisson,
// above 1 smoother, 1 is Poisson). Deterministic for a seed.
func Schedule(arrival metrics.Arrival, rate, burstiness float64, n int, seed uint64) ([]time.Duration, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("rate %g is not a positive number of requests per second", rate)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	mean := 1 / rate
	out := make([]time.Duration, n)
	t := 0.0
	for i := 0; i < n; i++ {
		out[i] = time.Duration(t * float64(time.Second))
		switch arrival {
		case ArrivalConstant:
			t += mean
		case ArrivalPoisson:
			t += rng.ExpFloat64() * mean
		case ArrivalGamma:
			if !(burstiness > 0) {
				return nil, fmt.Errorf("burstiness %g must be positive", burstiness)
			}
			t += gamma(rng, burstiness) * mean / burstiness
		default:
			return nil, fmt.Errorf("unknown arrival %q (known: constant, poisson, gamma)", arrival)
		}
	}
	return out, nil
}

// gamma draws from Gamma(shape, 1) (Marsaglia and Tsang; boosted for shape < 1).
func gamma(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := rng.Float64()
		return gamma(rng, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
