package cli

import (
	"strings"

	"github.com/tokbench/tokbench/benchmark"
)

// planFlags name, for each benchmark.Plan field an InputError can name,
// the bench flags that set it: the CLI's one-line message names the flag
// where the library names the field.
var planFlags = map[string]string{
	"URL":                         "--url",
	"API":                         "--api",
	"Model":                       "--model",
	"Sim":                         "embedded simulator (--model/--quant/--hardware/--gpus)",
	"ContinuousUsage":             "--continuous-usage",
	"LlamaCppMedia":               "--llamacpp-media",
	"GPUTelemetry":                "--gpu-telemetry",
	"GPUTelemetry.PricePerKWh":    "--energy-price",
	"PhysicsIn.GGUF":              "--gguf",
	"PhysicsIn.Quant":             "--quant",
	"PhysicsIn.Hardware":          "--hardware",
	"Client.Timeout":              "--timeout",
	"Client.StallTimeout":         "--stall-timeout",
	"Client.Grace":                "--grace",
	"Client.Retry":                "--retry",
	"Client.MaxErrorRate":         "--max-error-rate",
	"Client.KeepAwake":            "--keep-awake",
	"Repeat":                      "--repeat",
	"Shard":                       "--shard",
	"Load":                        "--concurrency, --rate or --sweep",
	"Load.Concurrency":            "--concurrency",
	"Load.Rates":                  "--rate",
	"Load.MaxInFlight":            "--max-concurrency",
	"Load.Lockstep":               "--lockstep",
	"Load.RampUp":                 "--ramp-up",
	"Workload.Tokenizer":          "--tokenizer",
	"Workload.Inputs":             "--input-tokens",
	"Workload.ServerTokenizer":    "--tokenizer server",
	"Workload.Rows":               "--dataset",
	"Workload.Trace":              "--trace",
	"Workload.Media.Images":       "--images",
	"Workload.Media.Format":       "--image-format",
	"Workload.Media.AudioSeconds": "--audio-seconds",
}

// planFieldFlag is the flag of a Plan field an InputError names; a field
// with no flag (or a message already naming one) is left as it is.
func planFieldFlag(field string) string {
	if f, ok := planFlags[field]; ok {
		return f
	}
	return field
}

// fieldMentions are the fields the library's messages advise changing,
// as bench words the advice.
var fieldMentions = strings.NewReplacer("a larger Workload.CopyBudget", "--dataset-budget")

// inputMessage is an InputError as bench says it: the flag, not the field.
func inputMessage(ie *benchmark.InputError) string {
	msg := fieldMentions.Replace(ie.Msg)
	if ie.Field == "" {
		return msg
	}
	return planFieldFlag(ie.Field) + ": " + msg
}

// flagMessage rewrites the InputError err holds (perhaps wrapped) in msg,
// err's text, to name the flag.
func flagMessage(msg string, ie *benchmark.InputError) string {
	return strings.Replace(msg, ie.Error(), inputMessage(ie), 1)
}
