package code

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/jupyter"
)

func TestResultOfMapsMIMETypes(t *testing.T) {
	data := map[string]json.RawMessage{
		"text/plain":             json.RawMessage(`"2"`),
		"text/html":              json.RawMessage(`"<b>"`),
		"text/markdown":          json.RawMessage(`"*m*"`),
		"text/latex":             json.RawMessage(`"$x$"`),
		"application/json":       json.RawMessage(`{ "a" : [1, 2] }`),
		"application/javascript": json.RawMessage(`"alert(1)"`),
		"image/png":              json.RawMessage(`"iVBORw0KGgo="`),
		"image/jpeg":             json.RawMessage(`"/9j/"`),
		"image/svg+xml":          json.RawMessage(`["<svg>", "</svg>"]`),
		"application/pdf":        json.RawMessage(`"JVBER"`),
		"e2b/chart":              json.RawMessage(`{"type": "line"}`),
		"application/x-thing":    json.RawMessage(`"t"`),
		"application/x-obj":      json.RawMessage(`{"k": 1}`),
	}
	r := resultOf(jupyter.Output{Kind: "display", Data: data, IsMain: true})
	want := map[string]string{
		"text": r.GetText(), "html": r.GetHtml(), "markdown": r.GetMarkdown(), "latex": r.GetLatex(), "json": r.GetJson(),
		"javascript": r.GetJavascript(), "png": r.GetPng(), "jpeg": r.GetJpeg(), "svg": r.GetSvg(), "pdf": r.GetPdf(), "chart": r.GetChart(),
	}
	expect := map[string]string{
		"text": "2", "html": "<b>", "markdown": "*m*", "latex": "$x$", "json": `{"a":[1,2]}`, "javascript": "alert(1)",
		"png": "iVBORw0KGgo=", "jpeg": "/9j/", "svg": "<svg></svg>", "pdf": "JVBER", "chart": `{"type":"line"}`,
	}
	for k, v := range expect {
		if want[k] != v {
			t.Errorf("%s = %q, want %q", k, want[k], v)
		}
	}
	if !r.GetIsMainResult() || r.GetExtra()["application/x-thing"] != "t" || r.GetExtra()["application/x-obj"] != `{"k":1}` || r.Data != nil {
		t.Errorf("result %v", r)
	}
}

func TestErrorOfStripsANSI(t *testing.T) {
	e := errorOf(jupyter.Output{Kind: "error", Name: "ValueError", Text: "boom", Traceback: []string{"\x1b[0;31mTraceback\x1b[0m", "line"}})
	if e.GetTraceback() != "Traceback\nline" || e.GetName() != "ValueError" || e.GetValue() != "boom" {
		t.Fatalf("%v", e)
	}
}

func TestExecutionBufferReplayAndTruncation(t *testing.T) {
	e := newExecution("x", func() {})
	text := string(make([]byte, 300<<10))
	for range 5 {
		e.add(&raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_Stdout{Stdout: &raydv1.OutputText{Text: text}}}, false)
	}
	e.add(&raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_End{End: &raydv1.ExecutionEnd{}}}, true)
	// 1 MiB holds three 300 KiB events plus the end: seq 1 and 2 are gone.
	var got []uint64
	err := e.follow(context.Background(), 0, func(ev *raydv1.ExecuteEvent) error { got = append(got, ev.GetSeq()); return nil })
	if err != nil || len(got) == 0 || got[0] != 3 || got[len(got)-1] != 6 {
		t.Fatalf("replay %v %v", got, err)
	}
	if err := e.follow(context.Background(), 1, func(*raydv1.ExecuteEvent) error { return nil }); !errors.Is(err, jupyter.ErrTruncated) {
		t.Fatalf("from_seq 1: %v", err)
	}
	if err := e.follow(context.Background(), 99, func(*raydv1.ExecuteEvent) error { return nil }); !errors.Is(err, jupyter.ErrTruncated) {
		t.Fatalf("from_seq 99: %v", err)
	}
}

func TestExecutionFollowerWaitsAndLosesNothing(t *testing.T) {
	e := newExecution("x", func() {})
	done := make(chan []uint64)
	go func() {
		var got []uint64
		_ = e.follow(context.Background(), 1, func(ev *raydv1.ExecuteEvent) error {
			time.Sleep(time.Millisecond)
			got = append(got, ev.GetSeq())
			return nil
		})
		done <- got
	}()
	time.Sleep(20 * time.Millisecond)
	text := string(make([]byte, 100<<10))
	for range 30 { // 3 MB through a 1 MiB buffer
		e.add(&raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_Stdout{Stdout: &raydv1.OutputText{Text: text}}}, false)
	}
	e.add(&raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_End{End: &raydv1.ExecutionEnd{}}}, true)
	got := <-done
	if len(got) != 31 {
		t.Fatalf("a live follower got %d of 31 events", len(got))
	}
}

func TestEnvCodeIsPythonLiteral(t *testing.T) {
	c := envSetCode(map[string]string{"A": "x\"'\\\n<y>\u2028"})
	if len(c) == 0 {
		t.Fatal("empty")
	}
}
