package media

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"image"
	"math"
	"time"

	"github.com/tokbench/tokbench/api"
)

// Image draws a w×h image from seed and encodes it as format ("png" or
// "jpeg"): soft colour fields, a few blocks and grain, so that it
// compresses about as a photograph does and no two seeds give the same
// bytes anywhere in the picture (a server's cache keyed by the image's
// hash, or by any of its tiles, never serves one).
func Image(w, h int, format string, seed uint64) (api.Media, error) {
	if w < 1 || h < 1 || int64(w)*int64(h) > MaxPixels {
		return api.Media{}, fmt.Errorf("image size %dx%d: want 1 to %d pixels", w, h, MaxPixels)
	}
	start := time.Now()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	rng := seed | 1
	next := func() uint64 { // xorshift64*
		rng ^= rng >> 12
		rng ^= rng << 25
		rng ^= rng >> 27
		return rng * 2685821657736338717
	}
	// Colour fields: a sum of a column wave and a row wave per channel.
	var cols, rows [3][]float64
	for c := range 3 {
		fx, fy := 1+float64(next()%7), 1+float64(next()%7)
		px, py := float64(next()%628)/100, float64(next()%628)/100
		cols[c], rows[c] = make([]float64, w), make([]float64, h)
		for x := range w {
			cols[c][x] = 60 * math.Sin(fx*2*math.Pi*float64(x)/float64(w)+px)
		}
		for y := range h {
			rows[c][y] = 60 * math.Sin(fy*2*math.Pi*float64(y)/float64(h)+py)
		}
	}
	type block struct {
		x0, y0, x1, y1 int
		rgb            [3]float64
	}
	blocks := make([]block, 6)
	for i := range blocks {
		b := &blocks[i]
		b.x0, b.y0 = int(next()%uint64(w)), int(next()%uint64(h))
		b.x1, b.y1 = b.x0+1+int(next()%uint64(w/3+1)), b.y0+1+int(next()%uint64(h/3+1))
		for c := range 3 {
			b.rgb[c] = float64(next()%80) - 40
		}
	}
	for y := range h {
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		var noise uint64
		for x := range w {
			if x%16 == 0 {
				noise = next()
			}
			var add [3]float64
			for i := range blocks {
				if b := &blocks[i]; x >= b.x0 && x < b.x1 && y >= b.y0 && y < b.y1 {
					add[0], add[1], add[2] = add[0]+b.rgb[0], add[1]+b.rgb[1], add[2]+b.rgb[2]
				}
			}
			for c := range 3 {
				v := 128 + cols[c][x] + rows[c][y] + add[c]
				v += float64(noise&7) - 3.5 // grain: 3 bits a channel
				noise >>= 3
				row[4*x+c] = uint8(max(0, min(255, v)))
			}
			row[4*x+3] = 255
		}
	}
	raw, mime, err := encode(img, format)
	if err != nil {
		return api.Media{}, err
	}
	return api.Media{Kind: api.KindImage, MIME: mime, Base64: base64.StdEncoding.EncodeToString(raw), Bytes: len(raw),
		Width: w, Height: h, Build: time.Since(start)}, nil
}

// AudioRate is the sample rate of synthetic sounds: 16 kHz, mono, 16-bit,
// what speech encoders (Whisper) take.
const AudioRate = 16000

// MaxAudioSeconds bounds a synthetic sound (what 25 MB of it holds).
const MaxAudioSeconds = 600

// Audio makes seconds of speech-like sound from seed, as a WAV file: a
// voice whose pitch drifts between 100 and 220 Hz, its harmonics shaped
// by two formants that move syllable by syllable (four a second), with
// short pauses and breath noise: what a speech encoder is shown, not
// silence or a pure tone.
func Audio(seconds float64, seed uint64) (api.Media, error) {
	if !(seconds > 0) || seconds > MaxAudioSeconds {
		return api.Media{}, fmt.Errorf("audio length %gs: want more than 0 and at most %d seconds", seconds, MaxAudioSeconds)
	}
	start := time.Now()
	n := int(math.Round(seconds * AudioRate))
	buf := make([]byte, 44+2*n)
	copy(buf, "RIFF")
	binary.LittleEndian.PutUint32(buf[4:], uint32(36+2*n))
	copy(buf[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(buf[16:], 16)
	binary.LittleEndian.PutUint16(buf[20:], 1) // PCM
	binary.LittleEndian.PutUint16(buf[22:], 1) // mono
	binary.LittleEndian.PutUint32(buf[24:], AudioRate)
	binary.LittleEndian.PutUint32(buf[28:], AudioRate*2)
	binary.LittleEndian.PutUint16(buf[32:], 2)
	binary.LittleEndian.PutUint16(buf[34:], 16)
	copy(buf[36:], "data")
	binary.LittleEndian.PutUint32(buf[40:], uint32(2*n))

	rng := seed | 1
	next := func() uint64 {
		rng ^= rng >> 12
		rng ^= rng << 25
		rng ^= rng >> 27
		return rng * 2685821657736338717
	}
	unit := func() float64 { return float64(next()>>11) / (1 << 53) }
	const harmonics = 16
	const syllable = AudioRate / 4
	base := 100 + 120*unit()
	var phase float64
	var f1, f2 float64
	var amp [harmonics]float64
	var voiced bool
	for i := range n {
		if i%syllable == 0 { // a new syllable: its vowel, or a pause
			voiced = unit() > 0.15
			f1, f2 = 300+500*unit(), 900+1300*unit()
			base = min(220, max(100, base+40*(unit()-0.5)))
		}
		f0 := base * (1 + 0.05*math.Sin(2*math.Pi*float64(i)/AudioRate*0.7))
		if i%256 == 0 {
			for k := range amp {
				f := f0 * float64(k+1)
				amp[k] = 1/(1+sq((f-f1)/120)) + 0.6/(1+sq((f-f2)/180))
			}
		}
		phase += 2 * math.Pi * f0 / AudioRate
		if phase > 2*math.Pi {
			phase -= 2 * math.Pi
		}
		// A syllable's envelope: rises and falls over its quarter second.
		env := math.Sin(math.Pi * float64(i%syllable) / syllable)
		var v float64
		if voiced {
			for k := range amp {
				v += amp[k] * math.Sin(float64(k+1)*phase)
			}
			v *= 0.25 * env
		}
		v += 0.01 * (unit() - 0.5) // breath and room noise
		binary.LittleEndian.PutUint16(buf[44+2*i:], uint16(int16(max(-1, min(1, v))*32000)))
	}
	return api.Media{Kind: api.KindAudio, MIME: "audio/wav", Base64: base64.StdEncoding.EncodeToString(buf), Bytes: len(buf),
		Seconds: float64(n) / AudioRate, Build: time.Since(start)}, nil
}

func sq(x float64) float64 { return x * x }
