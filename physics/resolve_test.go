package physics

import (
	"errors"
	"testing"
)

func TestResolve(t *testing.T) {
	d, engine, _, err := Resolve(Spec{Model: "llama-3.1-8b", Quant: "bf16", KVQuant: "bf16", Hardware: "h100-sxm", GPUs: 1})
	if err != nil || d.Model.Name != "llama-3.1-8b" || d.Hardware.Name != "h100-sxm" || engine != "hardware default" {
		t.Fatalf("Resolve = %+v, %q, %v", d.Model.Name, engine, err)
	}
	for _, c := range []struct {
		field string
		spec  Spec
	}{
		{"hardware", Spec{Model: "llama-3.1-8b", Quant: "bf16", KVQuant: "bf16", Hardware: "h9000"}},
		{"quant", Spec{Model: "llama-3.1-8b", Quant: "q1", KVQuant: "bf16", Hardware: "h100-sxm"}},
		{"model", Spec{Quant: "bf16", KVQuant: "bf16", Hardware: "h100-sxm"}},
		{"params", Spec{Model: "llama-3.1-8b", ParamsB: 8, Quant: "bf16", KVQuant: "bf16", Hardware: "h100-sxm"}},
		{"gguf", Spec{GGUF: "/nonexistent.gguf", KVQuant: "bf16", Hardware: "h100-sxm"}},
	} {
		_, _, _, err := Resolve(c.spec)
		se, ok := errors.AsType[*SpecError](err)
		if !ok || se.Field != c.field {
			t.Errorf("%s: error %v, want a SpecError of field %s", c.field, err, c.field)
		}
	}
}
