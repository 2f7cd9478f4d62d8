package cfnstack

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/smithy-go"

	"github.com/rayito-dev/rayito/cli/internal/awsenv"
)

// FuzzOneLine: what CloudFormation says of a failed resource (free text
// from the service and the resource's provider) is printed as one line of
// printable characters, at most n bytes and "...", cut on a rune
// boundary.
func FuzzOneLine(f *testing.F) {
	for _, s := range []string{"", "Resource creation cancelled", "a\nb\r\x1b[31mred\x7f", "é\u0085é", strings.Repeat("ü", 400)} {
		f.Add(s, 300)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1000 {
			return
		}
		got := OneLine(s, n)
		body, cut := strings.CutSuffix(got, "...")
		if len(body) > n || !cut && len(got) > n {
			t.Fatalf("OneLine(%q, %d) = %q: too long", s, n, got)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
				t.Fatalf("OneLine(%q) = %q: control character %U", s, got, r)
			}
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("OneLine(%q) = %q: cut inside a rune", s, got)
		}
	})
}

// FuzzSanitize: an error from CloudFormation is reduced to the operation,
// a plain error code and the status; its message (which can quote the
// request: parameters, the template) never reaches the text, whatever
// the code and message are.
func FuzzSanitize(f *testing.F) {
	f.Add("ValidationError", "Stack with id rayito-events does not exist")
	f.Add("ValidationError", "No updates are to be performed.")
	f.Add("Throttling", "Rate exceeded")
	f.Add("bad code\nwith /rayito/secret", "/rayito/secret")
	f.Fuzz(func(t *testing.T, code, msg string) {
		err := Sanitize("UpdateStack", &smithy.GenericAPIError{Code: code, Message: msg})
		var ae *APIError
		if !errors.As(err, &ae) {
			t.Fatalf("%T", err)
		}
		text := err.Error()
		if want := "CloudFormation UpdateStack: "; !strings.HasPrefix(text, want) {
			t.Fatalf("%q", text)
		}
		rest := strings.TrimPrefix(text, "CloudFormation UpdateStack: ")
		if awsenv.Identifier(code) {
			if rest != code {
				t.Fatalf("code %q: %q", code, text)
			}
		} else if rest != "cannot reach CloudFormation (no response)" {
			t.Fatalf("code %q: %q", code, text)
		}
		if errors.Is(err, ErrNoUpdates) && (code != "ValidationError" || !strings.Contains(strings.ToLower(msg), "no updates are to be performed")) {
			t.Fatalf("no-updates from %q %q", code, msg)
		}
	})
}
