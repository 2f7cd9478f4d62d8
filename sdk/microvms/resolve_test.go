package microvms

import (
	"errors"
	"strings"
	"testing"
)

func TestIsImageARN(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"arn:aws:lambda:us-east-1:123456789012:microvm-image:py":      true,
		"arn:aws-cn:lambda:cn-north-1:123456789012:microvm-image:a_b": true,
		"arn:aws:lambda:us-east-1:123456789012:microvm-image:":        false,
		"arn:aws:lambda:us-east-1:123456789012:microvm-image:a/b":     false,
		"arn:aws:lambda:us-east-1:123456789012:function:py":           false,
		"arn:aws:s3:us-east-1:123456789012:microvm-image:py":          false,
		"arn:aws:lambda::123456789012:microvm-image:py":               false,
		"py": false, "": false,
	} {
		if IsImageARN(s) != want {
			t.Errorf("IsImageARN(%q) = %v", s, !want)
		}
	}
}

// A name is looked up with the name filter and must match exactly,
// across pages; an ARN is used as it is, without a call.
func TestResolveImageARN(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:lambda:us-east-1:123456789012:microvm-image:py"
	f := newFake(t, func(n int, r recorded) reply {
		if n == 0 {
			return reply{body: `{"items":[{"imageArn":"arn:aws:lambda:us-east-1:123456789012:microvm-image:py2","name":"py2","state":"CREATED"}],"nextToken":"t1"}`}
		}
		return reply{body: `{"items":[{"imageArn":"` + arn + `","name":"py","state":"CREATED"}]}`}
	})
	c, _ := newLocal(t, f)
	got, err := c.ResolveImageARN(t.Context(), "py")
	if err != nil || got != arn {
		t.Fatalf("ResolveImageARN(py) = %q, %v", got, err)
	}
	reqs := f.requests()
	if len(reqs) != 2 || reqs[0].Method != "GET" || reqs[0].Path != "/2025-09-09/microvm-images" ||
		reqs[0].RawQuery != "nameFilter=py" || !strings.Contains(reqs[1].RawQuery, "nextToken=t1") {
		t.Fatalf("requests %+v", reqs)
	}
	if got, err := c.ResolveImageARN(t.Context(), arn); err != nil || got != arn || len(f.requests()) != 2 {
		t.Fatalf("an ARN: %q %v (%d requests)", got, err, len(f.requests()))
	}
	var ae *APIError
	if _, err := c.ResolveImageARN(t.Context(), "nope"); !errors.As(err, &ae) || ae.Kind != KindNotFound {
		t.Fatalf("unknown name: %v", err)
	}
	before := len(f.requests())
	for _, bad := range []string{"", "a b", "x/y", strings.Repeat("a", 65), "arn:aws:lambda:us-east-1:1:function:x", "py\n"} {
		if _, err := c.ResolveImageARN(t.Context(), bad); !errors.As(err, &ae) || ae.Kind != KindInvalidArgument {
			t.Errorf("ResolveImageARN(%q) = %v, want invalid argument", bad, err)
		}
	}
	if len(f.requests()) != before {
		t.Error("a bad identifier was sent")
	}
}
