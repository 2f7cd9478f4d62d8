package rayito

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

func TestRoundSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[int]int{1: 512, 512: 512, 513: 1024, 1024: 1024, 1500: 2048, 2048: 2048, 3000: 4096, 4096: 4096, 4097: 8192, 8192: 8192} {
		if got, err := RoundSize(in); err != nil || got != want {
			t.Errorf("RoundSize(%d) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []int{0, -1, 8193, 1 << 30} {
		if _, err := RoundSize(in); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("RoundSize(%d): %v, want ErrInvalidArgument", in, err)
		}
	}
	for mib, want := range map[int]string{512: "512mb", 1024: "1gb", 2048: "2gb", 4096: "4gb", 8192: "8gb", 1000: ""} {
		if got := SizeSuffix(mib); got != want {
			t.Errorf("SizeSuffix(%d) = %q, want %q", mib, got, want)
		}
	}
}

func TestSizedTemplateName(t *testing.T) {
	t.Parallel()
	if got, err := SizedTemplateName("my_tpl", 3000); err != nil || got != "my_tpl-4gb" {
		t.Errorf("%q %v", got, err)
	}
	for _, tc := range []struct {
		tpl string
		mib int
	}{
		{"arn:aws:lambda:us-east-1:123456789012:microvm-image:tpl-2gb", 2048}, // an ARN has its size
		{strings.Repeat("a", 61), 2048},                                       // too long with -2gb
		{"bad name", 512},
		{"", 512},
		{"tpl", 9000},
	} {
		if _, err := SizedTemplateName(tc.tpl, tc.mib); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q %d: %v, want ErrInvalidArgument", tc.tpl, tc.mib, err)
		}
	}
}

// WithMemory on the aws backend runs the image of that size; a size that
// is not one rounds up with a warning; an ARN, a size above 8 GiB and the
// local backend are refused before any run.
func TestCreateWithMemory(t *testing.T) {
	w := newIndexWorld(t)
	ctx := t.Context()
	want := w.srv.AddImage("tpl-2gb")
	s, err := Create(ctx, w.opts(t, nil, WithMemory(1500))...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill(ctx)
	var ran []string
	for _, r := range w.srv.Requests() {
		if r.Op == microvms.OpRunMicrovm {
			var in microvmsapi.RunMicrovmInput
			if err := json.Unmarshal(r.Body, &in); err != nil {
				t.Fatal(err)
			}
			ran = append(ran, in.ImageIdentifier)
		}
	}
	if len(ran) != 1 || ran[0] != want {
		t.Errorf("ran %v, want the -2gb image %s", ran, want)
	}
	if l := w.log(); !strings.Contains(l, "rounded up") || !strings.Contains(l, "size_mib=2048") {
		t.Errorf("no rounding warning: %q", l)
	}
	// A size with no image of its own is not found (no silent fallback to
	// another size).
	if _, err := Create(ctx, w.opts(t, nil, WithMemory(8192))...); !errors.Is(err, ErrNotFound) {
		t.Errorf("8 GiB without a tpl-8gb image: %v, want ErrNotFound", err)
	}
	for name, opts := range map[string][]Option{
		"ARN template": w.opts(t, nil, WithTemplate(w.image), WithMemory(2048)),
		"above 8 GiB":  w.opts(t, nil, WithMemory(16384)),
		"negative":     w.opts(t, nil, WithMemory(-1)),
	} {
		if _, err := Create(ctx, opts...); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	// Locally, a size goes to the platform in the image's name (no
	// platform answers here).
	if _, err := Create(ctx, WithBackend(BackendLocal), WithEndpoint("http://127.0.0.1:1"), WithMemory(1024)); !errors.Is(err, ErrPlatformUnavailable) {
		t.Errorf("local: %v, want ErrPlatformUnavailable", err)
	}
	runs := 0
	for _, r := range w.srv.Requests() {
		if r.Op == microvms.OpRunMicrovm {
			runs++
		}
	}
	if runs != 1 {
		t.Errorf("%d runs, want only the first create's", runs)
	}
}
