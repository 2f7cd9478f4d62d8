package jupyter

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fastjson"
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
	f.Add("error", []byte(`{"enAme":"x","evalue":"y","ename":"z"}`))
	f.Add("stream", []byte(`{"name":1,"text":["x"]}`))
	f.Add("stream", []byte(`[1,2`))
	f.Add("stream", []byte("{\"name\":\"stdout\",\"text\":\"a\xffb\\udcff\"}"))
	f.Add("display_data", []byte("{\"data\":{\"text/plain\":\"a\xffb\"}}"))
	f.Fuzz(func(t *testing.T, msgType string, content []byte) {
		var got []Output
		in := Inbound{Channel: "iopub", Msg: &Message{Header: Header{MsgType: msgType}, Content: content}}
		var out Outcome
		handle(in, &out, func(o Output) { got = append(got, o) })
		for _, o := range got {
			for _, str := range append([]string{o.Name, o.Text}, o.Traceback...) {
				if !utf8.ValidString(str) {
					t.Fatalf("%s %q: output not UTF-8: %q", msgType, content, str)
				}
			}
			for _, raw := range o.Data {
				if !utf8.Valid(raw) {
					t.Fatalf("%s %q: display data not UTF-8", msgType, content)
				}
			}
		}
		// encoding/json matches keys without case and keeps the last of
		// duplicates; Jupyter's keys are exact, so compare exact keys of
		// objects without duplicates.
		if !validUTF8JSON(content) {
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(content, &obj) != nil {
			return
		}
		if v, err := fastjson.ParseBytes(content); err != nil || v.GetObject().Len() != len(obj) {
			return
		}
		str := func(key string) (string, bool) {
			var v string
			raw, ok := obj[key]
			return v, ok && json.Unmarshal(raw, &v) == nil
		}
		switch msgType {
		case "stream":
			name, ok1 := str("name")
			text, ok2 := str("text")
			if !ok1 || !ok2 {
				return
			}
			if len(got) != 1 || got[0].Name != name || got[0].Text != text {
				t.Fatalf("stream %q: got %+v, encoding/json reads name %q text %q", content, got, name, text)
			}
		case "error":
			name, ok1 := str("ename")
			value, ok2 := str("evalue")
			var tb []string
			if raw, ok := obj["traceback"]; ok && json.Unmarshal(raw, &tb) != nil {
				return
			}
			if !ok1 || !ok2 {
				return
			}
			if len(got) != 1 || got[0].Name != name || got[0].Text != value || !slices.Equal(got[0].Traceback, tb) {
				t.Fatalf("error %q: got %+v, encoding/json reads %q %q %q", content, got, name, value, tb)
			}
		}
	})
}

// validUTF8JSON reports whether content is JSON, UTF-8, and free of
// escaped surrogates: where the two parsers may replace bad text with a
// different number of U+FFFD (neither fails), the differential check
// skips.
func validUTF8JSON(content []byte) bool {
	if !json.Valid(content) || !utf8.Valid(content) {
		return false
	}
	lower := bytes.ToLower(content)
	for _, p := range [][]byte{[]byte(`\ud8`), []byte(`\ud9`), []byte(`\uda`), []byte(`\udb`), []byte(`\udc`), []byte(`\udd`), []byte(`\ude`), []byte(`\udf`)} {
		if bytes.Contains(lower, p) {
			return false
		}
	}
	return true
}
