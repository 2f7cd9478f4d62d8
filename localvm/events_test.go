package localvm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// TestStackKey: created once, 32 bytes, 0600, the same when read again;
// a key file of another size or mode is refused.
func TestStackKey(t *testing.T) {
	dir := t.TempDir()
	k1, err := loadStackKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := loadStackKey(dir)
	if err != nil || !bytes.Equal(k1, k2) || len(k1) != 32 {
		t.Fatalf("second read: %v", err)
	}
	fi, _ := os.Stat(filepath.Join(dir, StackKeyFile))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	os.Chmod(filepath.Join(dir, StackKeyFile), 0o644)
	if _, err := loadStackKey(dir); err == nil {
		t.Fatal("a 0644 key accepted")
	}
	os.WriteFile(filepath.Join(dir, StackKeyFile), []byte("short"), 0o600)
	os.Chmod(filepath.Join(dir, StackKeyFile), 0o600)
	if _, err := loadStackKey(dir); err == nil {
		t.Fatal("a short key accepted")
	}
}

// TestEventsRoutes: the platform follows a sandbox's rayd log and admits
// its signed lines under the sandbox's own id (a line signed for, or
// claiming, another sandbox is refused); the owner gets a running
// sandbox's key, lists events, registers, lists and deletes webhooks.
func TestEventsRoutes(t *testing.T) {
	t.Parallel()
	s, _ := newFakeServer(t, Options{})
	base, _ := serve(t, s)
	res, body := do(t, http.DefaultClient, "POST", base+microvmsapi.PathMicrovms, "", `{"imageIdentifier":"local"}`)
	if res.StatusCode != 200 {
		t.Fatalf("Run: %d %s", res.StatusCode, body)
	}
	var m microvmsapi.Microvm
	_ = json.Unmarshal([]byte(body), &m)
	waitState(t, base, m.MicrovmID, microvmsapi.StateRunning)

	res, body = do(t, http.DefaultClient, "GET", base+localplatform.EventsSandboxKeyPath+"?sandbox="+m.MicrovmID, "", "")
	var sk localplatform.EventsSandboxKey
	_ = json.Unmarshal([]byte(body), &sk)
	stackKey, err := loadStackKey(s.opts.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || !bytes.Equal(sk.SandboxKey, events.SandboxKey(stackKey, m.MicrovmID)) {
		t.Fatalf("sandbox key: %d", res.StatusCode)
	}
	if res, _ := do(t, http.DefaultClient, "GET", base+localplatform.EventsSandboxKeyPath+"?sandbox=nope", "", ""); res.StatusCode != 404 {
		t.Fatalf("unknown sandbox's key: %d", res.StatusCode)
	}

	// rayd's stdout in the sandbox's log: a created line, noise, a line
	// signed with another sandbox's key, a line cut in two writes.
	line := func(key []byte, sbx string, typ events.Type, gen uint64) string {
		id, _ := events.NewEventID()
		l, err := events.Encode(key, events.Event{EventID: id, SandboxID: sbx, Type: typ, Generation: gen, OccurredAtMs: time.Now().UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	logPath := LogPath(s.opts.StateDir, m.MicrovmID)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	other := "other-sandbox"
	paused := line(sk.SandboxKey, m.MicrovmID, events.Paused, 2)
	f.WriteString(line(sk.SandboxKey, m.MicrovmID, events.Created, 1) + "\n{\"msg\":\"rayd log\"}\n" +
		line(events.SandboxKey(stackKey, other), other, events.Created, 1) + "\n" + paused[:20])
	list := func() []events.Event {
		res, body := do(t, http.DefaultClient, "GET", base+localplatform.EventsPath+"?order=asc", "", "")
		var el localplatform.EventList
		if res.StatusCode != 200 || json.Unmarshal([]byte(body), &el) != nil {
			t.Fatalf("events: %d %s", res.StatusCode, body)
		}
		return el.Events
	}
	waitUntil(t, "the created event", func() bool { return len(list()) == 1 })
	f.WriteString(paused[20:] + "\n")
	waitUntil(t, "the paused event", func() bool { return len(list()) == 2 })
	evs := list()
	if evs[0].Type != events.Created || evs[1].Type != events.Paused || evs[0].SandboxID != m.MicrovmID {
		t.Fatalf("events %+v", evs)
	}
	if res, body := do(t, http.DefaultClient, "GET", base+localplatform.EventsPath+"?limit=0x", "", ""); res.StatusCode != 400 || !strings.Contains(body, localplatform.EventsInvalid) {
		t.Fatalf("bad limit: %d %s", res.StatusCode, body)
	}

	// Webhooks.
	res, body = do(t, http.DefaultClient, "POST", base+localplatform.EventsWebhooksPath, "", `{"url":"https://10.1.2.3/hook"}`)
	if res.StatusCode != 400 || !strings.Contains(body, localplatform.EventsBlockedURL) || strings.Contains(body, "10.1.2.3") {
		t.Fatalf("blocked url: %d %s", res.StatusCode, body)
	}
	res, body = do(t, http.DefaultClient, "POST", base+localplatform.EventsWebhooksPath, "", `{"url":"https://hooks.example.com/h","types":["killed"]}`)
	var wc localplatform.WebhookCreated
	if res.StatusCode != 201 || json.Unmarshal([]byte(body), &wc) != nil || len(wc.Secret) < 32 || wc.Webhook.ID == "" {
		t.Fatalf("register: %d %s", res.StatusCode, body)
	}
	res, body = do(t, http.DefaultClient, "GET", base+localplatform.EventsWebhooksPath, "", "")
	if res.StatusCode != 200 || !strings.Contains(body, wc.Webhook.ID) || strings.Contains(body, wc.Secret) {
		t.Fatalf("list: %d %s", res.StatusCode, body)
	}
	if res, _ := do(t, http.DefaultClient, "DELETE", base+localplatform.EventsWebhooksPath+"/"+wc.Webhook.ID, "", ""); res.StatusCode != 204 {
		t.Fatalf("delete: %d", res.StatusCode)
	}
	if res, _ := do(t, http.DefaultClient, "DELETE", base+localplatform.EventsWebhooksPath+"/"+wc.Webhook.ID, "", ""); res.StatusCode != 404 {
		t.Fatalf("delete again: %d", res.StatusCode)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestScanLines: complete lines only, a partial line continued by the
// next read, an overlong line dropped whole.
func TestScanLines(t *testing.T) {
	var f followed
	var got []string
	emit := func(b []byte) { got = append(got, string(b)) }
	n, _ := scanLines(strings.NewReader("a\nbc"), &f, emit)
	if n != 4 || len(got) != 1 || got[0] != "a" {
		t.Fatalf("%d %q", n, got)
	}
	scanLines(strings.NewReader("d\n"+strings.Repeat("x", maxEventLine+1)+"\ne\n"), &f, emit)
	if len(got) != 3 || got[1] != "bcd" || got[2] != "e" {
		t.Fatalf("%q", got)
	}
}

// FuzzScanLines: never a panic, never a line longer than maxEventLine or
// holding a newline, whatever rayd's log holds and however it is split.
func FuzzScanLines(f *testing.F) {
	f.Add([]byte("rayito.event.v1 a b\nnoise\n"), 3)
	f.Add(bytes.Repeat([]byte("x"), maxEventLine+10), 100)
	f.Fuzz(func(t *testing.T, data []byte, split int) {
		split %= len(data) + 1
		if split < 0 {
			split = -split
		}
		var fl followed
		check := func(b []byte) {
			if len(b) > maxEventLine || bytes.IndexByte(b, '\n') >= 0 {
				t.Fatalf("line of %d bytes", len(b))
			}
		}
		n1, _ := scanLines(bytes.NewReader(data[:split]), &fl, check)
		n2, _ := scanLines(bytes.NewReader(data[split:]), &fl, check)
		if n1+n2 != int64(len(data)) {
			t.Fatalf("consumed %d of %d", n1+n2, len(data))
		}
	})
}
