package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/internal/canonjson"
	"github.com/agentplane/agentplane/plane"
)

// routeInput is one line of `agentplane route` input.
type routeInput struct {
	Text      *string               `json:"text"`
	UI        bool                  `json:"ui"`
	Mode      string                `json:"mode"`
	Roles     []string              `json:"roles"`
	Selection *agentplane.Selection `json:"selection"`
	// AWC is the session's active work context the turn is routed in.
	AWC *agentplane.ActiveWorkContext `json:"awc"`
}

type routeError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// maxLine bounds one input line; longer lines are reported and skipped.
const maxLine = 64 << 10

func (m *Main) route(ctx context.Context, args []string) error {
	fs := m.flags("route", "[--config FILE]")
	c := m.commonFlags(fs, false)
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	rt, err := m.open(ctx, c, plane.Options{Core: m.routing()})
	if err != nil {
		return err
	}
	defer rt.Close(0)
	in := bufio.NewReaderSize(m.Stdin, 64<<10)
	out := bufio.NewWriterSize(m.Stdout, 64<<10)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	failed := false
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(in)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, errLineTooLong) {
			return fmt.Errorf("route: reading input: %w", err)
		}
		var v any
		if err != nil {
			v = lineError(agentplane.CodeInputTooLong, fmt.Sprintf("line %d: %v", lineNo, err))
		} else {
			d, rerr := routeLine(ctx, rt.Core, line)
			if rerr != nil {
				v = lineError(agentplane.ErrorCode(rerr), fmt.Sprintf("line %d: %s", lineNo, agentplane.ErrorMessage(rerr)))
			} else {
				v = d
			}
		}
		if _, isErr := v.(routeError); isErr {
			failed = true
		}
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("route: %w", err)
		}
		if in.Buffered() == 0 {
			out.Flush() // interactive use: answer before blocking on the next line
		}
		if ctx.Err() != nil {
			break
		}
	}
	if failed {
		return exitCode(1) // each failed line says why
	}
	return nil
}

func lineError(code, msg string) routeError {
	var e routeError
	e.Error.Code, e.Error.Message = code, msg
	return e
}

var errLineTooLong = fmt.Errorf("longer than %d bytes", maxLine)

// readLine reads one line without its line ending. It returns (nil, io.EOF)
// at the end of input; a line longer than maxLine is consumed and reported
// with errLineTooLong.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxLine+2 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return []byte{}, errLineTooLong
		}
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return nil, err
		}
		return bytes.TrimRight(line, "\r\n"), nil
	}
}

// routing are the core options of the commands that route and run no
// tools (route, validate, probe): no MCP server is connected.
func (m *Main) routing() core.Options { return core.Options{SkipMCP: true} }

func routeLine(ctx context.Context, c *core.Core, line []byte) (agentplane.Decision, error) {
	if err := canonjson.Check(line); err != nil {
		return agentplane.Decision{}, agentplane.Errorf(agentplane.CodeInvalidInput, "not a turn object: %v", err)
	}
	var in routeInput
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return agentplane.Decision{}, agentplane.Errorf(agentplane.CodeInvalidInput, "not a turn object: %v", err)
	}
	if dec.More() {
		return agentplane.Decision{}, agentplane.Errorf(agentplane.CodeInvalidInput, "more than one JSON value on the line")
	}
	if in.Text == nil && in.Selection == nil {
		return agentplane.Decision{}, agentplane.Errorf(agentplane.CodeInvalidInput, `missing "text"`)
	}
	mode := in.Mode
	if mode == "" {
		mode = c.View().Registry().DefaultMode()
	} else if !c.ModeOK(mode) {
		return agentplane.Decision{}, agentplane.Errorf(agentplane.CodeInvalidInput, "unknown mode %q", mode)
	}
	turn := agentplane.TurnInput{UI: in.UI, Roles: in.Roles, Selection: in.Selection}
	if in.Text != nil {
		turn.Text = *in.Text
	}
	sess := &agentplane.Session{ID: "route", Mode: mode, Version: 1}
	if in.AWC != nil {
		if err := in.AWC.Validate(); err != nil {
			return agentplane.Decision{}, agentplane.Errorf(agentplane.CodeInvalidInput, "awc: %s", agentplane.ErrorMessage(err))
		}
		sess.AWC = *in.AWC
	}
	return c.Route(ctx, sess, turn)
}
