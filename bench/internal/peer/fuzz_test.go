package peer

import (
	"bytes"
	"testing"
)

// FuzzReadEnvelope feeds arbitrary bytes to the envelope reader and the
// event decoder (what a peer sends): no panic, and whatever is read back
// re-frames to the same bytes.
func FuzzReadEnvelope(f *testing.F) {
	f.Add(appendEnvelope(nil, 0, []byte(`{"event":{"start":{"pid":7}}}`)))
	f.Add(appendEnvelope(nil, flagEndStream, []byte(`{"error":{"code":"internal","message":"x"}}`)))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		flags, msg, err := readEnvelope(bytes.NewReader(b), nil)
		if err != nil {
			return
		}
		if got := appendEnvelope(nil, flags, msg); !bytes.Equal(got, b[:len(got)]) {
			t.Fatalf("re-framed %x, read from %x", got, b)
		}
		_, _ = decodeEvent(msg)
	})
}
