package template

import (
	"errors"
	"strings"
	"testing"
)

func TestRoundTripAndConfig(t *testing.T) {
	s := &Spec{V: 1, Base: "local", Steps: []Step{
		{Run: "echo hi > /opt/x"},
		{Copy: &Copy{Src: "app", Dst: "/home/user/app", Owner: "user"}},
		{Env: map[string]string{"A": "1", "B": "two"}},
		{Workdir: "/home/user/app"},
		{User: "root"},
		{Env: map[string]string{"A": "3"}},
	}, Start: &Start{Cmd: "python3 -m http.server 8000", ReadyPort: 8000}}
	b, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	c := got.Config()
	if c.Envs["A"] != "3" || c.Envs["B"] != "two" || c.Workdir != "/home/user/app" || c.User != "root" {
		t.Fatalf("config %+v", c)
	}
	if d := (&Spec{V: 1, Base: "local"}).Config(); d.Workdir != "/home/user" || d.User != "user" || len(d.Envs) != 0 {
		t.Fatalf("default config %+v", d)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"version":        `{"v":2,"base":"local","steps":[]}`,
		"no base":        `{"v":1,"base":"","steps":[]}`,
		"unknown field":  `{"v":1,"base":"local","steps":[],"x":1}`,
		"trailing":       `{"v":1,"base":"local","steps":[]} {}`,
		"two in a step":  `{"v":1,"base":"local","steps":[{"run":"a","user":"root"}]}`,
		"empty step":     `{"v":1,"base":"local","steps":[{}]}`,
		"src dotdot":     `{"v":1,"base":"local","steps":[{"copy":{"src":"../x","dst":"/a"}}]}`,
		"src abs":        `{"v":1,"base":"local","steps":[{"copy":{"src":"/etc/passwd","dst":"/a"}}]}`,
		"src unclean":    `{"v":1,"base":"local","steps":[{"copy":{"src":"a/./b","dst":"/a"}}]}`,
		"dst relative":   `{"v":1,"base":"local","steps":[{"copy":{"src":"a","dst":"a"}}]}`,
		"dst unclean":    `{"v":1,"base":"local","steps":[{"copy":{"src":"a","dst":"/a/../etc"}}]}`,
		"owner":          `{"v":1,"base":"local","steps":[{"copy":{"src":"a","dst":"/a","owner":"nobody"}}]}`,
		"user":           `{"v":1,"base":"local","steps":[{"user":"admin"}]}`,
		"env key":        `{"v":1,"base":"local","steps":[{"env":{"A=B":"1"}}]}`,
		"env empty":      `{"v":1,"base":"local","steps":[{"env":{}}]}`,
		"env nul":        `{"v":1,"base":"local","steps":[{"env":{"A":"\u0000"}}]}`,
		"run nul":        `{"v":1,"base":"local","steps":[{"run":"a\u0000b"}]}`,
		"workdir":        `{"v":1,"base":"local","steps":[{"workdir":"home"}]}`,
		"start empty":    `{"v":1,"base":"local","steps":[],"start":{"cmd":""}}`,
		"start port":     `{"v":1,"base":"local","steps":[],"start":{"cmd":"x","ready_port":70000}}`,
		"base injection": `{"v":1,"base":"local\nRUN x","steps":[]}`,
		"not an object":  `[]`,
	} {
		if _, err := Decode([]byte(doc)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Decode([]byte(strings.Repeat(" ", MaxSpecLen+1))); !errors.Is(err, ErrInvalid) {
		t.Error("oversized spec accepted")
	}
}

func TestErrorsNameNoValue(t *testing.T) {
	_, err := Decode([]byte(`{"v":1,"base":"local","steps":[{"env":{"SECRET=x":"hunter2"}}]}`))
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("error %v", err)
	}
	if !strings.Contains(err.Error(), "steps[0]") {
		t.Fatalf("error does not name the step: %v", err)
	}
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"web", "my-app_2", "a"} {
		if !ValidName(n) {
			t.Errorf("%q refused", n)
		}
	}
	for _, n := range []string{"", "Web", "-a", "a/b", "a.b", strings.Repeat("a", MaxNameLen+1)} {
		if ValidName(n) {
			t.Errorf("%q accepted", n)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"v":1,"base":"local","steps":[{"run":"x"},{"copy":{"src":"a","dst":"/b"}}],"start":{"cmd":"y","ready_port":1}}`))
	f.Add([]byte(`{"v":1,"base":"local","steps":[{"env":{"A":"1"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := Encode(s)
		if err != nil {
			t.Fatalf("a decoded spec does not encode: %v", err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		_ = s.Config()
	})
}

func TestRuntime(t *testing.T) {
	s := &Spec{V: 1, Base: "local", Steps: []Step{{Env: map[string]string{"A": "1"}}, {Workdir: "/opt/app"}}, Start: &Start{Cmd: "x", ReadyPort: 80}}
	b, err := EncodeRuntime(RuntimeOf("web", s))
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeRuntime(b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Envs["A"] != "1" || r.Workdir != "/opt/app" || r.User != "user" || r.Start.ReadyPort != 80 || r.Name != "web" {
		t.Fatalf("%+v", r)
	}
	for _, doc := range []string{`{"v":1,"name":"Bad","workdir":"/a","user":"user"}`, `{"v":1,"name":"a","workdir":"a","user":"user"}`, `{"v":1,"name":"a","workdir":"/a","user":"x"}`, `{"v":1,"name":"a","workdir":"/a","user":"user","x":1}`} {
		if _, err := DecodeRuntime([]byte(doc)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

func FuzzDecodeRuntime(f *testing.F) {
	f.Add([]byte(`{"v":1,"name":"web","envs":{"A":"1"},"workdir":"/a","user":"user","start":{"cmd":"x","ready_port":8000}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRuntime(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if _, err := EncodeRuntime(r); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
	})
}
