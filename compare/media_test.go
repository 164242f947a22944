package compare

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestCompareMediaMismatches: runs whose requests carried other media, or
// other embeddings inputs, or none where the other had some, are not like
// for like: each is named in the table, the JSON and the gate, and a gate
// that trips says it compared runs that are not like for like.
func TestCompareMediaMismatches(t *testing.T) {
	with := func(kv ...string) map[string]string {
		m := maps.Clone(meta)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	lv := level{conc: 1, n: 20, ttft: 50, gap: 10, tokens: 32, seed: 1}
	slower := level{conc: 1, n: 20, ttft: 80, gap: 10, tokens: 32, seed: 2}
	for _, tc := range []struct {
		name   string
		a, b   map[string]string
		apiB   string
		want   Mismatch
		others int // further mismatches (the API)
	}{
		{"image size", with("images", "2 × 512x512 jpeg"), with("images", "2 × 1024x1024 jpeg"), "",
			Mismatch{"images", "2 × 512x512 jpeg", "2 × 1024x1024 jpeg"}, 0},
		{"images against none", with("images", "2 × 512x512 jpeg"), meta, "",
			Mismatch{"images", "2 × 512x512 jpeg", "none"}, 0},
		{"none against images", meta, with("images", "1 × 64x64 png"), "",
			Mismatch{"images", "none", "1 × 64x64 png"}, 0},
		{"audio seconds", with("audio_seconds", "4"), with("audio_seconds", "30"), "",
			Mismatch{"audio_seconds", "4", "30"}, 0},
		{"audio against none", meta, with("audio_seconds", "4"), "",
			Mismatch{"audio_seconds", "none", "4"}, 0},
		{"embeddings inputs", with("embed_inputs", "4"), with("embed_inputs", "16"), "",
			Mismatch{"embed_inputs", "4", "16"}, 0},
		{"embeddings against chat", with("embed_inputs", "4"), meta, "openai-embeddings",
			Mismatch{"embed_inputs", "4", "none"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := load(t, writeRun(t, tc.a, lv)), load(t, writeRun(t, tc.b, slower))
			if tc.apiB != "" {
				b.Summary.Target.API = tc.apiB
			}
			conds, err := ParseConditions("ttft_p50>+10%")
			if err != nil {
				t.Fatal(err)
			}
			outs, rep, _ := All(a, []*Run{b}, Options{Alpha: 0.05, MinChange: 0.02}, conds, "ttft_p50>+10%")
			d := outs[0].Diff
			if !slices.Contains(d.Mismatches, tc.want) || len(d.Mismatches) != 1+tc.others {
				t.Fatalf("mismatches %v, want %v and %d more", d.Mismatches, tc.want, tc.others)
			}
			if tc.apiB != "" && !slices.Contains(d.Mismatches, Mismatch{"api", "openai-chat", tc.apiB}) {
				t.Errorf("mismatches %v lack the api", d.Mismatches)
			}
			if js := rep.Comparisons[0].Mismatches; !slices.Contains(js, tc.want) {
				t.Errorf("JSON mismatches %v lack %v", js, tc.want)
			}
			if g := rep.Gate; !g.Failed || len(g.Unlike) != len(d.Mismatches) || !strings.Contains(strings.Join(g.Unlike, ";"), tc.want.String()) {
				t.Errorf("gate %+v: want failed (TTFT +60%%) and naming %s", g, tc.want)
			}
			var buf bytes.Buffer
			failed, err := WriteText(&buf, outs, "ttft_p50>+10%")
			if err != nil {
				t.Fatal(err)
			}
			text := buf.String()
			gate := text[strings.Index(text, "gate --fail-if"):]
			if !strings.Contains(text, "WARNING: not like for like: "+tc.want.String()) ||
				!strings.Contains(gate, "WARNING: this gate compares runs that are not like for like (") || !strings.Contains(gate, tc.want.Field+")") {
				t.Errorf("the table does not name %s beside the diff and the gate:\n%s", tc.want, text)
			}
			if len(failed) != 1 || !strings.Contains(failed[0], "(not like for like: ") || !strings.HasSuffix(failed[0], tc.want.Field+")") {
				t.Errorf("gate failures %q do not say the runs are not like for like", failed)
			}
		})
	}
	// Like runs: no mismatch, and the gate says nothing of one.
	a, b := load(t, writeRun(t, with("images", "2 × 512x512 jpeg"), lv)), load(t, writeRun(t, with("images", "2 × 512x512 jpeg"), slower))
	conds, _ := ParseConditions("ttft_p50>+10%")
	outs, rep, _ := All(a, []*Run{b}, Options{Alpha: 0.05, MinChange: 0.02}, conds, "ttft_p50>+10%")
	if len(outs[0].Diff.Mismatches) != 0 || len(rep.Gate.Unlike) != 0 || strings.Contains(strings.Join(Failed(outs), ";"), "not like for like") {
		t.Errorf("like runs: mismatches %v, gate %+v", outs[0].Diff.Mismatches, rep.Gate)
	}
}
