package audit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// File is an audit log kept in one append-only JSON Lines file, one sealed
// record per line as the store sealed it, the sessions interleaved: the
// export format. Every write is synced before it returns. The file is
// created readable by its owner only (0600).
type File struct {
	mu   sync.Mutex
	path string
	f    *os.File
	last map[string]chain // per session: the last record's seq and hash
}

// OpenFile opens (creating if needed) the log at path and reads it to learn
// where each session's chain ends; a line that is not a record, or a chain
// that is broken, is an error naming the line.
func OpenFile(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open %s: %w", path, err)
	}
	l := &File{path: path, f: f, last: map[string]chain{}}
	if _, err := verifyInto(f, l.last); err != nil {
		f.Close()
		return nil, fmt.Errorf("audit: %s: %w", path, err)
	}
	return l, nil
}

// Path returns the file's path.
func (l *File) Path() string { return l.path }

// Last returns the sequence number of the session's last record in the
// file, 0 when it has none.
func (l *File) Last(session string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[session].seq
}

// Write appends records a store has sealed, as they are stored (Raw). Each
// must continue its session's chain in this file; Write stops at the first
// that does not, or that the disk refuses, with an error saying which.
func (l *File) Write(recs ...Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var buf []byte
	pending := map[string]chain{}
	for i := range recs {
		r := &recs[i]
		c, ok := pending[r.Session]
		if !ok {
			c = l.last[r.Session]
		}
		if reason := c.next(r); reason != "" {
			return fmt.Errorf("audit: %s: record %s/%d does not continue the chain in this file (at seq %d): %s", l.path, r.Session, r.Seq, l.last[r.Session].seq, reason)
		}
		pending[r.Session] = c
		buf = append(append(buf, r.Raw...), '\n')
	}
	if len(buf) == 0 {
		return nil
	}
	if _, err := l.f.Write(buf); err != nil {
		return fmt.Errorf("audit: write %s: %w", l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("audit: sync %s: %w", l.path, err)
	}
	for s, c := range pending {
		l.last[s] = c
	}
	return nil
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
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		rec, err := Decode(b)
		if err != nil {
			return fmt.Errorf("line %d: not an audit record: %v", line, err)
		}
		if err := fn(line, &rec); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("line %d: longer than %d bytes", line+1, MaxLine)
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
// itself; compare the last hash with one kept elsewhere (the store) to
// catch that.
func VerifyJSONL(r io.Reader) (Summary, error) {
	return verifyInto(r, map[string]chain{})
}

func verifyInto(r io.Reader, last map[string]chain) (Summary, error) {
	var sum Summary
	err := ReadJSONL(r, func(line int, rec *Record) error {
		c, seen := last[rec.Session]
		if reason := c.next(rec); reason != "" {
			return fmt.Errorf("line %d: session %s, seq %d: %s", line, rec.Session, rec.Seq, reason)
		}
		if !seen {
			sum.Sessions++
		}
		sum.Records++
		last[rec.Session] = c
		return nil
	})
	return sum, err
}

// Export brings the file up to date with a session's chain in a store: it
// appends every record after the file's last one for the session, read
// with records(after) (the records with sequence numbers above after). A
// file whose chain is not the store's (another store's file, or a store
// that lost records) is an error, and so is any write that fails: an
// export is complete or it fails loudly.
func (l *File) Export(ctx context.Context, session string, records func(ctx context.Context, after int64) ([]Record, error)) error {
	l.mu.Lock()
	have := l.last[session]
	l.mu.Unlock()
	from := max(have.seq-1, 0) // read the file's last record back, to compare
	recs, err := records(ctx, from)
	if err != nil {
		return fmt.Errorf("audit: export %s to %s: %w", session, l.path, err)
	}
	if have.seq > 0 {
		if len(recs) == 0 || recs[0].Seq != have.seq || recs[0].Hash != have.hash {
			return fmt.Errorf("audit: %s holds session %s up to seq %d, which the store's chain does not match: export it to another file", l.path, session, have.seq)
		}
		recs = recs[1:]
	}
	return l.Write(recs...)
}
