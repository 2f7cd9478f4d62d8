package events

import (
	"strings"
	"testing"
)

func TestWebhookIDsAndSecrets(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewWebhookID()
		if !ValidWebhookID(id) || seen[id] {
			t.Fatalf("NewWebhookID gave %q", id)
		}
		seen[id] = true
		if s := NewWebhookSecret(); len(s) != 64 || len(s) < MinWebhookSecretLen || strings.Trim(s, "0123456789abcdef") != "" {
			t.Fatalf("NewWebhookSecret gave %d bytes", len(s))
		}
	}
	for _, bad := range []string{"", "wh_", "wh_1", "wh_0123456789ABCDEF01234567", "wh_0123456789abcdef0123456", "wh_0123456789abcdef012345678",
		"WH_0123456789abcdef01234567", "xx_0123456789abcdef01234567", "wh_0123456789abcdef0123456/", "wh_../../../../../../../../"} {
		if ValidWebhookID(bad) {
			t.Errorf("ValidWebhookID(%q) = true", bad)
		}
	}
	if TableSandboxPK("s") != "sandbox#s" || TableEventSK("e") != "event#e" || TableWebhookSK("w") != "webhook#w" {
		t.Error("the table's keys changed: the stack's data would no longer be found")
	}
}
