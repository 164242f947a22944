package cli

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/compare"
	"github.com/tokbench/tokbench/report"
)

type importFlags struct {
	out                            string
	hardware, quant, engine, label string
	gpus                           int
}

func newImportVLLMCmd(env Env) *cobra.Command {
	f := &importFlags{}
	cmd := &cobra.Command{
		Use:   "import-vllm FILE --out DIR",
		Short: "Turn a `vllm bench serve` result JSON into a tokbench run directory",
		Long: `import-vllm reads the result file of vllm bench serve (--save-result) and
writes a run directory (run.json, requests.jsonl, summary.json, report.html)
that compare and report take like any tokbench run.

With vLLM's per-request lists (--save-detailed: ttfts, itls, output_lens)
every request becomes a record and every statistic is recomputed with
tokbench's definitions. Without them only the aggregates are known: the
summary holds those (decode TPS percentiles from TPOT's), says so in a
warning, and there is no requests.jsonl, so compare cannot test
significance. The load is max_concurrency users when the request rate was
unlimited, else the request rate. --hardware, --quant, --gpus, --engine and
--label record the deployment as bench does, so compare can check like for
like.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("import-vllm: want one vLLM result file, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return runImportVLLM(env, f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "run directory to write (required)")
	fl.StringVar(&f.hardware, "hardware", "", "hardware the vLLM server ran on, e.g. h100-sxm (recorded)")
	fl.StringVar(&f.quant, "quant", "", "weight precision, e.g. bf16 (recorded)")
	fl.IntVar(&f.gpus, "gpus", 0, "number of GPUs (recorded)")
	fl.StringVar(&f.engine, "engine", "", "serving engine and version, e.g. vllm-0.9.1 (recorded)")
	fl.StringVar(&f.label, "label", "", "free-form label (recorded; compare ignores it)")
	return cmd
}

func runImportVLLM(env Env, f *importFlags, path string) error {
	if f.out == "" {
		return usagef("--out: required: the run directory to write")
	}
	if f.gpus < 0 {
		return usagef("--gpus: must not be negative, got %d", f.gpus)
	}
	file, err := os.Open(path)
	if err != nil {
		return usagef("%v", err)
	}
	defer file.Close()
	imp, err := compare.ReadVLLM(file, path)
	if err != nil {
		return usagef("%v", err)
	}
	for k, v := range map[string]string{"hardware": f.hardware, "quant": f.quant, "engine": f.engine, "label": f.label} {
		if v != "" {
			imp.Run.Meta[k] = v
		}
	}
	if f.gpus > 0 {
		imp.Run.Meta["gpus"] = strconv.Itoa(f.gpus)
	}
	if err := checkOut(f.out, true); err != nil {
		return err
	}
	if err := imp.WriteDir(f.out); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := report.WriteHTMLFile(f.out); err != nil {
		return err
	}
	lv := imp.Summary.Levels[0]
	if imp.Detailed {
		fmt.Fprintf(env.Stdout, "wrote %s: %d requests (%d completed) at %s from %s\n", f.out, lv.Requests.Sent, lv.Requests.Completed, lv.Load, path)
	} else {
		fmt.Fprintf(env.Stdout, "wrote %s: aggregates at %s from %s\n", f.out, lv.Load, path)
	}
	for _, wn := range imp.Summary.Warnings {
		fmt.Fprintf(env.Stderr, "tokbench: %s\n", wn)
	}
	return nil
}
