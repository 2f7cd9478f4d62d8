package lambdaenv

import (
	"errors"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoad(t *testing.T) {
	c, err := Load(env(map[string]string{EnvTable: "t", EnvStackKey: "arn:k"}), Forwarder)
	if err != nil || c.Table != "t" || c.StackKey != "arn:k" || c.KeyCache != 5*time.Minute || c.Grace != 0 {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := Load(env(map[string]string{EnvTable: "t"}), Forwarder); !errors.Is(err, ErrConfig) {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := Load(env(map[string]string{EnvTable: "t"}), Deliverer); !errors.Is(err, ErrConfig) {
		t.Fatalf("missing queue: %v", err)
	}
	c, err = Load(env(map[string]string{EnvTable: "t", EnvGraceSeconds: "900"}), Reconciler)
	if err != nil || c.Grace != 15*time.Minute {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []map[string]string{{EnvTable: "t", EnvGraceSeconds: "10"}, {EnvTable: "t", EnvGraceSeconds: "x"}, {EnvTable: "t", EnvKeyCacheSecs: "-1"}, {EnvTable: "t", EnvKeyCacheSecs: "99999"}} {
		if _, err := Load(env(bad), Reconciler); !errors.Is(err, ErrConfig) {
			t.Fatalf("%v: %v", bad, err)
		}
	}
}
