package altsvc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The saved file has one alternative per line, in preference order within an
// origin, fields separated by single spaces (in the spirit of curl's alt-svc
// file, but keyed by the https origin):
//
//	https://example.com:443 h3 alt.example.com 8443 2026-11-13T10:20:30Z 1
//
// origin, protocol id (percent-encoded as in the header), alternative host
// (IPv6 in brackets), port, expiry (RFC 3339, UTC, seconds), persist (0/1).
// Lines starting with '#' and blank lines are ignored. Broken marks are not
// saved: they describe the network of the process that saved the file.
const fileHeader = "# ferry alt-svc cache v1: origin protocol host port expires persist\n"

// maxLineLen bounds one line of a loaded file; longer lines are malformed.
const maxLineLen = 1024

// Save writes the live contents of the cache to w in the text format read by
// [Cache.Load]. I/O happens outside the cache's locks. The error is w's
// error, wrapped.
func (c *Cache) Save(w io.Writer) error {
	snap := c.Snapshot()
	bw := bufio.NewWriter(w)
	bw.WriteString(fileHeader)
	for _, ent := range snap {
		origin := ent.Origin.String()
		for _, a := range ent.Alternatives {
			persist := "0"
			if a.Persist {
				persist = "1"
			}
			fmt.Fprintf(bw, "%s %s %s %d %s %s\n", origin, encodeProtocolID(a.Protocol),
				hostField(a.Host), a.Port, a.Expires().Format(time.RFC3339), persist)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("altsvc: save: %w", err)
	}
	return nil
}

func hostField(host string) string {
	if strings.IndexByte(host, ':') >= 0 {
		return "[" + host + "]"
	}
	return host
}

// LoadStats counts what [Cache.Load] did with the lines it read.
type LoadStats struct {
	Loaded    int // alternatives stored
	Expired   int // lines skipped because their expiry had passed
	Malformed int // lines skipped because they could not be parsed
	Excess    int // lines skipped because their origin already had MaxAlternatives
}

// Skipped returns the number of lines that were not loaded.
func (s LoadStats) Skipped() int { return s.Expired + s.Malformed + s.Excess }

// Load reads a file written by [Cache.Save] and stores its live
// alternatives: each origin in the file gets the file's alternatives in
// place of the ones cached (capacity rules apply). Expired and malformed
// lines are skipped and counted, never fatal. Load is all or nothing with
// respect to I/O: if reading r fails, nothing is stored and the wrapped read
// error is returned.
func (c *Cache) Load(r io.Reader) (LoadStats, error) {
	var st LoadStats
	now := c.now()
	type group struct {
		origin Origin
		recs   []Alternative
	}
	var groups []*group
	index := make(map[Origin]*group)

	br := bufio.NewReaderSize(r, maxLineLen+1)
	for {
		line, tooLong, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return LoadStats{}, fmt.Errorf("altsvc: load: %w", err)
		}
		done := err != nil
		switch {
		case tooLong:
			st.Malformed++
		case line == "" || line[0] == '#':
		default:
			o, rec, perr := parseLine(line)
			switch {
			case perr != nil:
				st.Malformed++
			case now >= rec.expires:
				st.Expired++
			default:
				g := index[o]
				if g == nil {
					g = &group{origin: o}
					index[o] = g
					groups = append(groups, g)
				}
				switch {
				case hasTarget(g.recs, rec.Protocol, rec.Host, rec.Port):
					st.Malformed++ // a duplicate line
				case len(g.recs) == MaxAlternatives:
					st.Excess++
				default:
					g.recs = append(g.recs, rec)
					st.Loaded++
				}
			}
		}
		if done {
			break
		}
	}
	c.reclaimExpired(now)
	for _, g := range groups {
		c.replace(g.origin, g.recs, nil, 0, nil, now)
	}
	return st, nil
}

// readLine returns the next line without its end of line; tooLong reports a
// line longer than maxLineLen, which is consumed and dropped. err is io.EOF
// after the last line.
func readLine(br *bufio.Reader) (line string, tooLong bool, err error) {
	b, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		for errors.Is(err, bufio.ErrBufferFull) { // drop the rest of the line
			_, err = br.ReadSlice('\n')
		}
		return "", true, err
	}
	return strings.TrimSpace(string(b)), false, err
}

// parseLine parses one saved alternative.
func parseLine(line string) (Origin, Alternative, error) {
	f := strings.Fields(line)
	if len(f) != 6 {
		return Origin{}, Alternative{}, fmt.Errorf("want 6 fields, have %d", len(f))
	}
	o, err := ParseOrigin(f[0])
	if err != nil {
		return Origin{}, Alternative{}, err
	}
	proto, err := decodeProtocolID(f[1])
	if err != nil {
		return Origin{}, Alternative{}, err
	}
	host, err := normaliseHost(f[2])
	if err != nil {
		return Origin{}, Alternative{}, err
	}
	port, err := parsePort(f[3])
	if err != nil {
		return Origin{}, Alternative{}, err
	}
	exp, err := time.Parse(time.RFC3339, f[4])
	if err != nil {
		return Origin{}, Alternative{}, err
	}
	var persist bool
	switch f[5] {
	case "0":
	case "1":
		persist = true
	default:
		return Origin{}, Alternative{}, fmt.Errorf("persist %q is not 0 or 1", f[5])
	}
	if exp.Year() < 1970 || exp.Year() > 2200 {
		return Origin{}, Alternative{}, fmt.Errorf("expiry %q out of range", f[4])
	}
	ns := exp.UnixNano()
	rec := Alternative{Protocol: proto, Host: host, Port: uint16(port), Persist: persist, expires: ns}
	return o, rec, nil
}
