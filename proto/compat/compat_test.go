package compat

import (
	"errors"
	"strings"
	"testing"
)

func TestDefaultTableIsValid(t *testing.T) {
	t.Parallel()
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
	d := Default()
	d[0].RaydMax = "9.9"
	if Default()[0].RaydMax == "9.9" {
		t.Fatal("Default shares its rows")
	}
}

// A table with a few generations, to exercise every rule.
var sample = Table{
	{SDK: "0.1", RaydMin: "0.1", RaydMax: "0.2"},
	{SDK: "0.2", RaydMin: "0.2", RaydMax: "0.3"},
	{SDK: "0.3", RaydMin: "0.3", RaydMax: "0.3"},
	{SDK: "1.0", RaydMin: "1.0", RaydMax: "1.2"},
	{SDK: "1.1", RaydMin: "1.0", RaydMax: "1.3"},
}

func TestCheck(t *testing.T) {
	t.Parallel()
	type want int
	const (
		ok want = iota
		newer
		incompatible
		invalid
		unknownSDK
	)
	for _, tc := range []struct {
		sdk, rayd string
		want      want
	}{
		{"0.1.0", "0.1.0", ok},
		{"0.1.0", "0.1.7", ok},
		{"0.1.3", "0.1.0", ok},
		{"v0.1.0", "v0.1.0", ok},
		{"0.1.0", "0.1.0-dev", ok},
		{"0.1.0-dev", "0.1.0+build.5", ok},
		{"0.1.0", "0.1.0-rc.1+meta-x", ok},
		{"0.2.0", "0.2.0-dev", ok},           // a pre-release of 0.2 is 0.2
		{"0.1.0", "0.2.0", newer},            // in range, newer than the SDK
		{"0.1.0", "0.2.0-dev", newer},        // pre-release of a newer minor
		{"0.2.0", "0.1.9", incompatible},     // below RaydMin
		{"0.1.0", "0.3.0", incompatible},     // the table knows 0.3 and leaves it out
		{"0.3.0", "0.4.0", incompatible},     // unknown newer minor in major 0
		{"0.3.0", "0.4.0-dev", incompatible}, // its pre-release too
		{"0.1.0", "1.0.0", incompatible},     // known major 1, not in the row
		{"1.0.0", "1.1.0", newer},            // in range
		{"1.0.0", "1.0.5", ok},               //
		{"1.1.0", "1.0.0", ok},               // older, still in range
		{"1.0.0", "1.3.0", incompatible},     // the table knows 1.3, the row ends at 1.2
		{"1.1.0", "1.4.0", newer},            // unknown newer minor, same major (>= 1)
		{"1.1.0", "1.99.0-dev", newer},       //
		{"1.1.0", "2.0.0", incompatible},     // unknown new major
		{"1.0.0", "0.3.0", incompatible},     // older major
		{"0.9.0", "0.9.0", unknownSDK},       //
		{"2.0.0", "2.0.0", unknownSDK},       //
		{"0.1.0", "", invalid},               // old or foreign rayd
		{"0.1.0", "0.1", invalid},            //
		{"0.1.0", "0.1.0.0", invalid},        //
		{"0.1.0", "01.1.0", invalid},         // leading zero
		{"0.1.0", "0.1.0-", invalid},         // empty pre-release
		{"0.1.0", "0.1.0-01", invalid},       // numeric pre-release with a leading zero
		{"0.1.0", "0.1.0+", invalid},         //
		{"0.1.0", "0.1.0+a..b", invalid},     //
		{"0.1.0", "0.1.0-a_b", invalid},      //
		{"0.1.0", " 0.1.0", invalid},         //
		{"0.1.0", "vv0.1.0", invalid},        //
		{"0.1.0", "0.1.x", invalid},          //
		{"0.1.0", "1234567890.0.0", invalid}, // too many digits
		{"0.1.0", "0.1.0-" + strings.Repeat("a", 200), invalid},
		{"devel", "0.1.0", invalid},
	} {
		res, err := sample.Check(tc.sdk, tc.rayd)
		var got want
		var ie *IncompatibleError
		switch {
		case err == nil && res == Compatible:
			got = ok
		case err == nil && res == CompatibleNewer:
			got = newer
		case errors.As(err, &ie) && errors.Is(err, ErrIncompatible) && res == Incompatible:
			got = incompatible
			if ie.SDKVersion != tc.sdk || ie.RaydVersion != tc.rayd || ie.Reason == "" {
				t.Errorf("%q/%q: error fields %+v", tc.sdk, tc.rayd, ie)
			}
		case errors.Is(err, ErrInvalidVersion) && res == Incompatible:
			got = invalid
		case errors.Is(err, ErrUnknownSDK) && res == Incompatible:
			got = unknownSDK
		default:
			t.Errorf("Check(%q, %q) = %v, %v: unexpected", tc.sdk, tc.rayd, res, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Check(%q, %q) = %v, %v; want case %d", tc.sdk, tc.rayd, res, err, tc.want)
		}
	}
}

func TestCheckDefault(t *testing.T) {
	t.Parallel()
	if res, err := Check("0.1.0", "0.1.0-dev"); res != Compatible || err != nil {
		t.Fatalf("%v %v", res, err)
	}
	_, err := Check("0.1.0", "0.2.0")
	var ie *IncompatibleError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "0.2.0") || !strings.Contains(err.Error(), "major 0") {
		t.Fatalf("0.2 in major 0: %v", err)
	}
}

func TestInvalidTable(t *testing.T) {
	t.Parallel()
	for _, tab := range []Table{
		{{SDK: "0.1", RaydMin: "0.2", RaydMax: "0.1"}},
		{{SDK: "0.1", RaydMin: "0.1", RaydMax: ""}},
		{{SDK: "0.1.0", RaydMin: "0.1", RaydMax: "0.1"}},
		{{SDK: "0.1", RaydMin: "0.1", RaydMax: "0.1"}, {SDK: "0.1", RaydMin: "0.1", RaydMax: "0.2"}},
	} {
		if err := tab.Validate(); !errors.Is(err, ErrInvalidTable) {
			t.Errorf("Validate(%v) = %v", tab, err)
		}
		if res, err := tab.Check("0.1.0", "0.1.0"); res != Incompatible || !errors.Is(err, ErrInvalidTable) {
			t.Errorf("Check with %v = %v, %v", tab, res, err)
		}
	}
	if res, err := Table(nil).Check("0.1.0", "0.1.0"); res != Incompatible || !errors.Is(err, ErrUnknownSDK) {
		t.Errorf("empty table: %v %v", res, err)
	}
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	v, err := ParseVersion("v1.22.333-rc.1.x-y+exp.sha.5114f85")
	if err != nil {
		t.Fatal(err)
	}
	if v != (Version{Major: 1, Minor: 22, Patch: 333, Prerelease: "rc.1.x-y", Build: "exp.sha.5114f85"}) {
		t.Fatalf("%+v", v)
	}
	if v.String() != "1.22.333-rc.1.x-y+exp.sha.5114f85" {
		t.Fatal(v.String())
	}
	if _, err := ParseVersion("0.0.0+007"); err != nil { // leading zeros are fine in build metadata
		t.Fatal(err)
	}
	if _, err := ParseVersion("1.2.3\n"); !errors.Is(err, ErrInvalidVersion) || strings.Contains(err.Error(), "1.2.3") {
		t.Fatalf("error %v: want ErrInvalidVersion without the input", err)
	}
}

func TestResultString(t *testing.T) {
	t.Parallel()
	for r, want := range map[Result]string{Incompatible: "incompatible", Compatible: "compatible", CompatibleNewer: "compatible (newer rayd)", 7: "Result(7)"} {
		if r.String() != want {
			t.Errorf("%d: %q", int(r), r.String())
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"0.1.0", "0.2.0-dev", "1.4.0+x", "", "v0.1", "01.0.0", "0.1.0-a.01", "9.9.9-0-0+0"} {
		f.Add("0.1.0", s)
		f.Add(s, "0.1.0")
	}
	f.Fuzz(func(t *testing.T, sdk, rayd string) {
		for _, tab := range []Table{Default(), sample} {
			res, err := tab.Check(sdk, rayd)
			if (err == nil) != (res == Compatible || res == CompatibleNewer) {
				t.Fatalf("Check(%q, %q) = %v, %v", sdk, rayd, res, err)
			}
			if err != nil && res != Incompatible {
				t.Fatalf("error %v with result %v", err, res)
			}
			var ie *IncompatibleError
			if errors.As(err, &ie) && (ie.SDKVersion != sdk || ie.RaydVersion != rayd) {
				t.Fatalf("error fields %+v for %q, %q", ie, sdk, rayd)
			}
			if err != nil && len(err.Error()) > 4*MaxVersionLen+512 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
		}
		// Parsing is stable: the canonical form parses to the same value.
		if v, err := ParseVersion(rayd); err == nil {
			w, err := ParseVersion(v.String())
			if err != nil || w != v {
				t.Fatalf("%q → %q → %+v, %v", rayd, v.String(), w, err)
			}
		}
	})
}
