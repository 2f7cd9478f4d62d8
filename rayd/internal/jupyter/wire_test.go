package jupyter

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

var testKey = []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")

func TestEncodeDecodeRoundTrip(t *testing.T) {
	m, err := newMessage("sess", "execute_request", map[string]any{"code": "1+1"})
	if err != nil {
		t.Fatal(err)
	}
	m.ParentHeader = Header{MsgID: "parent", MsgType: "x"}
	m.Buffers = [][]byte{[]byte("buf")}
	frames, err := m.Encode(testKey)
	if err != nil {
		t.Fatal(err)
	}
	// Routing identities before the delimiter are ignored.
	frames = append([][]byte{[]byte("id1"), []byte("id2")}, frames...)
	got, err := Decode(frames, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header != m.Header || got.ParentHeader.MsgID != "parent" || !bytes.Equal(got.Content, m.Content) || len(got.Buffers) != 1 {
		t.Fatalf("round trip: %+v", got)
	}
}

func TestSignatureMatchesJupyter(t *testing.T) {
	// hmac.new(key, b''.join(parts), sha256).hexdigest() in jupyter_client.
	sig := sign([]byte("key"), []byte(`{"a":1}`), []byte(`{}`), []byte(`{}`), []byte(`{}`))
	if string(sig) != "f1128388193e4dd1aa760827bd756a1b40b627676b5efe22c0e8297919bfa218" {
		t.Fatalf("signature %s", sig)
	}
}

func TestDecodeRejects(t *testing.T) {
	m, _ := newMessage("s", "status", map[string]any{"execution_state": "idle"})
	good, _ := m.Encode(testKey)
	clone := func() [][]byte {
		out := make([][]byte, len(good))
		for i, f := range good {
			out[i] = bytes.Clone(f)
		}
		return out
	}
	cases := map[string]struct {
		frames [][]byte
		key    []byte
		want   error
	}{
		"wrong key":        {clone(), []byte("other"), ErrBadSignature},
		"empty key":        {clone(), nil, ErrBadSignature},
		"no delimiter":     {clone()[1:], testKey, ErrMalformed},
		"too short":        {clone()[:4], testKey, ErrMalformed},
		"tampered content": {func() [][]byte { f := clone(); f[5] = []byte(`{"execution_state":"busy"}`); return f }(), testKey, ErrBadSignature},
		"bad signature":    {func() [][]byte { f := clone(); f[1] = []byte("00"); return f }(), testKey, ErrBadSignature},
	}
	for name, c := range cases {
		if _, err := Decode(c.frames, c.key); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	// Signed but not JSON.
	h, p, md, ct := []byte("nope"), []byte("{}"), []byte("{}"), []byte("{}")
	frames := [][]byte{[]byte(delimiter), sign(testKey, h, p, md, ct), h, p, md, ct}
	if _, err := Decode(frames, testKey); !errors.Is(err, ErrMalformed) {
		t.Errorf("signed garbage header: %v", err)
	}
}

func TestHandleMapsOutputs(t *testing.T) {
	mk := func(channel, typ string, content any) Inbound {
		raw, _ := json.Marshal(content)
		return Inbound{Channel: channel, Msg: &Message{Header: Header{MsgType: typ}, Content: raw}}
	}
	var outs []Output
	var out Outcome
	emit := func(o Output) { outs = append(outs, o) }
	steps := []struct {
		in           Inbound
		reply, idle  bool
		wantOutKinds int
	}{
		{mk("iopub", "status", map[string]any{"execution_state": "busy"}), false, false, 0},
		{mk("iopub", "execute_input", map[string]any{"execution_count": 3}), false, false, 1},
		{mk("iopub", "stream", map[string]any{"name": "stdout", "text": "hi"}), false, false, 2},
		{mk("iopub", "execute_result", map[string]any{"data": map[string]any{"text/plain": "2"}}), false, false, 3},
		{mk("iopub", "display_data", map[string]any{"data": map[string]any{"image/png": "iVBO"}}), false, false, 4},
		{mk("iopub", "error", map[string]any{"ename": "E", "evalue": "v", "traceback": []string{"a", "b"}}), false, false, 5},
		{mk("shell", "execute_reply", map[string]any{"status": "error", "execution_count": 3}), true, false, 5},
		{mk("iopub", "status", map[string]any{"execution_state": "idle"}), false, true, 5},
	}
	for i, s := range steps {
		r, idle := handle(s.in, &out, emit)
		if r != s.reply || idle != s.idle || len(outs) != s.wantOutKinds {
			t.Fatalf("step %d: reply %v idle %v outputs %d", i, r, idle, len(outs))
		}
	}
	if outs[0].Count != 3 || outs[1].Text != "hi" || !outs[2].IsMain || outs[3].IsMain || outs[4].Name != "E" || out.Status != "error" || out.Count != 3 {
		t.Fatalf("outputs %+v outcome %+v", outs, out)
	}
}

func TestParseProc(t *testing.T) {
	stat := []byte("123 (py (x) thon) S 1 123 123 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1000 10 18446744073709551615")
	ppid, start, err := parseStat(stat)
	if err != nil || ppid != 1 || start != 98765 {
		t.Fatalf("parseStat: %d %d %v", ppid, start, err)
	}
	if _, _, err := parseStat([]byte("garbage")); err == nil {
		t.Error("parseStat accepted garbage")
	}
	uid, err := parseStatusUID([]byte("Name:\tpython3\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\n"))
	if err != nil || uid != 1000 {
		t.Fatalf("parseStatusUID: %d %v", uid, err)
	}
	if _, err := parseStatusUID([]byte("Name: x\n")); err == nil {
		t.Error("parseStatusUID accepted no Uid line")
	}
}

// FuzzDecode: the parser never panics, and whatever it accepts re-encodes
// to a message that decodes to the same header and content.
func FuzzDecode(f *testing.F) {
	m, _ := newMessage("s", "stream", map[string]any{"name": "stdout", "text": "x"})
	good, _ := m.Encode(testKey)
	f.Add(bytes.Join(good, []byte{0}), true)
	f.Add([]byte("<IDS|MSG>\x00sig\x00{}\x00{}\x00{}\x00{}"), false)
	f.Fuzz(func(t *testing.T, raw []byte, resign bool) {
		frames := bytes.Split(raw, []byte{0})
		if resign {
			for i, fr := range frames {
				if string(fr) == delimiter && len(frames)-i >= 6 {
					frames[i+1] = sign(testKey, frames[i+2], frames[i+3], frames[i+4], frames[i+5])
					break
				}
			}
		}
		got, err := Decode(frames, testKey)
		if err != nil {
			return
		}
		again, err := got.Encode(testKey)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(again, testKey)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if back.Header != got.Header || !bytes.Equal(back.Content, got.Content) {
			t.Fatalf("round trip changed the message")
		}
	})
}

// TestPinRefusesAnotherProcess: the T12 check refuses a pid that is not
// rayd's own child (here: the test process itself) and a pin whose start
// time no longer matches.
func TestPinRefusesAnotherProcess(t *testing.T) {
	self, err := readPin(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := self.confirm(); !errors.Is(err, ErrNotOwnChild) {
		t.Fatalf("confirm of a non-child: %v", err)
	}
	recycled := self
	recycled.startTime++
	if err := recycled.confirm(); !errors.Is(err, ErrNotOwnChild) {
		t.Fatalf("confirm of a recycled pid: %v", err)
	}
}
