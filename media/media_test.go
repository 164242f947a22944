package media

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/api"
)

func decode(t *testing.T, m api.Media) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(m.Base64)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != m.Bytes {
		t.Fatalf("Bytes %d, the base64 holds %d", m.Bytes, len(b))
	}
	return b
}

// TestImageIsWhatWasAsked: a synthetic image is a PNG or JPEG of the size
// asked, the same for a seed and different for another, everywhere in it.
func TestImageIsWhatWasAsked(t *testing.T) {
	for _, tc := range []struct {
		format, mime string
		w, h         int
	}{{"png", "image/png", 640, 480}, {"jpeg", "image/jpeg", 333, 1000}} {
		a, err := Image(tc.w, tc.h, tc.format, 7)
		if err != nil {
			t.Fatal(err)
		}
		info, err := Describe(decode(t, a))
		if err != nil {
			t.Fatal(err)
		}
		if info.MIME != tc.mime || info.Width != tc.w || info.Height != tc.h || a.MIME != tc.mime || a.Width != tc.w {
			t.Errorf("%s: Describe = %+v, media %s %dx%d; want %s %dx%d", tc.format, info, a.MIME, a.Width, a.Height, tc.mime, tc.w, tc.h)
		}
		again, _ := Image(tc.w, tc.h, tc.format, 7)
		other, _ := Image(tc.w, tc.h, tc.format, 8)
		if again.Base64 != a.Base64 {
			t.Errorf("%s: seed 7 twice gave different bytes", tc.format)
		}
		// No long run of the encoded bytes is shared: a cache keyed by a
		// part of the image never matches.
		ab, ob := decode(t, a), decode(t, other)
		const run = 64
		shared := 0
		for i := len(ab) / 4; i+run < len(ab); i += len(ab) / 16 {
			if strings.Contains(string(ob), string(ab[i:i+run])) {
				shared++
			}
		}
		if shared > 0 {
			t.Errorf("%s: %d of 12 64-byte runs of seed 7's image are in seed 8's", tc.format, shared)
		}
	}
	if _, err := Image(100, 100, "webp", 1); err == nil {
		t.Error("Image(webp) did not fail")
	}
}

// TestAudioIsSpeechLike: a synthetic sound is a WAV file of the length
// asked whose loudness comes and goes as speech's does (syllables and
// pauses), not silence or a steady tone.
func TestAudioIsSpeechLike(t *testing.T) {
	m, err := Audio(5, 3)
	if err != nil {
		t.Fatal(err)
	}
	b := decode(t, m)
	info, err := Describe(b)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != api.KindAudio || info.Seconds != 5 || m.Seconds != 5 {
		t.Fatalf("Describe = %+v, media %g s; want audio of 5 s", info, m.Seconds)
	}
	// Loudness in 50 ms windows: loud syllables and near-silent gaps.
	const win = AudioRate / 20
	var rms []float64
	for off := 44; off+2*win <= len(b); off += 2 * win {
		var sum float64
		for i := range win {
			v := float64(int16(binary.LittleEndian.Uint16(b[off+2*i:])))
			sum += v * v
		}
		rms = append(rms, math.Sqrt(sum/win))
	}
	loud, quiet := 0, 0
	for _, r := range rms {
		switch {
		case r > 2000:
			loud++
		case r < 400:
			quiet++
		}
	}
	if loud < len(rms)/4 || quiet < len(rms)/20 {
		t.Errorf("of %d windows %d loud and %d quiet: want speech's mix of both", len(rms), loud, quiet)
	}
	if _, err := Audio(0, 1); err == nil {
		t.Error("Audio(0) did not fail")
	}
}

// TestLoadBounded: files and data: URLs are read within bounds, and what
// is no image or sound is refused with one clear error.
func TestLoadBounded(t *testing.T) {
	dir := t.TempDir()
	img, err := Image(64, 32, "png", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.png"), decode(t, img), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load("a.png", dir, Limits{})
	if err != nil || m.Width != 64 || m.Height != 32 || m.Base64 != img.Base64 {
		t.Fatalf("Load(a.png) = %dx%d, %v; want the file's 64x32 image", m.Width, m.Height, err)
	}
	if m, err := Load(img.DataURL(), "", Limits{}); err != nil || m.Base64 != img.Base64 {
		t.Fatalf("Load(data URL) = %v", err)
	}

	big := filepath.Join(dir, "big.png")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// A 2 GB file (sparse: no disk) is refused by its size, unread.
	if err := f.Truncate(2 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not an image at all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ref, want string }{
		{"big.png", "is 2147483648 bytes, more than the 26214400"},
		{"/dev/zero", "not a regular file"},
		{"notes.txt", ErrNotMedia.Error()},
		{"missing.png", "no such file"},
		{"data:image/png;base64,@@@@", "base64 is invalid"},
		{"data:image/png,rawbytes", "not base64"},
	} {
		_, err := Load(tc.ref, dir, Limits{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%q) = %v, want an error saying %q", tc.ref, err, tc.want)
		}
	}
	if _, err := Load(img.DataURL(), "", Limits{ImageBytes: 100, AudioBytes: 100}); err == nil {
		t.Error("Load of an image past ImageBytes did not fail")
	}
	if _, err := Load("notes.txt", dir, Limits{}); !errors.Is(err, ErrNotMedia) {
		t.Errorf("Load(notes.txt) = %v, want ErrNotMedia", err)
	}
}
