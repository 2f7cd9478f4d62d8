package telemetry

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func okRaw() Raw {
	return Raw{IntervalS: 60, ServiceName: "svc", Names: 1, Endpoint: "https://collector.example/v1/metrics", Bearer: true, Token: testToken}
}

func TestParse(t *testing.T) {
	t.Parallel()
	c, err := Parse(okRaw())
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval != time.Minute || c.Auth != AuthBearer || c.Token != testToken || c.Endpoint.Host != "collector.example" {
		t.Errorf("config %+v", c)
	}
	r := okRaw()
	r.Endpoint = "http://127.0.0.1:4318"
	if c, err := Parse(r); err != nil || c.Endpoint.Path != "/v1/metrics" {
		t.Errorf("loopback http: %v %v", c.Endpoint, err)
	}
	r = okRaw()
	r.Bearer, r.Token, r.ExecutionRole = false, "", true
	r.Endpoint = "https://monitoring.eu-west-1.amazonaws.com/v1/metrics"
	if c, err := Parse(r); err != nil || c.Auth != AuthExecutionRole {
		t.Errorf("execution role: %v", err)
	}

	bad := map[string]func(*Raw){
		"interval_s":    func(r *Raw) { r.IntervalS = 14 },
		"interval_s ":   func(r *Raw) { r.IntervalS = 301 },
		"endpoint":      func(r *Raw) { r.Endpoint = "http://collector.example/v1/metrics" },
		"endpoint ":     func(r *Raw) { r.Endpoint = "https://user:" + testToken + "@collector.example/" },
		"endpoint  ":    func(r *Raw) { r.Endpoint = "ftp://collector.example/" },
		"endpoint   ":   func(r *Raw) { r.Endpoint = "" },
		"endpoint    ":  func(r *Raw) { r.Endpoint = "https://collector.example:99999/" },
		"endpoint     ": func(r *Raw) { r.Endpoint = "https://collector.example/#" + testToken },
		"service_name":  func(r *Raw) { r.ServiceName = "a\nb" },
		"image_name":    func(r *Raw) { r.ImageName = strings.Repeat("x", 300) },
		"names":         func(r *Raw) { r.Names = 7 },
		"auth":          func(r *Raw) { r.Bearer = false },
		"auth ":         func(r *Raw) { r.ExecutionRole = true },
		"bearer.token":  func(r *Raw) { r.Token = "" },
		"bearer.token ": func(r *Raw) { r.Token = "a b" },
		"execution_role": func(r *Raw) {
			r.Bearer, r.ExecutionRole, r.Endpoint = false, true, "http://127.0.0.1:4318/v1/metrics"
		},
	}
	for field, mod := range bad {
		r := okRaw()
		mod(&r)
		_, err := Parse(r)
		var ce *ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, ErrInvalid) || ce.Field != strings.TrimSpace(field) {
			t.Errorf("%s: %v", field, err)
			continue
		}
		if strings.Contains(err.Error(), testToken) {
			t.Errorf("%s: the error carries the token: %v", field, err)
		}
	}
}

// FuzzParse: any configuration parses to a valid one or a ConfigError
// that carries none of the input's values.
func FuzzParse(f *testing.F) {
	f.Add(uint32(60), "svc", int32(1), "img", "1", "https://c.example/v1/metrics", false, true, "tok")
	f.Add(uint32(15), "", int32(2), "", "", "http://[::1]:4318", true, false, "")
	f.Add(uint32(300), "s", int32(0), "i", "v", "https://u:p@h/#f", true, true, "t t")
	f.Fuzz(func(t *testing.T, iv uint32, svc string, names int32, img, ver, ep string, role, bearer bool, tok string) {
		c, err := Parse(Raw{IntervalS: iv, ServiceName: svc, Names: names, ImageName: img, ImageVersion: ver, Endpoint: ep,
			ExecutionRole: role, Bearer: bearer, Token: tok})
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("untyped error %v", err)
			}
			if len(tok) > 3 && strings.Contains(err.Error(), tok) {
				t.Fatalf("error carries the token: %v", err)
			}
			return
		}
		if c.Interval < MinInterval || c.Interval > MaxInterval || c.Endpoint == nil || c.Endpoint.User != nil {
			t.Fatalf("accepted %+v", c)
		}
		if c.Endpoint.Scheme != "https" && !loopback(c.Endpoint.Hostname()) {
			t.Fatalf("accepted plain http to %q", c.Endpoint.Host)
		}
		if (c.Auth == AuthBearer) == (c.Auth == AuthExecutionRole) {
			t.Fatalf("auth %v", c.Auth)
		}
	})
}
