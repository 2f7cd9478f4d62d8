package runpayload

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const digest = "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925"

// doc returns a minimal valid payload with extra members appended
// (extra must start with a comma when non-empty).
func doc(extra string) string {
	return `{"v":1,"token_sha256":"` + digest + `"` + extra + `}`
}

func minimal() *Payload { return &Payload{V: 1, TokenSHA256: digest} }

func TestGoldenEncoding(t *testing.T) {
	p := &Payload{
		V:           1,
		TokenSHA256: digest,
		Envs:        map[string]string{"B": "é<>&\n", "A": "x"},
		User:        "alice",
		Workdir:     "/srv/app",
		Metadata:    map[string]string{"team": `a"b\c`, "z": "😀", "k 1": "\x7f\t/"},
		Limits:      &Limits{CPUSeconds: 3600},
		Lifecycle:   &Lifecycle{TimeoutS: 300, CapS: 3600, OnTimeout: "pause", AutoResume: true},
		Network:     &Network{Enforce: true},
		Persist:     &Persist{Bucket: "my-bucket.1", KeyPrefix: "sandboxes/x/"},
	}
	// Produced by python3 json.dumps(obj, sort_keys=True,
	// separators=(",", ":"), ensure_ascii=True).
	const want = `{"envs":{"A":"x","B":"\u00e9<>&\n"},"lifecycle":{"auto_resume":true,"cap_s":3600,"on_timeout":"pause","timeout_s":300},"limits":{"cpu_seconds":3600},"metadata":{"k 1":"\u007f\t/","team":"a\"b\\c","z":"\ud83d\ude00"},"network":{"enforce":true},"persist":{"bucket":"my-bucket.1","key_prefix":"sandboxes/x/"},"token_sha256":"66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925","user":"alice","v":1,"workdir":"/srv/app"}`
	got, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Encode =\n%s\nwant\n%s", got, want)
	}
	back, err := Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Fatalf("Decode(Encode(p)) = %+v, want %+v", back, p)
	}
}

func TestEncodeMinimalAndOmission(t *testing.T) {
	tests := []struct {
		name string
		p    *Payload
		want string
	}{
		{"minimal", minimal(), `{"token_sha256":"` + digest + `","v":1}`},
		{"empty maps and strings omitted", &Payload{
			V: 1, TokenSHA256: digest, Envs: map[string]string{}, Metadata: map[string]string{},
		}, `{"token_sha256":"` + digest + `","v":1}`},
		{"false booleans kept", &Payload{
			V: 1, TokenSHA256: digest,
			Lifecycle: &Lifecycle{TimeoutS: 1, CapS: 120, OnTimeout: "kill"},
			Network:   &Network{},
		}, `{"lifecycle":{"auto_resume":false,"cap_s":120,"on_timeout":"kill","timeout_s":1},"network":{"enforce":false},"token_sha256":"` + digest + `","v":1}`},
		{"empty key_prefix omitted", &Payload{
			V: 1, TokenSHA256: digest, Persist: &Persist{Bucket: "abc"},
		}, `{"persist":{"bucket":"abc"},"token_sha256":"` + digest + `","v":1}`},
		{"empty env value kept", &Payload{
			V: 1, TokenSHA256: digest, Envs: map[string]string{"EMPTY": ""},
		}, `{"envs":{"EMPTY":""},"token_sha256":"` + digest + `","v":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encode(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Encode =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestEncodeStringEscapes(t *testing.T) {
	// Expected values produced by python3 json.dumps(..., ensure_ascii=True).
	tests := []struct {
		in, want string
	}{
		{"plain", `"plain"`},
		{"<>&'/", `"<>&'/"`},
		{"\"\\", `"\"\\"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f\u007f"`},
		{"é", `"\u00e9"`},
		{"\u2028\u2029\ufeff\ufffd", `"\u2028\u2029\ufeff\ufffd"`},
		{"😀", `"\ud83d\ude00"`},
		{"a😀b𝄞\U0010ffff", `"a\ud83d\ude00b\ud834\udd1e\udbff\udfff"`},
		{"ÀÁ", `"\u00c0\u00c1"`},
	}
	for _, tt := range tests {
		if got := string(appendString(nil, tt.in)); got != tt.want {
			t.Errorf("appendString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestEmoji(t *testing.T) {
	p := minimal()
	p.Envs = map[string]string{"E": "a😀b𝄞\u2028\U0010ffff\ufffd"}
	const want = `{"envs":{"E":"a\ud83d\ude00b\ud834\udd1e\u2028\udbff\udfff\ufffd"},"token_sha256":"66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925","v":1}`
	got, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Encode =\n%s\nwant\n%s", got, want)
	}
	back, err := Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Fatalf("round trip: got %+v", back)
	}
	// Raw (unescaped) UTF-8 input is accepted too.
	raw, err := Decode(doc(`,"envs":{"E":"a😀b𝄞` + "\u2028\U0010ffff\ufffd" + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(raw, p) {
		t.Fatalf("raw UTF-8: got %+v", raw)
	}
}

// sizedDoc returns a valid payload whose canonical encoding is exactly n
// bytes long.
func sizedDoc(t *testing.T, n int) (string, *Payload) {
	t.Helper()
	p := minimal()
	p.Envs = map[string]string{"A": ""}
	empty, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	pad := n - len(empty)
	if pad <= 0 || pad > MaxEnvValueLen {
		t.Fatalf("cannot build a %d-byte payload", n)
	}
	p.Envs["A"] = strings.Repeat("x", pad)
	return string(appendPayload(nil, p)), p
}

func TestMaxLen(t *testing.T) {
	s, p := sizedDoc(t, MaxLen)
	if len(s) != 4096 {
		t.Fatalf("len = %d", len(s))
	}
	got, err := Encode(p)
	if err != nil || got != s {
		t.Fatalf("Encode at MaxLen: %v", err)
	}
	if _, err := Decode(s); err != nil {
		t.Fatalf("Decode at MaxLen: %v", err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate at MaxLen: %v", err)
	}

	s, p = sizedDoc(t, MaxLen+1)
	if len(s) != 4097 {
		t.Fatalf("len = %d", len(s))
	}
	if _, err := Encode(p); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Encode above MaxLen: err = %v, want ErrTooLarge", err)
	}
	if _, err := Decode(s); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Decode above MaxLen: err = %v, want ErrTooLarge", err)
	}
	if err := p.Validate(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Validate above MaxLen: err = %v, want ErrTooLarge", err)
	}

	// Insignificant whitespace counts against the input limit.
	s, _ = sizedDoc(t, MaxLen)
	if _, err := Decode(s + " "); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Decode of 4097 bytes with whitespace: err = %v, want ErrTooLarge", err)
	}

	// Raw UTF-8 input that fits but whose canonical (escaped) encoding
	// does not is rejected, so that Encode(Decode(s)) always succeeds.
	s = doc(`,"envs":{"A":"` + strings.Repeat("é", 1000) + `"}`)
	if len(s) > MaxLen {
		t.Fatal("test input too long")
	}
	if _, err := Decode(s); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Decode of expanding UTF-8: err = %v, want ErrTooLarge", err)
	}
}

func TestDecodeAccept(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *Payload
	}{
		{"minimal", doc(""), minimal()},
		{"key order and whitespace", " {\n \"token_sha256\" : \"" + digest + "\" ,\t\"v\":1 }\r\n", minimal()},
		{"escaped keys", `{"\u0076":1,"token_sha256":"` + digest + `"}`, minimal()},
		{"escaped slash", doc(`,"workdir":"\/home\/x"`), &Payload{V: 1, TokenSHA256: digest, Workdir: "/home/x"}},
		{"empty envs is nil", doc(`,"envs":{}`), minimal()},
		{"empty metadata is nil", doc(`,"metadata":{}`), minimal()},
		{"explicit empty user", doc(`,"user":""`), minimal()},
		{"explicit empty workdir", doc(`,"workdir":""`), minimal()},
		{"envs", doc(`,"envs":{"_":"","a1":"v","PATH":"/bin:/usr/bin","X":"é\n\t"}`),
			&Payload{V: 1, TokenSHA256: digest, Envs: map[string]string{"_": "", "a1": "v", "PATH": "/bin:/usr/bin", "X": "é\n\t"}}},
		{"users", doc(`,"user":"_a-b_9"`), &Payload{V: 1, TokenSHA256: digest, User: "_a-b_9"}},
		{"user 32 chars", doc(`,"user":"` + strings.Repeat("u", 32) + `"`), &Payload{V: 1, TokenSHA256: digest, User: strings.Repeat("u", 32)}},
		{"workdir root", doc(`,"workdir":"/"`), &Payload{V: 1, TokenSHA256: digest, Workdir: "/"}},
		{"metadata", doc(`,"metadata":{" ~!":"é","k":""}`), &Payload{V: 1, TokenSHA256: digest, Metadata: map[string]string{" ~!": "é", "k": ""}}},
		{"limits", doc(`,"limits":{"cpu_seconds":28800}`), &Payload{V: 1, TokenSHA256: digest, Limits: &Limits{CPUSeconds: 28800}}},
		{"limits min", doc(`,"limits":{"cpu_seconds":1}`), &Payload{V: 1, TokenSHA256: digest, Limits: &Limits{CPUSeconds: 1}}},
		{"lifecycle kill", doc(`,"lifecycle":{"timeout_s":1,"cap_s":120,"on_timeout":"kill","auto_resume":false}`),
			&Payload{V: 1, TokenSHA256: digest, Lifecycle: &Lifecycle{TimeoutS: 1, CapS: 120, OnTimeout: "kill"}}},
		{"lifecycle pause auto", doc(`,"lifecycle":{"auto_resume":true,"on_timeout":"pause","cap_s":28800,"timeout_s":28800}`),
			&Payload{V: 1, TokenSHA256: digest, Lifecycle: &Lifecycle{TimeoutS: 28800, CapS: 28800, OnTimeout: "pause", AutoResume: true}}},
		{"network allow and deny", doc(`,"network":{"allow_out":["10.0.0.0/8","*.example.com"],"deny_out":["0.0.0.0/0"],"enforce":true}`),
			&Payload{V: 1, TokenSHA256: digest, Network: &Network{Enforce: true, AllowOut: []string{"10.0.0.0/8", "*.example.com"}, DenyOut: []string{"0.0.0.0/0"}}}},
		{"network unknown keys ignored", doc(`,"network":{"allow":["a",{"b":[1,2.5,null]}],"enforce":true,"x":{"y":{}},"z":null}`),
			&Payload{V: 1, TokenSHA256: digest, Network: &Network{Enforce: true}}},
		{"persist unknown keys ignored", doc(`,"persist":{"region":"x","bucket":"a.b-c","ttl":1.5,"key_prefix":"p/é"}`),
			&Payload{V: 1, TokenSHA256: digest, Persist: &Persist{Bucket: "a.b-c", KeyPrefix: "p/é"}}},
		{"persist bucket 63", doc(`,"persist":{"bucket":"` + strings.Repeat("b", 63) + `"}`),
			&Payload{V: 1, TokenSHA256: digest, Persist: &Persist{Bucket: strings.Repeat("b", 63)}}},
		{"key_prefix 900", doc(`,"persist":{"bucket":"abc","key_prefix":"` + strings.Repeat("k", 900) + `"}`),
			&Payload{V: 1, TokenSHA256: digest, Persist: &Persist{Bucket: "abc", KeyPrefix: strings.Repeat("k", 900)}}},
		{"surrogate pair escape", doc(`,"metadata":{"k":"\uD83D\uDE00"}`), &Payload{V: 1, TokenSHA256: digest, Metadata: map[string]string{"k": "😀"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.in)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Decode = %+v, want %+v", got, tt.want)
			}
			enc, err := Encode(got)
			if err != nil {
				t.Fatalf("Encode(decoded): %v", err)
			}
			again, err := Decode(enc)
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip: %+v, %v", again, err)
			}
		})
	}
}

func TestDecodeReject(t *testing.T) {
	many := func(n int, key func(i int) string) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%s":""`, key(i))
		}
		return b.String()
	}
	lc := func(members string) string { return doc(`,"lifecycle":{` + members + `}`) }
	tests := []struct {
		name  string
		in    string
		field string // expected Error.Field
	}{
		// Structure.
		{"empty", "", ""},
		{"whitespace", "  ", ""},
		{"array", "[]", ""},
		{"string", `"x"`, ""},
		{"null", "null", ""},
		{"number", "1", ""},
		{"truncated", doc("")[:20], ""},
		{"trailing object", doc("") + "{}", ""},
		{"trailing garbage", doc("") + "x", ""},
		{"trailing brace", doc("") + "}", ""},
		{"trailing comma", doc(","), ""},
		{"comment", doc("") + "//", ""},
		{"single quotes", `{'v':1}`, ""},
		{"BOM", "\ufeff" + doc(""), ""},
		{"invalid UTF-8", doc(`,"user":"` + "\xff" + `"`), ""},
		{"invalid UTF-8 outside string", doc("") + "\xc3", ""},
		{"lone high surrogate", doc(`,"metadata":{"k":"\ud83d"}`), ""},
		{"lone high surrogate then char", doc(`,"metadata":{"k":"\ud83dx"}`), ""},
		{"high surrogate then non-surrogate", doc(`,"metadata":{"k":"\ud83d\u0041"}`), ""},
		{"lone low surrogate", doc(`,"metadata":{"k":"\ude00"}`), ""},
		{"swapped surrogates", doc(`,"metadata":{"k":"\ude00\ud83d"}`), ""},
		{"raw control char", doc(`,"user":"a` + "\n" + `"`), ""},
		{"NaN", `{"v":NaN,"token_sha256":"` + digest + `"}`, ""},

		// Keys.
		{"duplicate v", `{"v":1,"v":1,"token_sha256":"` + digest + `"}`, ""},
		{"duplicate token", doc(`,"token_sha256":"` + digest + `"`), ""},
		{"duplicate via escape", `{"v":1,"\u0076":1,"token_sha256":"` + digest + `"}`, ""},
		{"duplicate envs key", doc(`,"envs":{"A":"1","A":"2"}`), "envs"},
		{"duplicate metadata key", doc(`,"metadata":{"k":"1","k":"1"}`), "metadata"},
		{"duplicate lifecycle key", lc(`"timeout_s":1,"timeout_s":1,"cap_s":120,"on_timeout":"kill","auto_resume":false`), "lifecycle"},
		{"duplicate network key", doc(`,"network":{"enforce":true,"enforce":true}`), "network"},
		{"network allow_out not a list", doc(`,"network":{"allow_out":"10.0.0.0/8","enforce":true}`), "network.allow_out"},
		{"network allow_out entry not a string", doc(`,"network":{"allow_out":[1],"enforce":true}`), "network.allow_out"},
		{"network entry with a space", doc(`,"network":{"deny_out":["10.0.0.0/8 "],"enforce":true}`), "network.deny_out"},
		{"network entry empty", doc(`,"network":{"allow_out":[""],"enforce":true}`), "network.allow_out"},
		{"duplicate persist key", doc(`,"persist":{"bucket":"abc","bucket":"abc"}`), "persist"},
		{"unknown top-level key", doc(`,"extra":1`), ""},
		{"unknown top-level key case", doc(`,"Envs":{}`), ""},
		{"unknown limits key", doc(`,"limits":{"cpu_seconds":1,"mem":1}`), "limits"},
		{"unknown lifecycle key", lc(`"timeout_s":1,"cap_s":120,"on_timeout":"kill","auto_resume":false,"x":1`), "lifecycle"},

		// Required members and types.
		{"missing v", `{"token_sha256":"` + digest + `"}`, "v"},
		{"missing token", `{"v":1}`, "token_sha256"},
		{"v 2", `{"v":2,"token_sha256":"` + digest + `"}`, "v"},
		{"v 0", `{"v":0,"token_sha256":"` + digest + `"}`, "v"},
		{"v string", `{"v":"1","token_sha256":"` + digest + `"}`, "v"},
		{"v float", `{"v":1.0,"token_sha256":"` + digest + `"}`, "v"},
		{"v exponent", `{"v":1e0,"token_sha256":"` + digest + `"}`, "v"},
		{"v null", `{"v":null,"token_sha256":"` + digest + `"}`, "v"},
		{"v huge", `{"v":99999999999999999999999,"token_sha256":"` + digest + `"}`, "v"},
		{"v bool", `{"v":true,"token_sha256":"` + digest + `"}`, "v"},
		{"token uppercase", `{"v":1,"token_sha256":"` + strings.ToUpper(digest) + `"}`, "token_sha256"},
		{"token short", `{"v":1,"token_sha256":"` + digest[:63] + `"}`, "token_sha256"},
		{"token empty", `{"v":1,"token_sha256":""}`, "token_sha256"},
		{"token number", `{"v":1,"token_sha256":1}`, "token_sha256"},
		{"envs null", doc(`,"envs":null`), "envs"},
		{"envs array", doc(`,"envs":[]`), "envs"},
		{"envs value number", doc(`,"envs":{"A":1}`), "envs"},
		{"envs value null", doc(`,"envs":{"A":null}`), "envs"},
		{"user null", doc(`,"user":null`), "user"},
		{"workdir number", doc(`,"workdir":1`), "workdir"},
		{"metadata value object", doc(`,"metadata":{"k":{}}`), "metadata"},
		{"limits not object", doc(`,"limits":1`), "limits"},
		{"limits empty", doc(`,"limits":{}`), "limits.cpu_seconds"},
		{"limits string", doc(`,"limits":{"cpu_seconds":"1"}`), "limits.cpu_seconds"},
		{"lifecycle null", doc(`,"lifecycle":null`), "lifecycle"},
		{"lifecycle empty", lc(``), "lifecycle.timeout_s"},
		{"lifecycle missing timeout_s", lc(`"cap_s":120,"on_timeout":"kill","auto_resume":false`), "lifecycle.timeout_s"},
		{"lifecycle missing cap_s", lc(`"timeout_s":1,"on_timeout":"kill","auto_resume":false`), "lifecycle.cap_s"},
		{"lifecycle missing on_timeout", lc(`"timeout_s":1,"cap_s":120,"auto_resume":false`), "lifecycle.on_timeout"},
		{"lifecycle missing auto_resume", lc(`"timeout_s":1,"cap_s":120,"on_timeout":"kill"`), "lifecycle.auto_resume"},
		{"lifecycle auto_resume string", lc(`"timeout_s":1,"cap_s":120,"on_timeout":"kill","auto_resume":"false"`), "lifecycle.auto_resume"},
		{"lifecycle auto_resume 0", lc(`"timeout_s":1,"cap_s":120,"on_timeout":"kill","auto_resume":0`), "lifecycle.auto_resume"},
		{"lifecycle timeout float", lc(`"timeout_s":1.5,"cap_s":120,"on_timeout":"kill","auto_resume":false`), "lifecycle.timeout_s"},
		{"lifecycle on_timeout bool", lc(`"timeout_s":1,"cap_s":120,"on_timeout":true,"auto_resume":false`), "lifecycle.on_timeout"},
		{"network empty", doc(`,"network":{}`), "network.enforce"},
		{"network enforce string", doc(`,"network":{"enforce":"true"}`), "network.enforce"},
		{"network array", doc(`,"network":[]`), "network"},
		{"persist missing bucket", doc(`,"persist":{"key_prefix":"x"}`), "persist.bucket"},
		{"persist bucket number", doc(`,"persist":{"bucket":123}`), "persist.bucket"},
		{"persist key_prefix null", doc(`,"persist":{"bucket":"abc","key_prefix":null}`), "persist.key_prefix"},

		// envs rules.
		{"envs too many", doc(`,"envs":{` + many(257, func(i int) string { return fmt.Sprintf("K%d", i) }) + `}`), "envs"},
		{"envs empty key", doc(`,"envs":{"":"x"}`), "envs"},
		{"envs key digit first", doc(`,"envs":{"1A":"x"}`), "envs"},
		{"envs key dash", doc(`,"envs":{"A-B":"x"}`), "envs"},
		{"envs key equals", doc(`,"envs":{"A=B":"x"}`), "envs"},
		{"envs key space", doc(`,"envs":{"A B":"x"}`), "envs"},
		{"envs key non-ASCII", doc(`,"envs":{"É":"x"}`), "envs"},
		{"envs key NUL", doc(`,"envs":{"A\u0000":"x"}`), "envs"},
		{"envs key too long", doc(`,"envs":{"` + strings.Repeat("K", 257) + `":"x"}`), "envs"},
		{"envs value NUL", doc(`,"envs":{"A":"a\u0000b"}`), "envs"},

		// user rules.
		{"user uppercase", doc(`,"user":"Alice"`), "user"},
		{"user digit first", doc(`,"user":"1a"`), "user"},
		{"user dash first", doc(`,"user":"-a"`), "user"},
		{"user 33 chars", doc(`,"user":"` + strings.Repeat("u", 33) + `"`), "user"},
		{"user dot", doc(`,"user":"a.b"`), "user"},
		{"user space", doc(`,"user":"a b"`), "user"},
		{"user dollar", doc(`,"user":"a$"`), "user"},

		// workdir rules.
		{"workdir relative", doc(`,"workdir":"home/user"`), "workdir"},
		{"workdir dot", doc(`,"workdir":"."`), "workdir"},
		{"workdir trailing slash", doc(`,"workdir":"/home/"`), "workdir"},
		{"workdir double slash", doc(`,"workdir":"//home"`), "workdir"},
		{"workdir dotdot", doc(`,"workdir":"/home/../etc"`), "workdir"},
		{"workdir dot component", doc(`,"workdir":"/home/./x"`), "workdir"},
		{"workdir NUL", doc(`,"workdir":"/home\u0000"`), "workdir"},

		// metadata rules.
		{"metadata too many", doc(`,"metadata":{` + many(65, func(i int) string { return fmt.Sprint(i) }) + `}`), "metadata"},
		{"metadata empty key", doc(`,"metadata":{"":"x"}`), "metadata"},
		{"metadata key too long", doc(`,"metadata":{"` + strings.Repeat("k", 129) + `":"x"}`), "metadata"},
		{"metadata key control", doc(`,"metadata":{"a\tb":"x"}`), "metadata"},
		{"metadata key DEL", doc(`,"metadata":{"a\u007f":"x"}`), "metadata"},
		{"metadata key non-ASCII", doc(`,"metadata":{"é":"x"}`), "metadata"},
		{"metadata key NUL", doc(`,"metadata":{"\u0000":"x"}`), "metadata"},
		{"metadata value too long", doc(`,"metadata":{"k":"` + strings.Repeat("v", 1025) + `"}`), "metadata"},
		{"metadata value NUL", doc(`,"metadata":{"k":"\u0000"}`), "metadata"},

		// limits rules.
		{"cpu_seconds 0", doc(`,"limits":{"cpu_seconds":0}`), "limits.cpu_seconds"},
		{"cpu_seconds negative", doc(`,"limits":{"cpu_seconds":-1}`), "limits.cpu_seconds"},
		{"cpu_seconds too big", doc(`,"limits":{"cpu_seconds":28801}`), "limits.cpu_seconds"},

		// lifecycle rules.
		{"timeout_s 0", lc(`"timeout_s":0,"cap_s":120,"on_timeout":"kill","auto_resume":false`), "lifecycle.timeout_s"},
		{"timeout_s too big", lc(`"timeout_s":28801,"cap_s":28800,"on_timeout":"kill","auto_resume":false`), "lifecycle.timeout_s"},
		{"cap_s 119", lc(`"timeout_s":1,"cap_s":119,"on_timeout":"kill","auto_resume":false`), "lifecycle.cap_s"},
		{"cap_s too big", lc(`"timeout_s":1,"cap_s":28801,"on_timeout":"kill","auto_resume":false`), "lifecycle.cap_s"},
		{"timeout_s above cap_s", lc(`"timeout_s":121,"cap_s":120,"on_timeout":"kill","auto_resume":false`), "lifecycle.timeout_s"},
		{"on_timeout bad", lc(`"timeout_s":1,"cap_s":120,"on_timeout":"stop","auto_resume":false`), "lifecycle.on_timeout"},
		{"on_timeout empty", lc(`"timeout_s":1,"cap_s":120,"on_timeout":"","auto_resume":false`), "lifecycle.on_timeout"},
		{"on_timeout case", lc(`"timeout_s":1,"cap_s":120,"on_timeout":"Kill","auto_resume":false`), "lifecycle.on_timeout"},
		{"auto_resume with kill", lc(`"timeout_s":1,"cap_s":120,"on_timeout":"kill","auto_resume":true`), "lifecycle.auto_resume"},

		// persist rules.
		{"bucket too short", doc(`,"persist":{"bucket":"ab"}`), "persist.bucket"},
		{"bucket empty", doc(`,"persist":{"bucket":""}`), "persist.bucket"},
		{"bucket too long", doc(`,"persist":{"bucket":"` + strings.Repeat("b", 64) + `"}`), "persist.bucket"},
		{"bucket uppercase", doc(`,"persist":{"bucket":"Abc"}`), "persist.bucket"},
		{"bucket underscore", doc(`,"persist":{"bucket":"a_c"}`), "persist.bucket"},
		{"bucket slash", doc(`,"persist":{"bucket":"a/c"}`), "persist.bucket"},
		{"key_prefix too long", doc(`,"persist":{"bucket":"abc","key_prefix":"` + strings.Repeat("k", 901) + `"}`), "persist.key_prefix"},
		{"key_prefix NUL", doc(`,"persist":{"bucket":"abc","key_prefix":"a\u0000"}`), "persist.key_prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decode(tt.in)
			if err == nil {
				t.Fatalf("Decode accepted %q", tt.in)
			}
			if p != nil {
				t.Fatal("Decode returned a payload with an error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			if e.Field != tt.field {
				t.Fatalf("Field = %q, want %q (error: %v)", e.Field, tt.field, err)
			}
		})
	}
}

func TestErrorsDoNotQuoteContent(t *testing.T) {
	const secret = "SeCrEt"
	inputs := []string{
		doc(`,"envs":{"` + secret + `-":"x"}`),
		doc(`,"envs":{"A":"` + secret + `\u0000"}`),
		doc(`,"metadata":{"` + secret + "\\t" + `":"x"}`),
		doc(`,"metadata":{"k":"` + secret + strings.Repeat("x", 1024) + `"}`),
		doc(`,"` + secret + `":1`),
		doc(`,"user":"` + secret + `"`),
		doc(`,"workdir":"` + secret + `"`),
		doc(`,"persist":{"bucket":"` + secret + `"}`),
		doc(`,"lifecycle":{"timeout_s":1,"cap_s":120,"on_timeout":"` + secret + `","auto_resume":false}`),
		`{"v":1,"token_sha256":"` + secret + `"}`,
		`{"v":1,"token_sha256":"` + digest + `"` + secret + `}`,
		`{"v":1,"token_sha256":"` + digest + `",` + secret + `}`,
		secret,
		`{"v":1,"token_sha256":"` + digest + `"}` + secret,
		doc(`,"envs":{"A":"` + secret + `\x"}`),
	}
	for _, in := range inputs {
		_, err := Decode(in)
		if err == nil {
			t.Fatalf("Decode accepted %q", in)
		}
		if strings.Contains(strings.ToLower(err.Error()), strings.ToLower(secret)) || strings.Contains(err.Error(), "'") {
			t.Errorf("error quotes payload content: %v", err)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	_, err := Decode(doc(`,"lifecycle":{"timeout_s":0,"cap_s":120,"on_timeout":"kill","auto_resume":false}`))
	if got, want := fmt.Sprint(err), "runpayload: lifecycle.timeout_s: out of range"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	_, err = Decode(doc(`,"envs":{"1":"x"}`))
	if got, want := fmt.Sprint(err), "runpayload: envs: invalid key"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	_, err = Decode("[]")
	if got, want := fmt.Sprint(err), "runpayload: not a JSON object"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("rayd: %w", err)
	var e *Error
	if !errors.As(wrapped, &e) || e.Reason != "not a JSON object" {
		t.Errorf("errors.As through wrapping failed")
	}
}

func TestEncodeValidates(t *testing.T) {
	bad := []struct {
		name  string
		p     *Payload
		field string
	}{
		{"nil", nil, ""},
		{"zero", &Payload{}, "v"},
		{"no token", &Payload{V: 1}, "token_sha256"},
		{"bad env key", &Payload{V: 1, TokenSHA256: digest, Envs: map[string]string{"A B": ""}}, "envs"},
		{"invalid UTF-8 env value", &Payload{V: 1, TokenSHA256: digest, Envs: map[string]string{"A": "\xff"}}, "envs"},
		{"invalid UTF-8 metadata value", &Payload{V: 1, TokenSHA256: digest, Metadata: map[string]string{"k": "\xc3"}}, "metadata"},
		{"invalid UTF-8 workdir", &Payload{V: 1, TokenSHA256: digest, Workdir: "/\xff"}, "workdir"},
		{"invalid UTF-8 key_prefix", &Payload{V: 1, TokenSHA256: digest, Persist: &Persist{Bucket: "abc", KeyPrefix: "\xff"}}, "persist.key_prefix"},
		{"too many envs", &Payload{V: 1, TokenSHA256: digest, Envs: func() map[string]string {
			m := map[string]string{}
			for i := range 257 {
				m[fmt.Sprintf("K%d", i)] = ""
			}
			return m
		}()}, "envs"},
		{"limits zero", &Payload{V: 1, TokenSHA256: digest, Limits: &Limits{}}, "limits.cpu_seconds"},
		{"lifecycle zero", &Payload{V: 1, TokenSHA256: digest, Lifecycle: &Lifecycle{}}, "lifecycle.timeout_s"},
		{"persist zero", &Payload{V: 1, TokenSHA256: digest, Persist: &Persist{}}, "persist.bucket"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Encode(tt.p)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Encode error = %v, want *Error", err)
			}
			if e.Field != tt.field {
				t.Fatalf("Field = %q, want %q", e.Field, tt.field)
			}
			if s != "" {
				t.Fatal("Encode returned output with an error")
			}
			if err2 := tt.p.Validate(); fmt.Sprint(err2) != fmt.Sprint(err) {
				t.Fatalf("Validate = %v, Encode = %v", err2, err)
			}
		})
	}
}

func TestEffective(t *testing.T) {
	var nilP *Payload
	tests := []struct {
		p             *Payload
		user, workdir string
	}{
		{nilP, "user", "/home/user"},
		{minimal(), "user", "/home/user"},
		{&Payload{User: "bob", Workdir: "/srv"}, "bob", "/srv"},
	}
	for _, tt := range tests {
		if got := tt.p.EffectiveUser(); got != tt.user {
			t.Errorf("EffectiveUser = %q, want %q", got, tt.user)
		}
		if got := tt.p.EffectiveWorkdir(); got != tt.workdir {
			t.Errorf("EffectiveWorkdir = %q, want %q", got, tt.workdir)
		}
	}
}
