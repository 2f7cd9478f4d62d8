package envdcode_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/auth"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
	"github.com/rayito-dev/rayito/rayd/internal/service/envdcode"
)

// codeDo calls the E2B code-interpreter port as @e2b/code-interpreter
// does (global fetch, JSON bodies), with the token unless token is "".
func codeDo(h *daemontest.Harness, t *testing.T, method, path, token string, body any) *http.Response {
	t.Helper()
	var buf bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&buf).Encode(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, h.CodeURL+path, &buf)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set(auth.Header, token)
	}
	resp, err := raydtest.HTTP1.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// ndjsonLines reads an /execute answer: every line one JSON object, no
// blank line.
func ndjsonLines(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/execute: %d", resp.StatusCode)
	}
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			t.Fatal("a blank line in the NDJSON stream")
		}
		m := map[string]any{}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestE2BCodeInterpreter(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)

	lines := ndjsonLines(t, codeDo(h, t, http.MethodPost, "/execute", h.Token, envdcode.ExecuteRequest{Code: "print('hi')\nimport sys; print('oops', file=sys.stderr)\n1+1"}))
	var types []string
	var stdout, stderr, text string
	for _, l := range lines {
		types = append(types, l["type"].(string))
		switch l["type"] {
		case "stdout":
			stdout += l["text"].(string)
		case "stderr":
			stderr += l["text"].(string)
		case "result":
			if l["is_main_result"] == true {
				text, _ = l["text"].(string)
			}
		}
	}
	if stdout != "hi\n" || stderr != "oops\n" || text != "2" {
		t.Fatalf("stdout %q stderr %q text %q (%v)", stdout, stderr, text, types)
	}
	if !strings.Contains(strings.Join(types, ","), "number_of_executions") {
		t.Fatalf("no number_of_executions line: %v", types)
	}

	// An exception is an error line.
	lines = ndjsonLines(t, codeDo(h, t, http.MethodPost, "/execute", h.Token, envdcode.ExecuteRequest{Code: "raise ValueError('bad')"}))
	found := false
	for _, l := range lines {
		if l["type"] == "error" && l["name"] == "ValueError" && l["value"] == "bad" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no error line: %v", lines)
	}

	// Contexts: create, execute in it (state kept), list, restart, delete.
	resp := codeDo(h, t, http.MethodPost, "/contexts", h.Token, map[string]any{"language": "python", "cwd": "/tmp"})
	var cc envdcode.Context
	if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil || resp.StatusCode != 200 || cc.ID == "" || cc.Language != "python" || cc.Cwd != "/tmp" {
		t.Fatalf("create: %d %+v %v", resp.StatusCode, cc, err)
	}
	resp.Body.Close()
	id := cc.ID
	ndjsonLines(t, codeDo(h, t, http.MethodPost, "/execute", h.Token, envdcode.ExecuteRequest{Code: "x = 41", ContextID: &id}))
	lines = ndjsonLines(t, codeDo(h, t, http.MethodPost, "/execute", h.Token, envdcode.ExecuteRequest{Code: "x + 1", ContextID: &id}))
	if got := mainText(lines); got != "42" {
		t.Fatalf("state not kept: %q", got)
	}
	resp = codeDo(h, t, http.MethodGet, "/contexts", h.Token, nil)
	var list []envdcode.Context
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("list: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	listed := false
	for _, c := range list {
		listed = listed || c.ID == id
	}
	if !listed {
		t.Fatalf("context %s not listed: %+v", id, list)
	}
	resp = codeDo(h, t, http.MethodPost, "/contexts/"+id+"/restart", h.Token, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("restart: %d", resp.StatusCode)
	}
	resp = codeDo(h, t, http.MethodDelete, "/contexts/"+id, h.Token, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	// An unknown context is a 404 (the SDK's NotFoundError).
	resp = codeDo(h, t, http.MethodPost, "/execute", h.Token, envdcode.ExecuteRequest{Code: "1", ContextID: &id})
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("execute in a deleted context: %d", resp.StatusCode)
	}
}

func mainText(lines []map[string]any) string {
	for _, l := range lines {
		if l["type"] == "result" && l["is_main_result"] == true {
			s, _ := l["text"].(string)
			return s
		}
	}
	return ""
}

// The code port has the same gate: no token, no execution or contexts.
func TestE2BCodeInterpreterNeedsToken(t *testing.T) {
	h := daemontest.New(t)
	h.Run(nil)
	for _, c := range []struct{ method, path string }{{"POST", "/execute"}, {"GET", "/contexts"}, {"POST", "/contexts"}, {"DELETE", "/contexts/x"}} {
		resp := codeDo(h, t, c.method, c.path, "", map[string]any{"code": "1"})
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d", c.method, c.path, resp.StatusCode)
		}
	}
	// /health answers as E2B's server does: 200 "OK".
	resp := codeDo(h, t, http.MethodGet, "/health", "", nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != `"OK"` {
		t.Errorf("/health: %d %q", resp.StatusCode, b)
	}
}

// TestE2BCodeInterruptsWhenTheClientGoes: an /execute whose client goes
// away mid-cell interrupts the cell at once (E2B's clients never
// reattach), long before the detach grace rayd's own API gives a dropped
// stream: the next cell runs right away, in the same kernel.
func TestE2BCodeInterruptsWhenTheClientGoes(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t) // the default detach grace: 60 s
	h.Run(nil)
	ndjsonLines(t, codeDo(h, t, http.MethodPost, "/execute", h.Token, envdcode.ExecuteRequest{Code: "kept = 1"}))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body, _ := json.Marshal(envdcode.ExecuteRequest{Code: "import time\nprint('sleeping', flush=True)\ntime.sleep(60)"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.CodeURL+"/execute", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(auth.Header, h.Token)
	resp, err := raydtest.HTTP1.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), "sleeping") {
	}
	cancel()
	resp.Body.Close()

	start := time.Now()
	lines := ndjsonLines(t, codeDo(h, t, http.MethodPost, "/execute", h.Token, envdcode.ExecuteRequest{Code: "kept + 1"}))
	if got := mainText(lines); got != "2" {
		t.Fatalf("the next cell: %q (%v)", got, lines)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Fatalf("the next cell waited %v behind the abandoned one", el)
	}
}
