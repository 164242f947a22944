// Command wirecheck compares the TTFT tokbench recorded for each request
// with the wire: the kernel's instants in a loopback packet capture, from
// the packet that carried a request's first bytes (its POST) to the packet
// that carried its first token chunk. A client's clock cannot bend those.
//
//	tcpdump -i lo -w run.pcap --time-stamp-precision nano -B 65536 tcp port 8000 &
//	tokbench bench --url http://127.0.0.1:8000/v1 … --out run
//	wirecheck -pcap run.pcap -requests run/requests.jsonl -port 8000
//
// Requests and streams are matched by the answer's id: the harness's fake
// server (bench/fakeserver) names every answer after its request's arrival
// ("chatcmpl-r<ns>") in the first token chunk, and tokbench records it as
// response_id. Plain HTTP only: over TLS the chunks are not readable on the
// wire (the harness's first scenario measures HTTPS against the server's
// own kernel stamps instead).
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"time"
)

func main() {
	pcapPath := flag.String("pcap", "", "packet capture of the run (tcpdump -i lo --time-stamp-precision nano -w FILE)")
	reqPath := flag.String("requests", "", "the run's requests.jsonl")
	port := flag.Int("port", 8000, "the server's TCP port")
	flag.Parse()
	if err := run(*pcapPath, *reqPath, uint16(*port), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "wirecheck:", err)
		os.Exit(1)
	}
}

// wireRequest is one request as the wire saw it.
type wireRequest struct {
	post, first int64 // unix ns: the POST's first packet, the first token chunk's packet
	nth         int   // 0 for a connection's first request
}

func run(pcapPath, reqPath string, port uint16, out io.Writer) error {
	f, err := os.Open(pcapPath)
	if err != nil {
		return err
	}
	defer f.Close()
	byID, syns, err := scan(bufio.NewReaderSize(f, 1<<20), port)
	if err != nil {
		return err
	}
	rf, err := os.Open(reqPath)
	if err != nil {
		return err
	}
	defer rf.Close()
	var firstErr, laterErr, all, late []float64
	unmatched := 0
	sc := bufio.NewScanner(rf)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var rec struct {
			OK         bool      `json:"ok"`
			ResponseID string    `json:"response_id"`
			TTFTMs     float64   `json:"ttft_ms"`
			Start      time.Time `json:"start"`
			QueueMs    *float64  `json:"queue_ms"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || !rec.OK {
			continue
		}
		w, ok := byID[rec.ResponseID]
		if !ok || w.first == 0 {
			unmatched++
			continue
		}
		e := rec.TTFTMs - float64(w.first-w.post)/1e6
		all = append(all, e)
		if rec.QueueMs != nil {
			// An open loop's request: its scheduled instant is t0 less its
			// client queue, and the wire says when its POST left.
			due := rec.Start.UnixNano() - int64(*rec.QueueMs*1e6)
			late = append(late, float64(w.post-due)/1e6)
		}
		if w.nth == 0 {
			firstErr = append(firstErr, e)
		} else {
			laterErr = append(laterErr, e)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d connections opened (SYN) in the capture; %d requests matched, %d not\n", syns, len(all), unmatched)
	fmt.Fprintln(out, "TTFT error = recorded − wire (first token chunk's packet − the POST's first packet), ms")
	for _, g := range []struct {
		name string
		v    []float64
	}{{"first request on its connection", firstErr}, {"later requests", laterErr}, {"all", all}} {
		fmt.Fprintf(out, "  %-32s %s\n", g.name, describe(g.v))
	}
	if len(late) > 0 {
		over := 0
		for _, l := range late {
			if l > 0.5 {
				over++
			}
		}
		fmt.Fprintf(out, "send lateness = the POST's first packet − the request's scheduled instant (t0 − queue_ms), ms; %d over 0.5 ms\n  %-32s %s\n", over, "open-loop requests", describe(late))
	}
	return nil
}

func describe(v []float64) string {
	if len(v) == 0 {
		return "none"
	}
	sort.Float64s(v)
	return fmt.Sprintf("n %d  p50 %.4f  p99 %.4f  max %.4f  min %.4f", len(v), pct(v, 50), pct(v, 99), v[len(v)-1], v[0])
}

// pct is numpy's linear percentile of sorted values.
func pct(s []float64, p float64) float64 {
	pos := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[lo] + (s[lo+1]-s[lo])*(pos-float64(lo))
}

// scan reads a pcap and returns the requests by answer id, and the SYNs
// sent to port.
func scan(r io.Reader, port uint16) (map[string]*wireRequest, int, error) {
	var gh [24]byte
	if _, err := io.ReadFull(r, gh[:]); err != nil {
		return nil, 0, fmt.Errorf("pcap header: %w", err)
	}
	var bo binary.ByteOrder = binary.LittleEndian
	nano := false
	switch binary.LittleEndian.Uint32(gh[:4]) {
	case 0xa1b23c4d:
		nano = true
	case 0xa1b2c3d4:
	case 0x4d3cb2a1:
		bo, nano = binary.BigEndian, true
	case 0xd4c3b2a1:
		bo = binary.BigEndian
	default:
		return nil, 0, errors.New("not a pcap file (pcapng is not read: capture with tcpdump -w)")
	}
	link := bo.Uint32(gh[20:24])
	type conn struct {
		pending []*wireRequest // sent, first token not yet seen
		n       int
	}
	conns := map[uint16]*conn{}
	byID := map[string]*wireRequest{}
	syns := 0
	var ph [16]byte
	buf := make([]byte, 0, 1<<16)
	for {
		if _, err := io.ReadFull(r, ph[:]); err == io.EOF {
			break
		} else if err != nil {
			return nil, 0, fmt.Errorf("packet header: %w", err)
		}
		sec, frac, caplen := int64(bo.Uint32(ph[0:4])), int64(bo.Uint32(ph[4:8])), int(bo.Uint32(ph[8:12]))
		if !nano {
			frac *= 1000
		}
		ts := sec*1e9 + frac
		if cap(buf) < caplen {
			buf = make([]byte, caplen)
		}
		pkt := buf[:caplen]
		if _, err := io.ReadFull(r, pkt); err != nil {
			return nil, 0, fmt.Errorf("packet: %w", err)
		}
		src, dst, flags, payload, ok := tcpOf(link, pkt)
		if !ok {
			continue
		}
		switch {
		case dst == port:
			if flags&0x02 != 0 && flags&0x10 == 0 { // SYN without ACK
				syns++
			}
			if bytes.HasPrefix(payload, []byte("POST ")) {
				c := conns[src]
				if c == nil {
					c = &conn{}
					conns[src] = c
				}
				c.pending = append(c.pending, &wireRequest{post: ts, nth: c.n})
				c.n++
			}
		case src == port:
			c := conns[dst]
			if c == nil || len(c.pending) == 0 {
				continue
			}
			const marker = `"id":"chatcmpl-r`
			i := bytes.Index(payload, []byte(marker))
			if i < 0 {
				continue
			}
			j := i + len(marker)
			k := j
			for k < len(payload) && payload[k] >= '0' && payload[k] <= '9' {
				k++
			}
			if _, err := strconv.ParseInt(string(payload[j:k]), 10, 64); err != nil {
				continue
			}
			w := c.pending[0]
			c.pending = c.pending[1:]
			w.first = ts
			byID["chatcmpl-r"+string(payload[j:k])] = w
		}
	}
	return byID, syns, nil
}

// tcpOf finds the TCP ports, flags and payload of a captured frame
// (Ethernet as tcpdump -i lo gives it, or Linux cooked capture).
func tcpOf(link uint32, p []byte) (src, dst uint16, flags byte, payload []byte, ok bool) {
	var ethType uint16
	switch link {
	case 1: // Ethernet
		if len(p) < 14 {
			return
		}
		ethType, p = binary.BigEndian.Uint16(p[12:14]), p[14:]
	case 113: // Linux cooked (SLL)
		if len(p) < 16 {
			return
		}
		ethType, p = binary.BigEndian.Uint16(p[14:16]), p[16:]
	case 276: // SLL2
		if len(p) < 20 {
			return
		}
		ethType, p = binary.BigEndian.Uint16(p[0:2]), p[20:]
	default:
		return
	}
	switch ethType {
	case 0x0800:
		if len(p) < 20 || p[9] != 6 {
			return
		}
		ihl := int(p[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(p[2:4]))
		if total < len(p) {
			p = p[:total]
		}
		if len(p) < ihl {
			return
		}
		p = p[ihl:]
	case 0x86dd:
		if len(p) < 40 || p[6] != 6 {
			return
		}
		p = p[40:]
	default:
		return
	}
	if len(p) < 20 {
		return
	}
	off := int(p[12]>>4) * 4
	if len(p) < off {
		return
	}
	return binary.BigEndian.Uint16(p[0:2]), binary.BigEndian.Uint16(p[2:4]), p[13], p[off:], true
}
