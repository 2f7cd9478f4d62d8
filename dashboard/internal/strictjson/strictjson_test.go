package strictjson

import (
	"encoding/json"
	"errors"
	"testing"
)

type inner struct {
	Accent string `json:"accent"`
}

type body struct {
	Action  string   `json:"action"`
	IDs     []string `json:"ids"`
	Confirm bool     `json:"confirm"`
	Colors  *inner   `json:"colors"`
}

func TestDecode(t *testing.T) {
	var b body
	if err := Decode([]byte(`{"action":"kill","ids":["a"],"confirm":true,"colors":{"accent":"#fff"}}`), &b); err != nil || !b.Confirm || b.Colors.Accent != "#fff" {
		t.Fatalf("%+v %v", b, err)
	}
	for _, doc := range []string{
		`{"action":"kill","ids":["a"],"Confirm":true}`,
		`{"action":"kill","ids":["a"],"CONFIRM":true}`,
		`{"action":"kill","confirm":false,"confirm":true}`,
		`{"action":"kill","colors":{"Accent":"#fff"}}`,
		`{"action":"kill","colors":{"accent":"#fff","accent":"#000"}}`,
		`{"action":"kill","extra":1}`,
		`{"action":"kill"} {}`,
		`{"action":"kill"`,
		`[1]`,
	} {
		var b body
		if err := Decode([]byte(doc), &b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"action":"kill","ids":["a"],"confirm":true}`))
	f.Add([]byte(`{"Confirm":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b body
		if err := Decode(data, &b); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// Confirmed only by the exact key (map keys are case-sensitive).
		var m map[string]any
		if b.Confirm && (json.Unmarshal(data, &m) != nil || m["confirm"] != true) {
			t.Fatalf("confirmed without the exact key: %q", data)
		}
	})
}
