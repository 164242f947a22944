// Package media makes and reads the images and sounds that go with a
// prompt: synthetic images (PNG, JPEG) and speech-like sounds (WAV),
// seeded, each one new; files and data: URLs, read within bounds and
// checked for what they are. Describe tells what a file's bytes hold
// (pixels, seconds) from its header alone, for the client and for the
// simulator, which charges for them.
//
// Every function is safe for concurrent use.
package media

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // Describe reads GIF headers
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tokbench/tokbench/api"
)

// Bounds on one file, by default: OpenAI's own limits (20 MB an image,
// 25 MB a sound), and 64 megapixels (8192×8192) an image.
const (
	MaxImageBytes = 20 << 20
	MaxAudioBytes = 25 << 20
	MaxPixels     = 64 << 20
)

// Info is what a file's header says it holds.
type Info struct {
	Kind, MIME    string // api.KindImage or api.KindAudio; "image/png" …
	Width, Height int
	Seconds       float64
}

// ErrNotMedia is the condition (wrapped) of bytes that are no image or
// sound Describe knows.
var ErrNotMedia = errors.New("not a PNG, JPEG or GIF image nor a WAV sound")

// Describe reads the header of b: an image's format and size (PNG, JPEG,
// GIF) or a WAV sound's length. It never decodes pixels or samples.
func Describe(b []byte) (Info, error) {
	if len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE" {
		sec, err := wavSeconds(b)
		if err != nil {
			return Info{}, err
		}
		return Info{Kind: api.KindAudio, MIME: "audio/wav", Seconds: sec}, nil
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return Info{}, ErrNotMedia
	}
	if cfg.Width < 1 || cfg.Height < 1 {
		return Info{}, fmt.Errorf("an image of %d×%d pixels", cfg.Width, cfg.Height)
	}
	return Info{Kind: api.KindImage, MIME: "image/" + format, Width: cfg.Width, Height: cfg.Height}, nil
}

// wavSeconds is a WAV file's length: its data chunk's bytes over the
// byte rate of its fmt chunk. A data chunk whose declared size runs past
// the file (a stream's placeholder) counts the bytes there are.
func wavSeconds(b []byte) (float64, error) {
	var byteRate uint32
	for off := 12; off+8 <= len(b); {
		id, size := string(b[off:off+4]), binary.LittleEndian.Uint32(b[off+4:off+8])
		body := b[off+8:]
		switch id {
		case "fmt ":
			if size < 16 || len(body) < 16 {
				return 0, errors.New("a WAV sound whose fmt chunk is cut short")
			}
			byteRate = binary.LittleEndian.Uint32(body[8:12])
		case "data":
			if byteRate == 0 {
				return 0, errors.New("a WAV sound without a byte rate (no fmt chunk before its data)")
			}
			n := min(int64(size), int64(len(body)))
			return float64(n) / float64(byteRate), nil
		}
		next := int64(off) + 8 + int64(size) + int64(size&1) // chunks are padded to even sizes
		if next > int64(len(b)) {
			break
		}
		off = int(next)
	}
	return 0, errors.New("a WAV sound without a data chunk")
}

// Limits bound the files Load reads (zero values: the defaults).
type Limits struct {
	ImageBytes, AudioBytes int64
	Pixels                 int64
}

func (l Limits) withDefaults() Limits {
	if l.ImageBytes <= 0 {
		l.ImageBytes = MaxImageBytes
	}
	if l.AudioBytes <= 0 {
		l.AudioBytes = MaxAudioBytes
	}
	if l.Pixels <= 0 {
		l.Pixels = MaxPixels
	}
	return l
}

// Load reads ref, a data: URL (base64) or a file's path (relative to dir
// when not absolute), into the form requests carry. It reads no more than
// the limit of the larger kind: a 2 GB file or a device (/dev/zero) is
// refused before its bytes are read, and bytes that are no image or
// sound Describe knows are refused with ErrNotMedia.
func Load(ref, dir string, lim Limits) (api.Media, error) {
	lim = lim.withDefaults()
	most := max(lim.ImageBytes, lim.AudioBytes)
	start := time.Now()
	var raw []byte
	if rest, ok := strings.CutPrefix(ref, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		if !ok || !strings.HasSuffix(meta, ";base64") {
			return api.Media{}, errors.New("a data: URL that is not base64 (want data:<type>;base64,…)")
		}
		if int64(base64.StdEncoding.DecodedLen(len(data))) > most+3 {
			return api.Media{}, fmt.Errorf("a data: URL of more than %d bytes", most)
		}
		var err error
		if raw, err = base64.StdEncoding.DecodeString(strings.TrimSpace(data)); err != nil {
			return api.Media{}, fmt.Errorf("a data: URL whose base64 is invalid: %w", err)
		}
	} else {
		path := ref
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		var err error
		if raw, err = readFile(path, most); err != nil {
			return api.Media{}, err
		}
	}
	info, err := Describe(raw)
	if err != nil {
		return api.Media{}, err
	}
	switch limit := lim.ImageBytes; {
	case info.Kind == api.KindAudio:
		if int64(len(raw)) > lim.AudioBytes {
			return api.Media{}, fmt.Errorf("a sound of %d bytes, more than the %d a sound may have", len(raw), lim.AudioBytes)
		}
	case int64(len(raw)) > limit:
		return api.Media{}, fmt.Errorf("an image of %d bytes, more than the %d an image may have", len(raw), limit)
	case int64(info.Width)*int64(info.Height) > lim.Pixels:
		return api.Media{}, fmt.Errorf("an image of %d×%d pixels, more than the %d an image may have", info.Width, info.Height, lim.Pixels)
	}
	m := api.Media{Kind: info.Kind, MIME: info.MIME, Base64: base64.StdEncoding.EncodeToString(raw), Bytes: len(raw),
		Width: info.Width, Height: info.Height, Seconds: info.Seconds}
	m.Build = time.Since(start)
	return m, nil
}

// readFile reads a regular file of at most limit bytes.
func readFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a file may have", path, fi.Size(), limit)
	}
	// The file may grow after Stat: read one byte past the limit at most.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is more than the %d bytes a file may have", path, limit)
	}
	return b, nil
}

// encode writes img in format ("png" or "jpeg").
func encode(img image.Image, format string) ([]byte, string, error) {
	var buf bytes.Buffer
	switch format {
	case "png":
		enc := png.Encoder{CompressionLevel: png.BestSpeed}
		if err := enc.Encode(&buf, img); err != nil {
			return nil, "", err
		}
		return buf.Bytes(), "image/png", nil
	case "jpeg", "jpg":
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85}); err != nil {
			return nil, "", err
		}
		return buf.Bytes(), "image/jpeg", nil
	}
	return nil, "", fmt.Errorf("image format %q (known: png, jpeg)", format)
}
