package physics_test

import (
	"fmt"

	"github.com/tokbench/tokbench/physics"
)

// The seeds' example: 70 GB of 8-bit weights over an H100's 3.35 TB/s.
func Example() {
	h100, _ := physics.LookupHardware("h100-sxm")
	int8, _ := physics.LookupPrecision("int8")
	d := physics.Deployment{
		Model:    physics.Model{Name: "dense-70b", TotalParams: 70e9},
		Weights:  int8,
		KVCache:  int8,
		Hardware: h100,
		GPUs:     1,
	}
	c := d.Ceiling(physics.Workload{Batch: 1})
	fmt.Printf("%.0f GB per token, ceiling %.1f tok/s\n", c.BytesPerToken/1e9, c.DecodeTPSCeiling)
	fmt.Println(c.Judge(120).Paths[0].Detail)
	// Output:
	// 70 GB per token, ceiling 47.9 tok/s
	// as aggregate throughput of ≥ 3 concurrent streams (ceiling 143.6 tok/s together, each stream still ≤ 47.86 tok/s)
}

func ExampleDeployment_StepTime() {
	m, _ := physics.LookupModel("llama-3.1-8b")
	bf16, _ := physics.LookupPrecision("bf16")
	h, _ := physics.LookupHardware("h100-sxm")
	d := physics.Deployment{Model: m, Weights: bf16, KVCache: bf16, Hardware: h, GPUs: 1}
	one := d.StepTime(physics.Step{DecodeSeqs: 1, KVTokens: 512})
	many := d.StepTime(physics.Step{DecodeSeqs: 64, KVTokens: 64 * 512})
	fmt.Printf("batch 1: %.1f ms per token; batch 64: %.1f ms per token, %.0f tok/s together\n",
		one.Seconds()*1000, many.Seconds()*1000, 64/many.Seconds())
	// Output:
	// batch 1: 6.5 ms per token; batch 64: 8.1 ms per token, 7918 tok/s together
}
