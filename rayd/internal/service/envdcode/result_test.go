package envdcode

import (
	"encoding/json"
	"testing"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

func TestResultLine(t *testing.T) {
	text, js, bad := "2", `{"a":1}`, "not json"
	line := result(&raydv1.ExecutionResult{IsMainResult: true, Text: &text, Json: &js, Data: &bad, Extra: map[string]string{"type": "x", "application/x-y": "z"}})
	b, err := json.Marshal(line)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != "result" || got["is_main_result"] != true || got["text"] != "2" || got["data"] != "not json" || got["application/x-y"] != "z" {
		t.Fatalf("line %s", b)
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
