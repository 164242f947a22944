package workload

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tokbench/tokbench/tokenize"
)

// Corpus is a plain-text file prompts are cut from: each cut starts at a
// random word boundary and holds exactly the requested number of tokens.
// Only a window around each cut is read, so the file may be of any size.
// A Corpus is not safe for concurrent use.
type Corpus struct {
	f    *os.File
	size int64
	name string
}

// OpenCorpus opens a text corpus. Close it when the prompts are made.
func OpenCorpus(path string) (*Corpus, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read dataset %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read dataset %s: %w", path, err)
	}
	if st.Size() < 16 {
		f.Close()
		return nil, fmt.Errorf("dataset %s: a text corpus needs some text (%d bytes)", path, st.Size())
	}
	return &Corpus{f: f, size: st.Size(), name: filepath.Base(path)}, nil
}

// CheckText reports whether path looks like text a corpus can be cut from:
// at least 16 bytes, and its first MiB free of NUL bytes and valid UTF-8 (a
// binary file would be sent as prompts of replacement characters).
func CheckText(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read dataset %s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return fmt.Errorf("read dataset %s: %w", path, err)
	}
	buf = buf[:n]
	if n < 16 {
		return fmt.Errorf("dataset %s: a text corpus needs some text (%d bytes)", path, n)
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		return fmt.Errorf("dataset %s: not text (a NUL byte at offset %d); give JSONL, ShareGPT JSON or UTF-8 text", path, i)
	}
	for off := 0; off < len(buf); {
		r, size := utf8.DecodeRune(buf[off:])
		if r == utf8.RuneError && size == 1 {
			if len(buf)-off < utf8.UTFMax && n == cap(buf) {
				break // a character cut by the end of the window
			}
			return fmt.Errorf("dataset %s: not UTF-8 text (byte 0x%02x at offset %d); give JSONL, ShareGPT JSON or UTF-8 text", path, buf[off], off)
		}
		off += size
	}
	return nil
}

// Close closes the file.
func (c *Corpus) Close() error { return c.f.Close() }

// window reads w bytes from off, wrapping to the start of the file.
func (c *Corpus) window(off, w int64) (string, error) {
	var b strings.Builder
	for int64(b.Len()) < w {
		n := min(w-int64(b.Len()), c.size-off)
		if _, err := io.Copy(&b, io.NewSectionReader(c.f, off, n)); err != nil {
			return "", fmt.Errorf("read dataset %s: %w", c.name, err)
		}
		off = 0
		if int64(b.Len()) < w {
			b.WriteByte('\n') // the file wraps around: end it like a line
		}
	}
	return b.String(), nil
}

// Cut returns a text of exactly n tokens under tok from a random place.
func (c *Corpus) Cut(tok tokenize.Tokenizer, n int, rng *rand.Rand) (string, error) {
	off := rng.Int64N(c.size)
	w := int64(n)*8 + 256
	for attempt := 0; attempt < 6; attempt++ {
		text, err := c.window(off, w)
		if err != nil {
			return "", err
		}
		// Start after the first space so the cut begins with a whole word,
		// and drop bytes of a rune the window split.
		if i := strings.IndexFunc(text, unicode.IsSpace); i >= 0 && i < len(text)/4 {
			text = text[i+1:]
		}
		text = strings.ToValidUTF8(text, "")
		ids := tok.Encode(text)
		if len(ids) <= n {
			w *= 2
			continue
		}
		// Decoding a prefix of ids and re-encoding can merge across the
		// cut; step the prefix until the re-encoded count is exact.
		k := n
		for step := 0; step < 8 && k > 0 && k <= len(ids); step++ {
			s := tok.Decode(ids[:k])
			if !utf8.ValidString(s) {
				k--
				continue
			}
			got := tok.Count(s)
			if got == n {
				return s, nil
			}
			k += n - got
		}
		off = rng.Int64N(c.size) // an unlucky place: try another
	}
	return "", fmt.Errorf("dataset %s: could not cut a prompt of exactly %d tokens under %s", c.name, n, tok.Name())
}
