// Package telemetry exports the sandbox's metrics to an OTLP/HTTP
// collector (ConfigureService's telemetry_export section): every interval
// (15–300 s, jittered ±10 %) the seven gauges of package metrics (CPU %,
// memory used, total and cache, disk used and total, processes) with the
// sandbox's resource attributes, encoded as an OTLP
// ExportMetricsServiceRequest (protobuf), gzipped and POSTed with a bearer
// token or signed with the execution role (SigV4).
//
// Batches wait in a bounded queue (64: the oldest is dropped and counted
// when it is full); a transport error or a 5xx is retried with jittered
// backoff, a 4xx drops the batch. Flush sends what is queued and a fresh
// sample (at /suspend, within 2 s); Stop ends the exporter (/terminate).
//
// Nothing here logs or returns the endpoint, the token, a signature or a
// payload: logs and Status carry counts and closed error classes only.
package telemetry

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Interval bounds of a configuration.
const (
	MinInterval = 15 * time.Second
	MaxInterval = 300 * time.Second
	// maxField bounds service_name and image_*; maxEndpoint the endpoint;
	// maxToken the bearer token.
	maxField    = 256
	maxEndpoint = 2048
	maxToken    = 8192
)

// Names picks the metric name set.
type Names int

// The name sets.
const (
	NamesRayito Names = iota + 1
	NamesE2B
)

// AuthKind says how exports authenticate.
type AuthKind int

// The kinds of authentication.
const (
	AuthBearer        AuthKind = iota + 1 // Authorization: Bearer <token>
	AuthExecutionRole                     // SigV4 with the execution role's credentials
)

// Config is one export configuration.
type Config struct {
	Endpoint     *url.URL // https (http only to a loopback address)
	Interval     time.Duration
	ServiceName  string
	Names        Names
	ImageName    string
	ImageVersion string
	Auth         AuthKind
	// Token is the bearer token (AuthBearer): never logged or returned.
	Token string
}

// ErrInvalid is the class of every ConfigError.
var ErrInvalid = errors.New("telemetry: invalid configuration")

// ConfigError is an invalid configuration: it names the field and the rule,
// never a value.
type ConfigError struct {
	Field string
	Rule  string
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Rule }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalid }

// Raw is a configuration as it arrives (the wire's fields).
type Raw struct {
	IntervalS     uint32
	ServiceName   string
	Names         int32 // 0 unspecified (= RAYITO), 1 RAYITO, 2 E2B
	ImageName     string
	ImageVersion  string
	Endpoint      string
	ExecutionRole bool
	Bearer        bool
	Token         string
}

// Parse validates raw: interval 15..300 s, an https endpoint (http only
// to a loopback address) without userinfo or fragment, printable bounded
// names, a known name set and exactly one authentication (a bearer token:
// printable, no spaces). Its errors are *ConfigError.
func Parse(raw Raw) (Config, error) {
	var c Config
	iv := time.Duration(raw.IntervalS) * time.Second
	if iv < MinInterval || iv > MaxInterval {
		return c, &ConfigError{"interval_s", "must be 15 to 300"}
	}
	c.Interval = iv
	u, err := parseEndpoint(raw.Endpoint)
	if err != nil {
		return c, err
	}
	c.Endpoint = u
	for _, f := range []struct {
		name, v string
		dst     *string
	}{{"service_name", raw.ServiceName, &c.ServiceName}, {"image_name", raw.ImageName, &c.ImageName}, {"image_version", raw.ImageVersion, &c.ImageVersion}} {
		if len(f.v) > maxField || !printable(f.v, true) {
			return c, &ConfigError{f.name, fmt.Sprintf("at most %d printable ASCII characters", maxField)}
		}
		*f.dst = f.v
	}
	if c.ServiceName == "" {
		c.ServiceName = "rayito-sandbox"
	}
	switch raw.Names {
	case 0, 1:
		c.Names = NamesRayito
	case 2:
		c.Names = NamesE2B
	default:
		return c, &ConfigError{"names", "must be RAYITO or E2B"}
	}
	switch {
	case raw.Bearer && !raw.ExecutionRole:
		if raw.Token == "" || len(raw.Token) > maxToken || !printable(raw.Token, false) {
			return c, &ConfigError{"bearer.token", fmt.Sprintf("1 to %d printable ASCII characters without spaces", maxToken)}
		}
		c.Auth, c.Token = AuthBearer, raw.Token
	case raw.ExecutionRole && !raw.Bearer:
		if c.Endpoint.Scheme != "https" {
			return c, &ConfigError{"execution_role", "signs https endpoints only"}
		}
		c.Auth = AuthExecutionRole
	default:
		return c, &ConfigError{"auth", "must be execution_role or bearer"}
	}
	return c, nil
}

// parseEndpoint checks the endpoint: an absolute https URL (or http to a
// loopback address), no userinfo, no fragment.
func parseEndpoint(s string) (*url.URL, error) {
	bad := func(rule string) (*url.URL, error) { return nil, &ConfigError{"endpoint", rule} }
	if s == "" || len(s) > maxEndpoint || !printable(s, false) {
		return bad(fmt.Sprintf("1 to %d printable ASCII characters without spaces", maxEndpoint))
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return bad("not an absolute URL")
	}
	if u.User != nil || u.Fragment != "" || u.RawFragment != "" || strings.Contains(s, "#") {
		return bad("no userinfo or fragment")
	}
	host := u.Hostname()
	if host == "" {
		return bad("no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("bad port")
		}
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopback(host) {
			return bad("must be https (http only to a loopback address)")
		}
	default:
		return bad("must be https (http only to a loopback address)")
	}
	if u.Path == "" {
		u.Path = "/v1/metrics"
	}
	return u, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// printable: printable ASCII; spaces only when spaces is set.
func printable(s string, spaces bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == ' ' && !spaces {
			return false
		}
	}
	return true
}
