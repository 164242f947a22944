package benchmark_test

import (
	"context"
	"fmt"
	"log"

	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/workload"
)

// ExampleRun benchmarks the embedded simulator (a plan without a URL) at 1
// and 2 users, four requests each of 64 prompt tokens asking for 16.
func ExampleRun() {
	plan := benchmark.DefaultPlan() // no URL: the embedded simulator
	plan.Load.Concurrency, plan.Load.Requests = []int{1, 2}, 4
	plan.Workload.Inputs = []workload.Dist{workload.Fixed(64)}
	plan.Workload.Output = workload.Fixed(16)
	res, err := benchmark.Run(context.Background(), plan, benchmark.Hooks{})
	if err != nil {
		log.Fatal(err) // an *benchmark.InputError names the Plan field at fault
	}
	for _, lv := range res.Summary.Levels {
		fmt.Printf("%s: %d of %d completed, %d output tokens (%s)\n",
			lv.Load, lv.Requests.Completed, lv.Requests.Sent, lv.OutputTokens, lv.TokenSource)
	}
	// Output:
	// c=1: 4 of 4 completed, 64 output tokens (usage)
	// c=2: 4 of 4 completed, 64 output tokens (usage)
}
