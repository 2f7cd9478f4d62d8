package secretenv

import (
	"errors"
	"strings"
	"testing"
)

func TestReservedTable(t *testing.T) {
	for _, n := range []string{"PATH", "HOME", "PYTHONPATH", "NODE_OPTIONS", "AWS_ACCESS_KEY_ID", "AWS_REGION", "aws_profile",
		"LD_PRELOAD", "LD_LIBRARY_PATH", "RAYITO_AGENT_SERVICE_TOKEN", "RAYITO_SECRET_ENV", "PORT", "Path", "OTEL_EXPORTER_OTLP_HEADERS",
		"BEDROCK_AGENTCORE_RUNTIME", "HTTPS_PROXY", "https_proxy", "NODE_EXTRA_CA_CERTS", "BASH_ENV", "PYTHONSTARTUP"} {
		if !Reserved(n) {
			t.Errorf("%s is not reserved", n)
		}
		var e *Error
		if err := CheckName(n); !errors.As(err, &e) || e.Code != CodeReserved || !errors.Is(err, ErrSecretEnv) {
			t.Errorf("CheckName(%s) = %v", n, err)
		}
	}
	for _, n := range []string{"GITHUB_TOKEN", "DB_PASSWORD", "OPENAI_API_KEY", "_X", "a1"} {
		if err := CheckName(n); err != nil {
			t.Errorf("CheckName(%s) = %v", n, err)
		}
	}
	for _, n := range []string{"", "1A", "A-B", "A=B", "A B", "É", strings.Repeat("A", 129)} {
		var e *Error
		if err := CheckName(n); !errors.As(err, &e) || e.Code != CodeInvalid {
			t.Errorf("CheckName(%q) = %v", n, err)
		}
	}
	table := strings.Join(ReservedTable(), " ")
	for _, want := range []string{"PATH", "HOME", "PYTHONPATH", "NODE_OPTIONS", "AWS_*", "LD_*", "RAYITO_*"} {
		if !strings.Contains(" "+table+" ", " "+want+" ") {
			t.Errorf("the table lacks %s: %s", want, table)
		}
	}
}

func TestDecode(t *testing.T) {
	raw, err := Encode([]Entry{{Name: "GITHUB_TOKEN", Secret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:gh-AbCdEf"}, {Name: "DB_USER", Secret: "db", Key: "user"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(raw)
	if err != nil || len(got) != 2 || got[1].Key != "user" {
		t.Fatalf("%+v %v", got, err)
	}
	for name, raw := range map[string]string{
		"not json":  "{",
		"unknown":   `[{"name":"A","secret":"s","value":"x"}]`,
		"reserved":  `[{"name":"PATH","secret":"s"}]`,
		"duplicate": `[{"name":"A","secret":"s"},{"name":"a","secret":"t"}]`,
		"no secret": `[{"name":"A","secret":""}]`,
		"space":     `[{"name":"A","secret":"a b"}]`,
		"bad key":   `[{"name":"A","secret":"s","key":"a/b"}]`,
		"trailing":  `[] []`,
		"object":    `{"name":"A"}`,
	} {
		if _, err := Decode(raw); !errors.Is(err, ErrSecretEnv) {
			t.Errorf("%s: %v", name, err)
		}
	}
	many := make([]Entry, MaxEntries+1)
	for i := range many {
		many[i] = Entry{Name: "V" + strings.Repeat("X", i), Secret: "s"}
	}
	var e *Error
	if _, err := Encode(many); !errors.As(err, &e) || e.Code != CodeTooMany {
		t.Errorf("too many: %v", err)
	}
}

func TestValue(t *testing.T) {
	e := Entry{Name: "DB_USER", Secret: "db", Key: "user"}
	if v, err := e.Value(`{"user":"alice","password":"x"}`); err != nil || v != "alice" {
		t.Errorf("%q %v", v, err)
	}
	for secret, code := range map[string]string{
		`{"password":"x"}`: CodeKeyMissing,
		`{"user":1}`:       CodeValueInvalid,
		`not json`:         CodeValueInvalid,
	} {
		var se *Error
		if _, err := e.Value(secret); !errors.As(err, &se) || se.Code != code || se.Name != "DB_USER" {
			t.Errorf("%s: %v", secret, err)
		}
		if _, err := e.Value(secret); err != nil && strings.Contains(err.Error(), "db") {
			t.Errorf("the error names the secret: %v", err)
		}
	}
	if _, err := (Entry{Name: "A", Secret: "s"}).Value("a\x00b"); !errors.Is(err, ErrSecretEnv) {
		t.Errorf("NUL: %v", err)
	}
	if v, err := (Entry{Name: "A", Secret: "s"}).Value("plain"); err != nil || v != "plain" {
		t.Errorf("%q %v", v, err)
	}
}

func TestRedactor(t *testing.T) {
	r := NewRedactor([]string{"s3cr3t-value", "x", "", "s3cr3t"})
	got := r.Redact("a s3cr3t-value and s3cr3t and x!")
	if strings.Contains(got, "s3cr3t") || strings.Contains(got, "x") {
		t.Errorf("%q", got)
	}
	if got != "a [redacted] and [redacted] and [redacted]!" {
		t.Errorf("%q", got)
	}
	// A short value does not eat into the marker of another.
	if got := NewRedactor([]string{"e", "longer"}).Redact("longer e"); got != "[redacted] [redacted]" {
		t.Errorf("%q", got)
	}
	var nilR *Redactor
	if nilR.Redact("a") != "a" {
		t.Error("nil redactor")
	}
}

// FuzzDecode: RAYITO_SECRET_ENV is read by the host from its environment;
// whatever it holds, Decode returns checked entries or a typed error.
func FuzzDecode(f *testing.F) {
	f.Add(`[{"name":"A","secret":"arn:aws:secretsmanager:us-east-1:1:secret:a-AbCdEf","key":"k"}]`)
	f.Add(`[]`)
	f.Add(`[{"name":"PATH","secret":"s"}]`)
	f.Fuzz(func(t *testing.T, raw string) {
		entries, err := Decode(raw)
		if err != nil {
			if !errors.Is(err, ErrSecretEnv) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if Check(entries) != nil {
			t.Fatal("Decode returned entries Check refuses")
		}
		for _, e := range entries {
			if Reserved(e.Name) {
				t.Fatalf("reserved %s", e.Name)
			}
		}
	})
}

// FuzzRedact: no value survives redaction.
func FuzzRedact(f *testing.F) {
	f.Add("token=abc123 and abc", "abc123", "abc")
	f.Add("aaaa", "a", "aa")
	f.Fuzz(func(t *testing.T, s, v1, v2 string) {
		out := NewRedactor([]string{v1, v2}).Redact(s)
		for _, v := range []string{v1, v2} {
			if v != "" && !strings.Contains("[redacted]", v) && strings.Contains(out, v) {
				// A value may reappear only by being spliced from the
				// markers and the text around them; check the text
				// between markers.
				for _, part := range strings.Split(out, "[redacted]") {
					if strings.Contains(part, v) {
						t.Fatalf("%q survives in %q", v, out)
					}
				}
			}
		}
	})
}
