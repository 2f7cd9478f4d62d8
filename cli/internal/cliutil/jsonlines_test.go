package cliutil

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestJSONLines(t *testing.T) {
	var out bytes.Buffer
	j := NewJSONLines(&out)
	in := `{"level":"INFO","msg":"rayd: ready"}` + "\nplain text\r\n\n{not json\n" + `{"a":1}{"b":2}` + "\nlast"
	// Written a byte at a time: lines may arrive in any pieces.
	for i := range len(in) {
		if _, err := j.Write([]byte{in[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	want := `{"level":"INFO","msg":"rayd: ready"}
{"text":"plain text"}
{"text":""}
{"text":"{not json"}
{"text":"{\"a\":1}{\"b\":2}"}
{"text":"last"}
`
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestJSONLinesLongLine(t *testing.T) {
	var out bytes.Buffer
	j := NewJSONLines(&out)
	long := strings.Repeat("x", maxJSONLine+10)
	if _, err := j.Write([]byte(long + "\nnext\n")); err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	var v struct {
		Text      string
		Truncated bool
	}
	if err := json.Unmarshal([]byte(lines[0]), &v); err != nil || len(v.Text) != maxJSONLine || !v.Truncated {
		t.Fatalf("first line: %d bytes, truncated %v, err %v", len(v.Text), v.Truncated, err)
	}
	if lines[1] != `{"text":"next"}` {
		t.Fatalf("second line %s", lines[1])
	}
}

func FuzzJSONLines(f *testing.F) {
	f.Add([]byte("{\"a\":1}\nplain\n"))
	f.Add([]byte("\xff\xfe{\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		j := NewJSONLines(&out)
		_, _ = j.Write(in)
		_ = j.Close()
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if line == "" && out.Len() == 0 {
				continue
			}
			if !json.Valid([]byte(line)) || line[0] != '{' {
				t.Fatalf("not a JSON object line: %q", line)
			}
		}
	})
}
