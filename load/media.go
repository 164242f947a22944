package load

import (
	"fmt"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
)

// MediaText is what a server's prompt count adds to a request's text
// (its chat template's tokens), against which the tokens of a request's
// media are measured: TemplateTokens, and how they are known (Source:
// metrics.TextTwin when a text-only twin of a request measured them,
// metrics.TextRequested — and 0 — when nothing did).
type MediaText struct {
	TemplateTokens int
	Source         string
}

// mediaRecord is what request req, built as prep, sent in media and what
// it cost, against the record of its answer: nil without media.
func (r *Runner) mediaRecord(req *api.Request, prep *api.Prepared, resp *api.Response, rec *metrics.Record) *metrics.MediaRecord {
	if len(req.Media) == 0 {
		return nil
	}
	m := &metrics.MediaRecord{BodyBytes: prep.BodyBytes(), TextSource: r.MediaText.Source}
	if m.TextSource == "" {
		m.TextSource = metrics.TextRequested
	}
	build := prep.Build
	w, h, one := 0, 0, true
	for i := range req.Media {
		md := &req.Media[i]
		m.Bytes += int64(md.Bytes)
		build += md.Build
		switch md.Kind {
		case api.KindImage:
			m.Images++
			if m.Images == 1 {
				w, h = md.Width, md.Height
			} else if md.Width != w || md.Height != h {
				one = false
			}
		case api.KindAudio:
			m.AudioS += md.Seconds
		}
	}
	if m.Images > 0 && one {
		m.ImageSize = fmt.Sprintf("%dx%d", w, h)
	}
	m.BuildMs = float64(build) / float64(time.Millisecond)
	m.TextTokens = rec.InputTokensRequested + r.MediaText.TemplateTokens
	if u := resp.Usage; rec.OK && u != nil && u.PromptTokens > 0 {
		m.Tokens, m.Counted = rec.InputTokens-m.TextTokens, true
	}
	return m
}
