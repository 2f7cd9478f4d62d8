package template

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

// specOf is the spec of t with every copy source taken for a file.
func specOf(t *Template) *ptemplate.Spec { return t.spec(func(string) bool { return false }) }

func TestImmutable(t *testing.T) {
	t.Parallel()
	base := FromBaseImage("alpine")
	x := base.RunCmd("one")
	y := x.RunCmd("two")
	z := x.RunCmd("three")
	_ = x.SetEnvs(map[string]string{"A": "1"}).Workdir("/w").SetUser(UserUser).SetStartCmd("sleep 1", 0)
	envs := map[string]string{"K": "v"}
	e := base.SetEnvs(envs)
	envs["K"] = "changed"
	if n := len(specOf(base).Steps); n != 0 {
		t.Errorf("base has %d steps", n)
	}
	if got := specOf(x).Steps; len(got) != 1 || got[0].Run != "one" || specOf(x).Start != nil {
		t.Errorf("x = %+v", specOf(x))
	}
	if got := specOf(y).Steps; len(got) != 2 || got[1].Run != "two" {
		t.Errorf("y = %+v", got)
	}
	if got := specOf(z).Steps; len(got) != 2 || got[1].Run != "three" {
		t.Errorf("z = %+v (a sibling's step leaked in)", got)
	}
	if got := specOf(e).Steps[0].Env["K"]; got != "v" {
		t.Errorf("SetEnvs kept the caller's map: %q", got)
	}
	s := base.SetStartCmd("a", 1)
	s2 := s.SetStartCmd("b", 2)
	if specOf(s).Start.Cmd != "a" || specOf(s2).Start.Cmd != "b" || specOf(s2).Start.ReadyPort != 2 {
		t.Error("SetStartCmd changed its receiver or did not replace")
	}
	if u := base.SetEnvs(nil); u == base || len(specOf(u).Steps) != 0 {
		t.Error("SetEnvs(nil) must return an unchanged new template")
	}
}

func TestBuilderErrors(t *testing.T) {
	t.Parallel()
	secret := "s3cr3t-value"
	tmpl := FromBaseImage("bad base "+secret).
		Copy("../"+secret, "relative/"+secret).              // step 0: src, dst
		Copy("a", "/b", WithOwner("admin-"+secret)).         // step 1: owner
		RunCmd("").                                          // step 2
		PipInstall("-e", "git+https://x/"+secret).           // step 3
		SetEnvs(map[string]string{"1" + secret: "v"}).       // step 4
		SetEnvs(map[string]string{"OK": "line\n" + secret}). // step 5
		Workdir("rel/"+secret).                              // step 6
		SetUser("admin-"+secret).                            // step 7
		Copy("glob*", "/x").                                 // step 8
		Copy("a", "/x/$"+secret).                            // step 9
		SetStartCmd("", 70000)
	_, err := Compile(t.Context(), tmpl, t.TempDir())
	if !errors.Is(err, ErrInvalidTemplate) {
		t.Fatalf("err = %v; want ErrInvalidTemplate", err)
	}
	var first *Error
	if !errors.As(err, &first) || first.Field != "base" || first.Step != -1 {
		t.Fatalf("first error = %+v", first)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the error holds a value: %v", err)
	}
	var got []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var te *Error
		if !errors.As(e, &te) {
			t.Fatalf("%v is not an *Error", e)
		}
		got = append(got, strings.Join([]string{itoa(te.Step), te.Field}, ":"))
	}
	want := []string{"-1:base", "0:copy.src", "0:copy.dst", "1:copy.owner", "2:run", "3:pip_install", "4:env", "5:env", "6:workdir", "7:user", "8:copy.src", "9:copy.dst", "-1:start.cmd", "-1:start.ready_port"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%q\nwant\n%q", got, want)
	}
	if err := tmpl.Err(); err == nil || !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("Err() = %v", err)
	}
	var nilT *Template
	if _, err := Compile(t.Context(), nilT.RunCmd("x"), ""); !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("nil template: %v", err)
	}
	if _, err := Compile(t.Context(), nil, ""); !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("Compile(nil): %v", err)
	}
}

func itoa(i int) string {
	if i < 0 {
		return "-" + itoa(-i)
	}
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + itoa(i%10)
}

func TestPipInstall(t *testing.T) {
	t.Parallel()
	got := specOf(FromBaseImage("python").PipInstall("numpy", "pandas>=2,<3", "uvicorn[standard]==0.30.*", "pkg~=1.0", "x!=2")).Steps[0].Run
	want := "python3 -m pip install --no-cache-dir 'numpy' 'pandas>=2,<3' 'uvicorn[standard]==0.30.*' 'pkg~=1.0' 'x!=2'"
	if got != want {
		t.Errorf("run = %q\nwant  %q", got, want)
	}
	for _, bad := range []string{"", "-e", "--index-url=http://x", "a b", "a\tb", "a;rm -rf /", "a'b", `a"b`, "$(id)", "`id`", "a|b", "a&b", "a\\b", "a\nb", "a(b)", "a{b}", "a#b"} {
		if err := FromBaseImage("python").PipInstall("ok", bad).Err(); !errors.Is(err, ErrInvalidTemplate) {
			t.Errorf("PipInstall(%q): err = %v", bad, err)
		}
	}
	if err := FromBaseImage("python").PipInstall().Err(); !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("PipInstall(): %v", err)
	}
}

func TestCopyPaths(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src, dst   string
		wantSrc    string
		wantDst    string
		wantInto   bool
		shouldFail bool
	}{
		{"app", "/srv/app", "app", "/srv/app", false, false},
		{"./app/", "/srv/", "app", "/srv", true, false},
		{".", "/", ".", "/", true, false},
		{"a/./b", "/x//y", "a/b", "/x/y", false, false},
		{"/abs", "/x", "", "", false, true},
		{"..", "/x", "", "", false, true},
		{"a/../../b", "/x", "", "", false, true},
		{"a", "x", "", "", false, true},
		{"a", "", "", "", false, true},
		{"", "/x", "", "", false, true},
		{"a\\b", "/x", "", "", false, true},
		{"a'b", "/x", "", "", false, true},
		{"a", "/x\ny", "", "", false, true},
		{"a", "/x\"y", "", "", false, true},
	} {
		tmpl := FromBaseImage("alpine").Copy(tc.src, tc.dst)
		if err := tmpl.Err(); (err != nil) != tc.shouldFail {
			t.Errorf("Copy(%q, %q): err = %v", tc.src, tc.dst, err)
			continue
		}
		if tc.shouldFail {
			continue
		}
		c := tmpl.steps[0].copy
		if c.src != tc.wantSrc || c.dst != tc.wantDst || c.intoDir != tc.wantInto {
			t.Errorf("Copy(%q, %q) = %+v", tc.src, tc.dst, c)
		}
	}
}
