package kernel

import (
	"encoding/json"
	"slices"
	"testing"
)

// FuzzHandle feeds arbitrary content (from sandbox code, which can sign
// messages with its own kernel's key) to the iopub handler: it never
// panics, and what it reads from stream and error messages is what
// encoding/json reads from the same content (a differential check of the
// fast parser).
func FuzzHandle(f *testing.F) {
	f.Add("stream", []byte(`{"name":"stdout","text":"a\nb\u00e9\"c"}`))
	f.Add("error", []byte(`{"ename":"ValueError","evalue":"boom","traceback":["l1","l2\u001b[0m"]}`))
	f.Add("execute_result", []byte(`{"data":{"text/plain":"2","application/json":{"a":1}},"execution_count":1}`))
	f.Add("status", []byte(`{"execution_state":"idle"}`))
	f.Add("stream", []byte(`{"name":1,"text":["x"]}`))
	f.Add("stream", []byte(`[1,2`))
	f.Fuzz(func(t *testing.T, msgType string, content []byte) {
		var got []Output
		in := Inbound{Channel: "iopub", Msg: &Message{Header: Header{MsgType: msgType}, Content: content}}
		var out Outcome
		handle(in, &out, func(o Output) { got = append(got, o) })
		switch msgType {
		case "stream":
			var c struct {
				Name *string `json:"name"`
				Text *string `json:"text"`
			}
			if json.Unmarshal(content, &c) != nil || c.Name == nil || c.Text == nil || !validUTF8JSON(content) {
				return
			}
			if len(got) != 1 || got[0].Name != *c.Name || got[0].Text != *c.Text {
				t.Fatalf("stream %q: got %+v, encoding/json reads name %q text %q", content, got, *c.Name, *c.Text)
			}
		case "error":
			var c struct {
				Name      *string  `json:"ename"`
				Value     *string  `json:"evalue"`
				Traceback []string `json:"traceback"`
			}
			if json.Unmarshal(content, &c) != nil || c.Name == nil || c.Value == nil || !validUTF8JSON(content) {
				return
			}
			if len(got) != 1 || got[0].Name != *c.Name || got[0].Text != *c.Value || !slices.Equal(got[0].Traceback, c.Traceback) {
				t.Fatalf("error %q: got %+v, encoding/json reads %q %q %q", content, got, *c.Name, *c.Value, c.Traceback)
			}
		}
	})
}

// validUTF8JSON reports whether content round-trips through encoding/json
// unchanged in meaning, i.e. has no invalid UTF-8 or lone surrogates that
// the two parsers may replace differently (both replace, neither fails;
// the differential check skips them).
func validUTF8JSON(content []byte) bool {
	var v any
	if json.Unmarshal(content, &v) != nil {
		return false
	}
	for i := 0; i < len(content); i++ {
		if content[i] >= 0x80 {
			return false
		}
		if content[i] == '\\' && i+1 < len(content) && content[i+1] == 'u' {
			return false
		}
	}
	return true
}
