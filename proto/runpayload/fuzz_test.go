package runpayload

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func FuzzDecode(f *testing.F) {
	seeds := []string{
		doc(""),
		`{"envs":{"A":"x","B":"\u00e9<>&\n"},"lifecycle":{"auto_resume":true,"cap_s":3600,"on_timeout":"pause","timeout_s":300},"limits":{"cpu_seconds":3600},"metadata":{"k 1":"\u007f\t/","team":"a\"b\\c","z":"\ud83d\ude00"},"network":{"enforce":true},"persist":{"bucket":"my-bucket.1","key_prefix":"sandboxes/x/"},"token_sha256":"` + digest + `","user":"alice","v":1,"workdir":"/srv/app"}`,
		doc(`,"envs":{}`),
		doc(`,"user":""`),
		doc(`,"network":{"allow":["a",{"b":[1,2.5,null]}],"enforce":false}`),
		doc(`,"persist":{"bucket":"abc","x":{}}`),
		doc(`,"metadata":{"k":"\ud83d"}`),
		doc(`,"metadata":{"k":"é😀"}`),
		doc(`,"v":1`),
		doc(`,"extra":1`),
		doc(`,"lifecycle":{"timeout_s":1,"cap_s":120,"on_timeout":"kill","auto_resume":true}`),
		doc(`,"limits":{"cpu_seconds":1.5}`),
		doc(`,"envs":{"A":"` + strings.Repeat("é", 1000) + `"}`),
		doc("") + " {}",
		"[]", "", "null", `{"v":1}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Decode(s)
		if err != nil {
			if p != nil {
				t.Fatal("Decode returned a payload with an error")
			}
			var e *Error
			if !errors.As(err, &e) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		enc, err := Encode(p)
		if err != nil {
			t.Fatalf("Encode(Decode(s)) failed: %v", err)
		}
		if len(enc) > MaxLen {
			t.Fatalf("encoding is %d bytes", len(enc))
		}
		for i := 0; i < len(enc); i++ {
			if enc[i] < 0x20 || enc[i] > 0x7e {
				t.Fatalf("encoding contains byte %#x", enc[i])
			}
		}
		p2, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(p)) failed: %v", err)
		}
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("round trip mismatch:\n%+v\n%+v", p, p2)
		}
		enc2, err := Encode(p2)
		if err != nil || enc2 != enc {
			t.Fatalf("encoding not stable: %v\n%s\n%s", err, enc, enc2)
		}
	})
}
