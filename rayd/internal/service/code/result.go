package code

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"time"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/jupyter"
)

// mimeText renders a MIME bundle value as text: a JSON string as itself, a
// list of strings (nbformat's multi-line form) joined, anything else as
// compact JSON text.
func mimeText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var lines []string
	if json.Unmarshal(raw, &lines) == nil {
		return strings.Join(lines, "")
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}

// jsonText renders a JSON-typed MIME value (application/json, e2b/chart,
// e2b/data) as compact JSON text.
func jsonText(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}

// resultOf maps a kernel display (execute_result or display_data) to an
// ExecutionResult: the known MIME types to their fields, the others into
// extra. Images (png, jpeg) and pdf stay base64 as the kernel sends them.
func resultOf(o jupyter.Output) *raydv1.ExecutionResult {
	r := &raydv1.ExecutionResult{IsMainResult: o.IsMain}
	for mime, raw := range o.Data {
		v := mimeText(raw)
		switch mime {
		case "text/plain":
			r.Text = &v
		case "text/html":
			r.Html = &v
		case "text/markdown":
			r.Markdown = &v
		case "text/latex":
			r.Latex = &v
		case "application/json":
			j := jsonText(raw)
			r.Json = &j
		case "application/javascript":
			r.Javascript = &v
		case "image/png":
			r.Png = &v
		case "image/jpeg":
			r.Jpeg = &v
		case "image/svg+xml":
			r.Svg = &v
		case "application/pdf":
			r.Pdf = &v
		case "e2b/chart":
			j := jsonText(raw)
			r.Chart = &j
		case "e2b/data":
			j := jsonText(raw)
			r.Data = &j
		default:
			if r.Extra == nil {
				r.Extra = map[string]string{}
			}
			r.Extra[mime] = v
		}
	}
	return r
}

// ansi matches the terminal escape sequences IPython colours tracebacks
// with.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// errorOf maps a kernel error to an ExecutionError: the traceback lines
// joined with newlines, ANSI colours stripped (clients print it as text).
func errorOf(o jupyter.Output) *raydv1.ExecutionError {
	return &raydv1.ExecutionError{
		Name:      o.Name,
		Value:     o.Text,
		Traceback: ansi.ReplaceAllString(strings.Join(o.Traceback, "\n"), ""),
	}
}

// eventOf maps a kernel output to its event (nil for "started", which the
// run emits itself).
func eventOf(o jupyter.Output, now time.Time) *raydv1.ExecuteEvent {
	switch o.Kind {
	case "stream":
		t := &raydv1.OutputText{Text: o.Text, TimestampUnixNs: now.UnixNano()}
		if o.Name == "stderr" {
			return &raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_Stderr{Stderr: t}}
		}
		return &raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_Stdout{Stdout: t}}
	case "display":
		return &raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_Result{Result: resultOf(o)}}
	case "error":
		return &raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_Error{Error: errorOf(o)}}
	}
	return nil
}
