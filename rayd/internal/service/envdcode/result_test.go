package envdcode

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

func TestResultLine(t *testing.T) {
	text, js, bad := "2", `{"a":1}`, "not json"
	line := result(&raydv1.ExecutionResult{IsMainResult: true, Text: &text, Json: &js, Data: &bad, Extra: map[string]string{"type": "x", "application/x-y": "z", "application/vnd.x+json": `{"k":[1]}`}})
	b, err := json.Marshal(line)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != "result" || got["is_main_result"] != true || got["text"] != "2" || got["data"] != "not json" || got["application/x-y"] != nil {
		t.Fatalf("line %s", b)
	}
	// Other MIME types are in extra, as E2B's server sends them; a JSON
	// type's value as JSON.
	extra, _ := got["extra"].(map[string]any)
	if extra["type"] != "x" || extra["application/x-y"] != "z" || !reflect.DeepEqual(extra["application/vnd.x+json"], map[string]any{"k": []any{1.0}}) {
		t.Fatalf("extra: %s", b)
	}
	if b, _ := json.Marshal(result(&raydv1.ExecutionResult{Text: &text})); !strings.Contains(string(b), `"extra":{}`) {
		t.Fatalf("no extra: %s", b)
	}
	if m, ok := got["json"].(map[string]any); !ok || m["a"] != float64(1) {
		t.Fatalf("json not a JSON value: %s", b)
	}
}

// TestResultText: a string result reads as E2B gives it, without its
// repr's quotes; other texts as they are.
func TestResultText(t *testing.T) {
	for in, want := range map[string]string{
		"'bar'": "bar", `"it's"`: "it's", "''": "", "2": "2", "'": "'", "'a' + 'b'": "a' + 'b",
		"['x']": "['x']", "<Figure size 640x480 with 1 Axes>": "<Figure size 640x480 with 1 Axes>",
	} {
		text := in
		if got := result(&raydv1.ExecutionResult{Text: &text})["text"]; got != want {
			t.Errorf("text %q reads %q, want %q", in, got, want)
		}
	}
}
