package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestE2BCodeInterpreterThroughGateway drives the code interpreter's port
// as @e2b/code-interpreter does, through the E2B gateway and the local
// platform to a real sandbox: the default context listed before any cell,
// rich results in E2B's shapes, a missing kernel named, and a cell whose
// client went away interrupted at once (the disconnect crosses the
// router and the platform's proxy).
func TestE2BCodeInterpreterThroughGateway(t *testing.T) {
	needKernel(t)
	g := startE2BGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := g.call(ctx, "POST", "/v2/sandboxes", map[string]any{"templateID": "code-interpreter-v1"}, nil)
	r.want(t, 201, "create")
	var sb e2bSandbox
	if err := json.Unmarshal(r.body, &sb); err != nil {
		t.Fatal(err)
	}
	defer g.call(context.Background(), "DELETE", "/sandboxes/"+sb.SandboxID, nil, nil)
	ci := map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49999", "E2B-Traffic-Access-Token": sb.TrafficAccessToken, "Content-Type": "application/json"}
	exe := map[string]string{"X-Access-Token": sb.EnvdAccessToken}
	for k, v := range ci {
		exe[k] = v
	}

	// The default Python context, before any cell.
	r = g.call(ctx, "GET", "/contexts", nil, ci)
	r.want(t, 200, "contexts")
	var contexts []struct{ ID, Language, Cwd string }
	if err := json.Unmarshal(r.body, &contexts); err != nil || len(contexts) == 0 || contexts[0].Language != "python" || contexts[0].Cwd != "/home/user" {
		t.Fatalf("contexts before any cell: %s (%v)", r.body, err)
	}

	// Rich results and text as E2B's server sends them.
	run := func(code string) []map[string]any {
		t.Helper()
		r := g.call(ctx, "POST", "/execute", map[string]any{"code": code}, exe)
		r.want(t, 200, "execute")
		var out []map[string]any
		sc := bufio.NewScanner(bytes.NewReader(r.body))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			m := map[string]any{}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			out = append(out, m)
		}
		return out
	}
	results := func(lines []map[string]any) []map[string]any {
		var out []map[string]any
		for _, l := range lines {
			if l["type"] == "result" {
				out = append(out, l)
			}
		}
		return out
	}
	if res := results(run("import os; os.getenv('HOME')")); len(res) != 1 || res[0]["text"] != "/home/user" {
		t.Fatalf("a string result: %v", res)
	}
	res := results(run("import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [1, 2]); plt.title('T'); plt.show()"))
	if len(res) != 1 || res[0]["png"] == nil {
		t.Fatalf("a figure: %v", res)
	}
	if chart, _ := res[0]["chart"].(map[string]any); chart == nil || chart["type"] != "bar" || chart["title"] != "T" || len(chart["elements"].([]any)) != 2 {
		t.Fatalf("the figure's chart: %v", res[0]["chart"])
	}

	// A language whose kernel is missing: 501 naming it.
	r = g.call(ctx, "POST", "/execute", map[string]any{"code": "1", "language": "java"}, exe)
	if r.code != http.StatusNotImplemented || !strings.Contains(string(r.body), "Java kernel") {
		t.Fatalf("java: %d %s", r.code, r.body)
	}

	// The client goes away mid-cell: the cell is interrupted, the next
	// one runs at once in the same kernel.
	run("kept = 41")
	cctx, ccancel := context.WithCancel(ctx)
	body, _ := json.Marshal(map[string]any{"code": "import time\nprint('sleeping', flush=True)\ntime.sleep(120)"})
	req, err := http.NewRequestWithContext(cctx, "POST", g.url+"/execute", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range exe {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), "sleeping") {
	}
	ccancel()
	resp.Body.Close()
	start := time.Now()
	if res := results(run("kept + 1")); len(res) != 1 || res[0]["text"] != "42" || time.Since(start) > 20*time.Second {
		t.Fatalf("the cell after a client went away: %v after %v", res, time.Since(start))
	}
}
