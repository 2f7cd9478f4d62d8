package cliutil

import (
	"bytes"
	"encoding/json"
	"io"
)

// maxJSONLine bounds the part of a line JSONLines keeps while it waits
// for the line's end; the rest of a longer line is dropped (marked
// "truncated"), so a log without newlines cannot grow the CLI's memory.
const maxJSONLine = 1 << 20

// JSONLines is the --json form of a log: one JSON object per line. A
// line that is already a JSON object (rayd's records) is written as it
// is; any other line becomes {"text": line}. Close writes a last line
// that had no newline.
type JSONLines struct {
	w         io.Writer
	buf       []byte
	truncated bool
}

// NewJSONLines writes the lines given to it to w as JSON lines.
func NewJSONLines(w io.Writer) *JSONLines { return &JSONLines{w: w} }

// Write takes any part of the log.
func (j *JSONLines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		if room := maxJSONLine - len(j.buf); len(part) > room {
			part, j.truncated = part[:room], true
		}
		j.buf = append(j.buf, part...)
		if i < 0 {
			break
		}
		p = p[i+1:]
		if err := j.flush(); err != nil {
			return n - len(p), err
		}
	}
	return n, nil
}

// Close writes what is left of a last line without a newline.
func (j *JSONLines) Close() error {
	if len(j.buf) == 0 && !j.truncated {
		return nil
	}
	return j.flush()
}

func (j *JSONLines) flush() error {
	line := bytes.TrimRight(j.buf, "\r")
	var out []byte
	if !j.truncated && len(line) > 0 && line[0] == '{' && json.Valid(line) {
		out = append(bytes.Clone(line), '\n')
	} else {
		v := map[string]any{"text": string(line)}
		if j.truncated {
			v["truncated"] = true
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out = append(b, '\n')
	}
	j.buf, j.truncated = j.buf[:0], false
	_, err := j.w.Write(out)
	return err
}
