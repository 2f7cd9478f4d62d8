package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/e2b"
)

// e2bGateway is the E2B gateway in front of an in-process local platform.
type e2bGateway struct {
	t   *testing.T
	p   *platform
	url string
	key string
}

func startE2BGateway(t *testing.T) *e2bGateway {
	t.Helper()
	p := startPlatform(t, "")
	t.Cleanup(func() { p.stop(true) })
	key, err := e2b.NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := e2b.New(context.Background(), e2b.Options{SDK: p.opts(), APIKeyHashes: [][32]byte{e2b.HashAPIKey(key)}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &e2bGateway{t: t, p: p, url: hs.URL, key: key}
}

type e2bResp struct {
	code   int
	header http.Header
	body   []byte
}

func (g *e2bGateway) call(ctx context.Context, method, path string, body any, hdr map[string]string) e2bResp {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.url+path, rd)
	if err != nil {
		g.t.Fatal(err)
	}
	if hdr == nil {
		req.Header.Set("X-API-KEY", g.key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return e2bResp{res.StatusCode, res.Header, b}
}

func (r e2bResp) want(t *testing.T, code int, what string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: status %d, want %d: %s", what, r.code, code, r.body)
	}
}

func (r e2bResp) wantErr(t *testing.T, code int, what string) {
	t.Helper()
	r.want(t, code, what)
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Code != code || e.Message == "" {
		t.Fatalf("%s: error body %s", what, r.body)
	}
}

type e2bSandbox struct {
	SandboxID          string `json:"sandboxID"`
	TemplateID         string `json:"templateID"`
	EnvdVersion        string `json:"envdVersion"`
	EnvdAccessToken    string `json:"envdAccessToken"`
	TrafficAccessToken string `json:"trafficAccessToken"`
}

// TestE2BGatewayLifecycle drives the gateway's control plane and router
// against real sandboxes: create, the router to envd and the code
// interpreter, list, getInfo, setTimeout, pause, connect (resume), kill.
func TestE2BGatewayLifecycle(t *testing.T) {
	if !isRoot() {
		t.Skip("pause and resume need the root platform's cgroup freezer; run as root")
	}
	g := startE2BGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// No key, a wrong key: 401.
	g.call(ctx, "GET", "/v2/sandboxes", nil, map[string]string{}).wantErr(t, 401, "no key")
	g.call(ctx, "GET", "/v2/sandboxes", nil, map[string]string{"X-API-KEY": "e2b_00"}).wantErr(t, 401, "wrong key")

	r := g.call(ctx, "POST", "/sandboxes", map[string]any{"templateID": "base", "timeout": 300, "secure": true,
		"allow_internet_access": true, "metadata": map[string]string{"suite": "e2b-gateway"}, "envVars": map[string]string{"GREETING": "hi"}}, nil)
	r.want(t, 201, "create")
	var sb e2bSandbox
	if err := json.Unmarshal(r.body, &sb); err != nil {
		t.Fatal(err)
	}
	if sb.SandboxID == "" || sb.EnvdVersion != e2b.EnvdVersion || sb.EnvdAccessToken == "" || sb.TrafficAccessToken == "" || sb.TemplateID != "base" {
		t.Fatalf("create: %s", r.body)
	}
	id := sb.SandboxID
	envd := func(extra map[string]string) map[string]string {
		h := map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}

	// envd's health through the router, anonymous.
	g.call(ctx, "GET", "/health", nil, envd(nil)).want(t, 204, "envd health")
	// envd's /init: the token is required; what the platform's /run did
	// already is accepted, a new token or envs are refused.
	tok := map[string]string{"X-Access-Token": sb.EnvdAccessToken}
	g.call(ctx, "POST", "/init", map[string]any{"defaultUser": "user"}, envd(nil)).want(t, 401, "init without token")
	g.call(ctx, "POST", "/init", map[string]any{"defaultUser": "user", "defaultWorkdir": "/home/user", "accessToken": sb.EnvdAccessToken}, envd(tok)).want(t, 204, "init")
	g.call(ctx, "POST", "/init", map[string]any{"accessToken": "another-token"}, envd(tok)).want(t, 400, "init with another token")
	// envd's files need the token; with it, a write and a read.
	g.call(ctx, "GET", "/files?path=/home/user/x.txt", nil, envd(nil)).want(t, 401, "files without token")
	uploadStart(t, ctx, g.url, id, sb.EnvdAccessToken)

	// A Start stream is not buffered: its first output arrives while the
	// command still runs.
	startStreams(t, ctx, g.url, id, sb.EnvdAccessToken)

	// The code interpreter's /contexts carries only the traffic token.
	ci := map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49999", "E2B-Traffic-Access-Token": sb.TrafficAccessToken}
	r = g.call(ctx, "GET", "/contexts", nil, ci)
	r.want(t, 200, "contexts with the traffic token")
	if !strings.HasPrefix(strings.TrimSpace(string(r.body)), "[") {
		t.Fatalf("contexts: %s", r.body)
	}
	ci["E2B-Traffic-Access-Token"] = "wrong"
	g.call(ctx, "GET", "/contexts", nil, ci).want(t, 401, "contexts with a wrong traffic token")
	// Port 9000 is never forwarded.
	g.call(ctx, "GET", "/", nil, map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "9000"}).wantErr(t, 403, "port 9000")

	// The sandbox's logs are its daemon's records: /run among them, and
	// never the create's envVars.
	r = g.call(ctx, "GET", "/v2/sandboxes/"+id+"/logs?limit=1000", nil, nil)
	r.want(t, 200, "logs")
	var logs struct {
		Logs []struct {
			Timestamp string            `json:"timestamp"`
			Level     string            `json:"level"`
			Message   string            `json:"message"`
			Fields    map[string]string `json:"fields"`
		} `json:"logs"`
	}
	if err := json.Unmarshal(r.body, &logs); err != nil || len(logs.Logs) == 0 || logs.Logs[0].Timestamp == "" || logs.Logs[0].Level == "" {
		t.Fatalf("logs: %v %.300s", err, r.body)
	}
	if strings.Contains(string(r.body), "GREETING") || strings.Contains(string(r.body), sb.EnvdAccessToken) {
		t.Fatalf("the logs carry an env or the token")
	}
	g.call(ctx, "GET", "/sandboxes/"+id+"/logs?limit=5", nil, nil).want(t, 200, "v1 logs")

	// list with a metadata filter, pagination
	second := g.call(ctx, "POST", "/v2/sandboxes", map[string]any{"metadata": map[string]string{"suite": "other"}}, nil)
	second.want(t, 201, "second create")
	var sb2 e2bSandbox
	_ = json.Unmarshal(second.body, &sb2)
	var listed []map[string]any
	r = g.call(ctx, "GET", "/v2/sandboxes?metadata=suite%3De2b-gateway", nil, nil)
	r.want(t, 200, "list")
	_ = json.Unmarshal(r.body, &listed)
	if len(listed) != 1 || listed[0]["sandboxID"] != id || listed[0]["state"] != "running" || listed[0]["metadata"].(map[string]any)["suite"] != "e2b-gateway" {
		t.Fatalf("filtered list: %s", r.body)
	}
	r = g.call(ctx, "GET", "/v2/sandboxes?limit=1", nil, nil)
	next := r.header.Get("X-Next-Token")
	_ = json.Unmarshal(r.body, &listed)
	if len(listed) != 1 || next == "" {
		t.Fatalf("page 1: %s", r.body)
	}
	r = g.call(ctx, "GET", "/v2/sandboxes?limit=1&nextToken="+next, nil, nil)
	_ = json.Unmarshal(r.body, &listed)
	if len(listed) != 1 || r.header.Get("X-Next-Token") != "" {
		t.Fatalf("page 2: %s %q", r.body, r.header.Get("X-Next-Token"))
	}
	g.call(ctx, "DELETE", "/sandboxes/"+sb2.SandboxID, nil, nil).want(t, 204, "kill the second")

	// getInfo, setTimeout
	r = g.call(ctx, "GET", "/sandboxes/"+id, nil, nil)
	r.want(t, 200, "getInfo")
	var info map[string]any
	_ = json.Unmarshal(r.body, &info)
	if info["state"] != "running" || info["lifecycle"].(map[string]any)["onTimeout"] != "kill" {
		t.Fatalf("getInfo: %s", r.body)
	}
	g.call(ctx, "POST", "/sandboxes/"+id+"/timeout", map[string]int{"timeout": 900}, nil).want(t, 204, "setTimeout")
	r = g.call(ctx, "GET", "/sandboxes/"+id, nil, nil)
	_ = json.Unmarshal(r.body, &info)
	end, err := time.Parse(time.RFC3339, info["endAt"].(string))
	if err != nil || time.Until(end) < 800*time.Second {
		t.Fatalf("endAt after setTimeout(900): %v %v", info["endAt"], err)
	}

	// pause, 409, the router says 502 while paused, connect resumes (201)
	// with the files kept.
	g.call(ctx, "POST", "/sandboxes/"+id+"/pause", map[string]any{}, nil).want(t, 204, "pause")
	g.call(ctx, "POST", "/sandboxes/"+id+"/pause", map[string]any{}, nil).wantErr(t, 409, "pause again")
	g.call(ctx, "GET", "/health", nil, envd(nil)).wantErr(t, 502, "health while paused")
	r = g.call(ctx, "POST", "/v2/sandboxes/"+id+"/connect", map[string]int{"timeout": 300}, nil)
	r.want(t, 201, "connect resumes")
	var c e2bSandbox
	_ = json.Unmarshal(r.body, &c)
	if c.EnvdAccessToken != sb.EnvdAccessToken {
		t.Fatal("connect: another access token")
	}
	g.call(ctx, "POST", "/v2/sandboxes/"+id+"/connect", map[string]any{}, nil).want(t, 200, "connect running")
	r = g.call(ctx, "GET", "/files?path=/home/user/x.txt", nil, envd(map[string]string{"X-Access-Token": sb.EnvdAccessToken}))
	if r.code != 200 || string(r.body) != "hello e2b\n" {
		t.Fatalf("file after resume: %d %q", r.code, r.body)
	}

	// kill: 204, then 404 with the body code, and 502 on the router.
	g.call(ctx, "DELETE", "/sandboxes/"+id, nil, nil).want(t, 204, "kill")
	g.call(ctx, "DELETE", "/sandboxes/"+id, nil, nil).wantErr(t, 404, "kill again")
	g.call(ctx, "GET", "/sandboxes/"+id, nil, nil).wantErr(t, 404, "getInfo of a killed sandbox")
	g.call(ctx, "POST", "/v2/sandboxes/"+id+"/connect", map[string]any{}, nil).wantErr(t, 404, "connect to a killed sandbox")
	g.call(ctx, "GET", "/health", nil, envd(nil)).wantErr(t, 502, "health of a killed sandbox")

	// A killed sandbox cannot be forked; unsupported features answer
	// errors naming them.
	g.call(ctx, "POST", "/sandboxes/"+id+"/fork", map[string]any{}, nil).wantErr(t, 404, "fork of a killed sandbox")
	g.call(ctx, "POST", "/sandboxes", map[string]any{"volumeMounts": []map[string]string{{"name": "v", "path": "/v"}}}, nil).wantErr(t, 400, "volumeMounts")
}

// TestE2BGatewayNetwork: allow_internet_access:false reaches the sandbox
// as deny-all.
func TestE2BGatewayNetwork(t *testing.T) {
	if !isRoot() {
		t.Skip("network policies need the root platform; run as root")
	}
	g := startE2BGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := g.call(ctx, "POST", "/sandboxes", map[string]any{"allow_internet_access": false}, nil)
	r.want(t, 201, "create deny-all")
	var sb e2bSandbox
	_ = json.Unmarshal(r.body, &sb)
	defer g.call(context.Background(), "DELETE", "/sandboxes/"+sb.SandboxID, nil, nil)
	r = g.call(ctx, "GET", "/sandboxes/"+sb.SandboxID, nil, nil)
	if !strings.Contains(string(r.body), `"allowInternetAccess":false`) {
		t.Fatalf("getInfo: %s", r.body)
	}
	g.call(ctx, "PUT", "/sandboxes/"+sb.SandboxID+"/network", map[string]any{"allow_internet_access": false, "allowOut": []string{"1.1.1.1"}}, nil).want(t, 204, "update network")
}

// envelope frames one Connect streaming message.
func envelope(flags byte, msg []byte) []byte {
	b := make([]byte, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	copy(b[5:], msg)
	return b
}

func readEnvelope(r *bufio.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	msg := make([]byte, binary.BigEndian.Uint32(h[1:]))
	_, err := io.ReadFull(r, msg)
	return h[0], msg, err
}

func uploadStart(t *testing.T, ctx context.Context, base, id, token string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/files?path=/home/user/x.txt", strings.NewReader("hello e2b\n"))
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("E2b-Sandbox-Id", id)
	req.Header.Set("E2b-Sandbox-Port", "49983")
	req.Header.Set("X-Access-Token", token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("upload: %d %s", res.StatusCode, b)
	}
}

func startStreams(t *testing.T, ctx context.Context, base, id, token string) {
	t.Helper()
	msg := []byte(`{"process":{"cmd":"/bin/bash","args":["-l","-c","echo first; echo $GREETING; sleep 3; echo second"]},"stdin":false}`)
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/process.Process/Start", bytes.NewReader(envelope(0, msg)))
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("E2b-Sandbox-Id", id)
	req.Header.Set("E2b-Sandbox-Port", "49983")
	req.Header.Set("X-Access-Token", token)
	sent := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("Start: %d %s", res.StatusCode, b)
	}
	rd := bufio.NewReader(res.Body)
	var out strings.Builder
	firstAt := time.Duration(0)
	for {
		flags, m, err := readEnvelope(rd)
		if err != nil {
			t.Fatalf("stream: %v (so far %q)", err, out.String())
		}
		if flags&2 != 0 {
			if strings.Contains(string(m), `"error"`) {
				t.Fatalf("end of stream: %s", m)
			}
			break
		}
		var ev struct {
			Event struct {
				Data *struct {
					Stdout string `json:"stdout"`
				} `json:"data"`
			} `json:"event"`
		}
		if err := json.Unmarshal(m, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Event.Data != nil && ev.Event.Data.Stdout != "" {
			b, _ := base64.StdEncoding.DecodeString(ev.Event.Data.Stdout)
			out.Write(b)
			if firstAt == 0 && strings.Contains(out.String(), "first") {
				firstAt = time.Since(sent)
			}
		}
	}
	if out.String() != "first\nhi\nsecond\n" {
		t.Fatalf("output %q", out.String())
	}
	if firstAt == 0 || firstAt > 2500*time.Millisecond {
		t.Fatalf("the first output took %v: the stream was buffered", firstAt)
	}
}
