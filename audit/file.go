package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// File is a Log kept in one append-only JSON Lines file, one record per
// line, the sessions interleaved. It is also the export format. Every
// append is written and synced before Append returns.
type File struct {
	mu   sync.Mutex
	path string
	f    *os.File
	last map[string]tail // per session: the last record's seq and hash
}

type tail struct {
	seq  int64
	hash string
}

// OpenFile opens (creating if needed) the log at path and reads it to learn
// where each session's chain ends. A line that is not a record is an error
// naming the line.
func OpenFile(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("audit: open %s: %w", path, err)
	}
	l := &File{path: path, f: f, last: map[string]tail{}}
	err = ReadJSONL(f, func(line int, r *Record) error {
		l.last[r.Session] = tail{r.Seq, r.Hash}
		return nil
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit: %s: %w", path, err)
	}
	return l, nil
}

// Append seals r, writes it as one line and syncs the file.
func (l *File) Append(_ context.Context, r *Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.last[r.Session]
	if err := Seal(r, t.seq, t.hash); err != nil {
		return err
	}
	return l.write(r)
}

// Write appends a record that a store has sealed already, as it is; it
// must continue the session's chain in this file (the export of a store's
// log), else Write fails and writes nothing.
func (l *File) Write(r *Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.last[r.Session]
	if r.Seq != t.seq+1 || r.Prev != t.hash {
		return fmt.Errorf("audit: %s: record %s/%d does not continue the chain in this file (at seq %d)", l.path, r.Session, r.Seq, t.seq)
	}
	return l.write(r)
}

func (l *File) write(r *Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("audit: encode record: %w", err)
	}
	b = append(b, '\n')
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("audit: write %s: %w", l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("audit: sync %s: %w", l.path, err)
	}
	l.last[r.Session] = tail{r.Seq, r.Hash}
	return nil
}

// Records reads the file and returns the session's records in order.
func (l *File) Records(_ context.Context, session string) ([]Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("audit: open %s: %w", l.path, err)
	}
	defer f.Close()
	var out []Record
	err = ReadJSONL(f, func(_ int, r *Record) error {
		if r.Session == session {
			out = append(out, *r)
		}
		return nil
	})
	return out, err
}

// Close closes the file.
func (l *File) Close() error { return l.f.Close() }

// MaxLine is the longest record line ReadJSONL accepts.
const MaxLine = 16 << 20

// ReadJSONL reads records from JSON Lines, calling fn with each record and
// its 1-based line number. Blank lines are skipped; anything else that is
// not a record is an error naming the line.
func ReadJSONL(r io.Reader, fn func(line int, rec *Record) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return fmt.Errorf("line %d: not an audit record: %v", line, err)
		}
		if rec.Session == "" {
			return fmt.Errorf("line %d: record without session", line)
		}
		if err := fn(line, &rec); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("a line longer than %d bytes", MaxLine)
		}
		return err
	}
	return nil
}

// Summary describes a verified log.
type Summary struct {
	Sessions int
	Records  int
}

// VerifyJSONL verifies every session chain in a JSON Lines log as it reads
// it, and returns an error naming the line of the first bad record. A
// record dropped from the very end of a chain leaves no trace in the chain
// itself; compare the last hash with one kept elsewhere to catch that.
func VerifyJSONL(r io.Reader) (Summary, error) {
	last := map[string]tail{}
	var sum Summary
	err := ReadJSONL(r, func(line int, rec *Record) error {
		t, seen := last[rec.Session]
		bad := func(reason string) error {
			return fmt.Errorf("line %d: session %s, seq %d: %s", line, rec.Session, rec.Seq, reason)
		}
		switch {
		case rec.Seq != t.seq+1:
			return bad(fmt.Sprintf("sequence number %d where %d was expected: a record was dropped, added or reordered", rec.Seq, t.seq+1))
		case rec.Prev != t.hash:
			return bad("does not follow the previous record's hash: a record was dropped, added or reordered")
		}
		h, err := rec.ComputeHash()
		if err != nil {
			return bad(err.Error())
		}
		if h != rec.Hash {
			return bad("hash mismatch: the record was edited")
		}
		if !seen {
			sum.Sessions++
		}
		sum.Records++
		last[rec.Session] = tail{rec.Seq, rec.Hash}
		return nil
	})
	return sum, err
}
