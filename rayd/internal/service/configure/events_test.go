package configure

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

const secEvents = raydv1.ConfigSection_CONFIG_SECTION_LIFECYCLE_EVENTS

// fakeEvents records the keys it is given.
type fakeEvents struct {
	mu   sync.Mutex
	keys [][]byte
}

func (f *fakeEvents) SetKey(key []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, bytes.Clone(key))
}

func (f *fakeEvents) snapshot() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.keys...)
}

func eventsReq(key []byte) *raydv1.ConfigureRequest {
	return &raydv1.ConfigureRequest{LifecycleEvents: &raydv1.LifecycleEventsConfig{SandboxKey: key}}
}

// noKey fails when any response, status or log holds the key in any
// usual spelling.
func noKey(t *testing.T, h *harness, key []byte) {
	t.Helper()
	h.record(h.status())
	h.mu.Lock()
	texts := append([]string{h.logs.String()}, h.texts...)
	h.mu.Unlock()
	for _, s := range texts {
		for _, k := range []string{string(key), hex.EncodeToString(key), base64.StdEncoding.EncodeToString(key),
			base64.RawURLEncoding.EncodeToString(key), fmt.Sprint(key)} {
			if strings.Contains(s, k) {
				t.Fatalf("the key leaked: %q", s)
			}
		}
	}
}

func TestLifecycleEventsSection(t *testing.T) {
	ev := &fakeEvents{}
	h := newHarness(t, func(o *Options) { o.Events = ev })
	if !h.s.LifecycleEventsSupported() {
		t.Fatal("LifecycleEventsSupported is false")
	}
	key := bytes.Repeat([]byte{0xA7}, 32)
	wantCode(t, h.one(eventsReq(key)), secEvents, codeOK, "")
	if got := ev.snapshot(); len(got) != 1 || !bytes.Equal(got[0], key) {
		t.Fatalf("keys %x", got)
	}
	// Wrong sizes: INVALID naming the field, the key in force untouched.
	for _, n := range []int{1, 16, 31, 33, 64} {
		bad := bytes.Repeat([]byte{0xB3}, n)
		r := h.one(eventsReq(bad))
		wantCode(t, r, secEvents, codeInval, ClassInvalid)
		if !strings.Contains(r.Message, "sandbox_key") {
			t.Errorf("message %q does not name the field", r.Message)
		}
		noKey(t, h, bad)
	}
	if got := ev.snapshot(); len(got) != 1 {
		t.Fatalf("an invalid key reached the emitter: %d calls", len(got))
	}
	// An empty section turns events off.
	wantCode(t, h.one(&raydv1.ConfigureRequest{LifecycleEvents: &raydv1.LifecycleEventsConfig{}}), secEvents, codeOK, "")
	if got := ev.snapshot(); len(got) != 2 || len(got[1]) != 0 {
		t.Fatalf("keys %x", got)
	}
	if r := h.section(secEvents); r.Code != codeOK {
		t.Errorf("status %v", r)
	}
	noKey(t, h, key)
}

func TestLifecycleEventsIsolation(t *testing.T) {
	ev := &fakeEvents{}
	h := newHarness(t, func(o *Options) { o.Events = ev; o.Unsupported = ClassIsolation })
	if h.s.LifecycleEventsSupported() {
		t.Fatal("LifecycleEventsSupported under isolation")
	}
	wantCode(t, h.one(eventsReq(bytes.Repeat([]byte{1}, 32))), secEvents, codeUnsupp, ClassIsolation)
	if len(ev.snapshot()) != 0 {
		t.Fatal("the key reached the emitter")
	}
}

func TestLifecycleEventsNotBuilt(t *testing.T) {
	h := newHarness(t, nil)
	if h.s.LifecycleEventsSupported() {
		t.Fatal("LifecycleEventsSupported without an emitter")
	}
	wantCode(t, h.one(eventsReq(bytes.Repeat([]byte{1}, 32))), secEvents, codeUnsupp, ClassNotBuilt)
}
