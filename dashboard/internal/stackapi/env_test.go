package stackapi

import (
	"errors"
	"testing"

	"github.com/rayito-dev/rayito/dashboard/internal/theme"
)

func TestLoadEnv(t *testing.T) {
	base := map[string]string{
		EnvOrigin: tOrigin, EnvPoolID: tPool, EnvClientID: tClient, EnvHostedUIDomain: "rayito-x.auth.eu-west-1.amazoncognito.com",
		EnvGroup: tGroup, EnvAuditTable: "rayito-dashboard-audit", EnvStateTable: "rayito-dashboard-state", EnvRegion: tRegion,
	}
	get := func(over map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := over[k]; ok {
				return v
			}
			return base[k]
		}
	}
	e, err := LoadEnv(get(nil))
	if err != nil || e.Config.AllowActions || e.Config.EnableCostExplorer || e.Mode != "api" {
		t.Fatalf("%+v %v", e, err)
	}
	e, err = LoadEnv(get(map[string]string{EnvActionsRoleArn: "arn:aws:iam::123456789012:role/x-actions", EnvCostExplorer: "true"}))
	if err != nil || !e.Config.AllowActions || !e.Config.EnableCostExplorer {
		t.Fatalf("%+v %v", e, err)
	}
	for _, over := range []map[string]string{
		{EnvOrigin: "https://evil.example"}, {EnvAuditTable: ""}, {EnvCostExplorer: "yes"},
		{EnvActionsRoleArn: "not-an-arn"}, {EnvMode: "other"}, {EnvMode: "quota"},
		{EnvMode: "quota", EnvTopicArn: "arn:aws:sns:eu-west-1:123456789012:t", EnvQuotaLimit: "0", EnvQuotaPercent: "80"},
	} {
		if _, err := LoadEnv(get(over)); !errors.Is(err, ErrConfig) {
			t.Errorf("%v: %v, want ErrConfig", over, err)
		}
	}
	// A theme: valid is used, invalid discarded for the factory one.
	e, err = LoadEnv(get(map[string]string{EnvTheme: `{"title":"Acme","colors":{"accent":"#112233"}}`}))
	if err != nil || e.ThemeDiscarded || e.Config.Theme.Title != "Acme" || e.Config.Theme.Colors.Accent != "#112233" {
		t.Fatalf("valid theme: %+v %v", e.Config.Theme, err)
	}
	e, err = LoadEnv(get(map[string]string{EnvTheme: `{"title":"x","colors":{"accent":"red;}body{background:url(//evil)"}}`}))
	if err != nil || !e.ThemeDiscarded || e.Config.Theme != theme.Default() {
		t.Fatalf("invalid theme: %+v %v", e.Config.Theme, err)
	}
	e, err = LoadEnv(get(map[string]string{EnvMode: "quota", EnvTopicArn: "arn:aws:sns:eu-west-1:123456789012:t", EnvQuotaLimit: "50", EnvQuotaPercent: "80"}))
	if err != nil || e.QuotaLimit != 50 || e.QuotaPercent != 80 {
		t.Fatalf("%+v %v", e, err)
	}
}
