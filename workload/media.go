package workload

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/media"
)

// MediaSpec says what synthetic media go with every request: Images
// images of Width×Height pixels in Format ("png" or "jpeg"), and a sound
// of AudioSeconds. Each request's are drawn from its own seed, so no two
// requests of a run (warm-ups and a level's later rounds included) send
// the same image or sound. The zero value is none.
type MediaSpec struct {
	Images        int
	Width, Height int
	Format        string
	AudioSeconds  float64
}

// Empty reports whether the spec makes no media.
func (s MediaSpec) Empty() bool { return s.Images <= 0 && s.AudioSeconds <= 0 }

// Make draws one request's media from seed.
func (s MediaSpec) Make(seed uint64) ([]api.Media, error) {
	if s.Empty() {
		return nil, nil
	}
	out := make([]api.Media, 0, s.Images+1)
	for k := range s.Images {
		m, err := media.Image(s.Width, s.Height, s.Format, mix(seed^mix(uint64(k)+0x1a6e)))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if s.AudioSeconds > 0 {
		m, err := media.Audio(s.AudioSeconds, mix(seed^0xa0d10))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// ParseImageSize reads "WxH" (512x512).
func ParseImageSize(s string) (w, h int, err error) {
	a, b, ok := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "x")
	if ok {
		w, err = strconv.Atoi(a)
		if err == nil {
			h, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || w < 1 || h < 1 {
		return 0, 0, fmt.Errorf("want WIDTHxHEIGHT in pixels such as 512x512, got %q", s)
	}
	if int64(w)*int64(h) > media.MaxPixels {
		return 0, 0, fmt.Errorf("%dx%d is more than the %d pixels an image may have", w, h, media.MaxPixels)
	}
	return w, h, nil
}

// mediaBytes is what a request's media hold in memory.
func mediaBytes(ms []api.Media) int64 {
	var n int64
	for i := range ms {
		n += int64(len(ms[i].Base64))
	}
	return n
}

// attachMedia gives request i its media: its row's, or the spec's drawn
// for it (seeded by the level's seed and i), counting what they hold
// against MaxBytes (held: the total so far).
func (cfg Config) attachMedia(req *api.Request, row Row, i int, seed uint64, held *int64) error {
	switch {
	case len(row.Media) > 0:
		req.Media = row.Media // shared with the row: counted with the rows
		return nil
	case cfg.Media.Empty():
		return nil
	}
	var err error
	if req.Media, err = cfg.Media.Make(mediaSeed(seed, uint64(i))); err != nil {
		return err
	}
	*held += mediaBytes(req.Media)
	if budget := cfg.mediaBudget(); *held > budget {
		return budgetError(fmt.Sprintf("the media of the level's first %d requests hold %d bytes, more than the %d a level's requests may hold",
			i+1, *held, budget))
	}
	return nil
}

// mediaBudget is what a level's synthetic media may hold: MaxBytes, or
// DefaultBudget without one.
func (cfg Config) mediaBudget() int64 {
	if cfg.MaxBytes > 0 {
		return cfg.MaxBytes
	}
	return DefaultBudget
}

// mediaSeed is the seed of request i's media in round (0: the level's
// own requests).
func mediaSeed(seed, i uint64) uint64 { return mix(seed ^ mix(i+0x3ed1a)) }

// redrawMedia gives a variant of request j (round) media of its own, when
// its media are synthetic; a row's files stay the row's.
func (s *Source) redrawMedia(req *api.Request, j int, round uint64) {
	if s.media.Empty() || len(req.Media) == 0 || s.rowMedia[j] {
		return
	}
	if ms, err := s.media.Make(mediaSeed(s.seed^mix(round), uint64(j))); err == nil {
		req.Media = ms
	}
}

// loadRowMedia reads the media rows refer to (files relative to dir,
// the dataset's, or data: URLs), refusing a row whose file cannot be
// read, is too large or is no image or sound, with its line and field.
// What they hold counts against the rows' budget (held).
func loadRowMedia(rows []Row, name, dir string, lim Limits, held int64) error {
	budget := lim.withDefaults().Budget
	for i := range rows {
		r := &rows[i]
		for _, ref := range r.MediaRefs {
			m, err := media.Load(ref.Ref, dir, media.Limits{})
			if err != nil {
				return &RowError{File: name, Line: r.Line, Field: ref.Field, Msg: shortRef(err.Error())}
			}
			if ref.Kind != "" && m.Kind != ref.Kind {
				return &RowError{File: name, Line: r.Line, Field: ref.Field, Msg: fmt.Sprintf("is %s, not %s", m.MIME, ref.Kind)}
			}
			r.Media = append(r.Media, m)
			if held += int64(len(m.Base64)); held > budget {
				return lim.overBudget(name, r.Line, held)
			}
		}
		r.MediaRefs = nil
	}
	return nil
}

// shortRef keeps a message about a data: URL short: no base64 in it.
func shortRef(msg string) string {
	if len(msg) > 300 {
		return msg[:300] + "…"
	}
	return msg
}

// MediaRef is a row's reference to an image or sound: a path (relative
// to the dataset's directory) or a data: URL, and the row's field that
// gave it. Kind, when set, is what the field must hold.
type MediaRef struct {
	Ref, Field, Kind string
}

// datasetDir is the directory a dataset's relative media paths start from.
func datasetDir(path string) string { return filepath.Dir(path) }

// jsonRefs reads a row's field of media: one string or an array of them.
func jsonRefs(v *fastjson.Value, field, kind string) ([]MediaRef, error) {
	var vals []*fastjson.Value
	if v.Type() == fastjson.TypeArray {
		vals, _ = v.Array()
	} else {
		vals = []*fastjson.Value{v}
	}
	refs := make([]MediaRef, 0, len(vals))
	for k, e := range vals {
		sb, err := e.StringBytes()
		if err != nil || len(sb) == 0 {
			return nil, fmt.Errorf("want a path or a data: URL, or an array of them")
		}
		where := field
		if v.Type() == fastjson.TypeArray {
			where = fmt.Sprintf("%s[%d]", field, k)
		}
		refs = append(refs, MediaRef{Ref: string(sb), Field: where, Kind: kind})
	}
	return refs, nil
}

// contentParts reads a message's content given as OpenAI chat's parts:
// its text parts joined, and the media of its image_url and input_audio
// parts.
func contentParts(v *fastjson.Value, field string) (string, []MediaRef, error) {
	list, err := v.Array()
	if err != nil {
		return "", nil, fmt.Errorf(`want a string or content parts [{"type": "text", …}, {"type": "image_url", …}]`)
	}
	var text []string
	var refs []MediaRef
	for i, p := range list {
		where := fmt.Sprintf("%s[%d]", field, i)
		switch typ := string(p.GetStringBytes("type")); typ {
		case "text", "input_text":
			text = append(text, jsonText(p.GetStringBytes("text")))
		case "image_url", "input_image":
			url := p.GetStringBytes("image_url", "url")
			if url == nil {
				url = p.GetStringBytes("image_url")
			}
			if len(url) == 0 {
				return "", nil, fmt.Errorf("%s: an image_url part without a url", where)
			}
			refs = append(refs, MediaRef{Ref: string(url), Field: where, Kind: api.KindImage})
		case "input_audio":
			data := p.GetStringBytes("input_audio", "data")
			if len(data) == 0 {
				return "", nil, fmt.Errorf("%s: an input_audio part without data", where)
			}
			format := string(p.GetStringBytes("input_audio", "format"))
			if format == "" {
				format = "wav"
			}
			refs = append(refs, MediaRef{Ref: "data:audio/" + format + ";base64," + string(data), Field: where, Kind: api.KindAudio})
		default:
			return "", nil, fmt.Errorf("%s: a part of type %q (known: text, image_url, input_audio)", where, typ)
		}
	}
	return strings.Join(text, "\n"), refs, nil
}

// shareGPTMedia reads a ShareGPT entry's image or images (a path or a
// data: URL, or an array of them) into row, dropping the "<image>"
// placeholders of its prompt.
func shareGPTMedia(row *Row, image, images json.RawMessage, i int) *RowError {
	for _, f := range []struct {
		raw   json.RawMessage
		field string
	}{{image, "image"}, {images, "images"}} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue
		}
		var one string
		var many []string
		if err := json.Unmarshal(f.raw, &one); err == nil {
			many = []string{one}
		} else if err := json.Unmarshal(f.raw, &many); err != nil {
			return &RowError{Line: row.Line, Field: fmt.Sprintf("[%d].%s", i, f.field), Msg: "want a path or a data: URL, or an array of them"}
		}
		for k, ref := range many {
			where := fmt.Sprintf("[%d].%s", i, f.field)
			if len(one) == 0 {
				where = fmt.Sprintf("%s[%d]", where, k)
			}
			row.MediaRefs = append(row.MediaRefs, MediaRef{Ref: ref, Field: where, Kind: api.KindImage})
		}
	}
	if len(row.MediaRefs) > 0 {
		row.Prompt = strings.TrimSpace(strings.ReplaceAll(row.Prompt, "<image>", ""))
	}
	return nil
}
