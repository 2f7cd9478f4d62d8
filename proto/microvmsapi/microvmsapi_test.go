package microvmsapi

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPaths(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		MicrovmPath("microvm-1"):   "/2025-09-09/microvms/microvm-1",
		AuthTokenPath("microvm-1"): "/2025-09-09/microvms/microvm-1/auth-token",
		SuspendPath("a/b"):         "/2025-09-09/microvms/a%2Fb/suspend",
		ResumePath("x"):            "/2025-09-09/microvms/x/resume",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestStatusOf(t *testing.T) {
	t.Parallel()
	for exc, want := range map[string]int{
		ResourceNotFoundException: 404, ValidationException: 400, ConflictException: 409,
		ServiceQuotaExceededException: 402, ThrottlingException: 429, "Whatever": 500,
	} {
		if got := StatusOf(exc); got != want {
			t.Errorf("StatusOf(%s) = %d, want %d", exc, got, want)
		}
	}
}

func TestAllowedPortJSON(t *testing.T) {
	t.Parallel()
	port := 8080
	in := CreateMicrovmAuthTokenInput{ExpirationInMinutes: 60, AllowedPorts: []AllowedPort{{Port: &port}, {Range: &PortRange{StartPort: 3000, EndPort: 3010}}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"expirationInMinutes":60,"allowedPorts":[{"port":8080},{"range":{"startPort":3000,"endPort":3010}}]}`
	if string(b) != want {
		t.Fatalf("got %s", b)
	}
	if !StatePending.Valid() || State("BOGUS").Valid() {
		t.Fatal("Valid")
	}
}

func TestValidSandboxID(t *testing.T) {
	for _, ok := range []string{"microvm-0b6c1a52-5b0e-4a29-9a1c-3f7d2e8c9a10", "a", "A.b_c-1", strings.Repeat("x", 128)} {
		if !ValidSandboxID(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", ".hidden", "..", "a/b", "a b", "é", "a\x00", strings.Repeat("x", 129), "a:b", "a%2f"} {
		if ValidSandboxID(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
