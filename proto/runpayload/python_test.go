package runpayload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
)

// randText returns a random valid UTF-8 string without NUL, mixing ASCII,
// characters that need escaping, BMP and astral code points.
func randText(r *rand.Rand, maxRunes int) string {
	pools := [][2]rune{
		{0x20, 0x7e}, {0x01, 0x1f}, {0x7f, 0xa0}, {0x100, 0x7ff},
		{0x800, 0xd7ff}, {0xe000, 0xffff}, {0x10000, 0x10ffff},
	}
	var b strings.Builder
	for range r.IntN(maxRunes + 1) {
		p := pools[r.IntN(len(pools))]
		b.WriteRune(p[0] + r.Int32N(p[1]-p[0]+1))
	}
	return b.String()
}

func randPayload(r *rand.Rand) *Payload {
	p := &Payload{V: 1, TokenSHA256: digest}
	if r.IntN(2) == 0 {
		p.Envs = map[string]string{}
		for range r.IntN(5) {
			k := string(rune('A'+r.IntN(26))) + strings.Repeat("_", r.IntN(2)) + string(rune('0'+r.IntN(10)))
			p.Envs[k] = randText(r, 20)
		}
	}
	if r.IntN(2) == 0 {
		p.Metadata = map[string]string{}
		for range r.IntN(5) {
			var k []byte
			for range 1 + r.IntN(8) {
				k = append(k, byte(0x20+r.IntN(0x5f)))
			}
			p.Metadata[string(k)] = randText(r, 20)
		}
	}
	if r.IntN(2) == 0 {
		p.User = "u" + string(rune('a'+r.IntN(26)))
	}
	if r.IntN(2) == 0 {
		p.Workdir = "/w/" + strings.ReplaceAll(strings.ReplaceAll(randText(r, 8), "/", "x"), ".", "x")
	}
	if r.IntN(2) == 0 {
		p.Limits = &Limits{CPUSeconds: 1 + r.IntN(MaxCPUSeconds)}
	}
	if r.IntN(2) == 0 {
		p.Lifecycle = &Lifecycle{TimeoutS: 1 + r.IntN(120), CapS: 120 + r.IntN(1000), OnTimeout: "pause", AutoResume: r.IntN(2) == 0}
	}
	if r.IntN(2) == 0 {
		p.Network = &Network{Enforce: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			p.Network.AllowOut = []string{"10.0.0.0/8", "*.example.com", "api.example.org:8443"}
			p.Network.DenyOut = []string{"0.0.0.0/0"}
		}
	}
	if r.IntN(2) == 0 {
		p.Persist = &Persist{Bucket: "bkt", KeyPrefix: randText(r, 10)}
	}
	return p
}

// TestMatchesPython checks Encode against Python's json.dumps on random
// payloads. It is skipped when python3 is not installed.
func TestMatchesPython(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	r := rand.New(rand.NewPCG(1, 2))
	var in bytes.Buffer
	var want []string
	for len(want) < 500 {
		p := randPayload(r)
		enc, err := Encode(p)
		if err != nil {
			continue // e.g. a random workdir that is not clean
		}
		// encoding/json output is a valid (if differently escaped) JSON
		// rendering of the same object for Python to re-serialize.
		line, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(line)
		in.WriteByte('\n')
		want = append(want, enc)
	}
	const script = `
import json, sys
for line in sys.stdin:
    print(json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"), ensure_ascii=True))
`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		if i >= len(want) {
			t.Fatal("python3 printed too many lines")
		}
		if got := sc.Text(); got != want[i] {
			t.Fatalf("payload %d:\nEncode: %s\npython: %s", i, want[i], got)
		}
		want[i] = ""
	}
	for i, w := range want {
		if w != "" {
			t.Fatalf("python3 printed no line for payload %d", i)
		}
	}
}
