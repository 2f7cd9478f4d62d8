package rayito

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// The role, logging, version and connectors of a run, as Create sends
// them; bad ones are refused before any call.
func TestCreatePlacement(t *testing.T) {
	t.Parallel()
	conn := func(name string) string { return microvmsapi.ConnectorARN("local", name) }
	const vpc = "arn:aws:lambda:us-east-1:123456789012:network-connector:vpc-conn-1"
	for _, tc := range []struct {
		name    string
		opts    []Option
		role    string
		logs    microvmsapi.Logging
		version string
		ingress []string
		egress  []string
	}{
		{"default: no role, logging disabled, internet egress", nil, "", microvmsapi.Logging{Disabled: &struct{}{}}, "", nil, []string{conn("INTERNET_EGRESS")}},
		{"no internet: no egress connector", []Option{WithAllowInternetAccess(false)}, "", microvmsapi.Logging{Disabled: &struct{}{}}, "", nil, nil},
		{"a role turns logging on", []Option{WithExecutionRole("arn:aws:iam::123456789012:role/sbx"), WithTemplate(LocalTemplate)},
			"arn:aws:iam::123456789012:role/sbx", microvmsapi.Logging{CloudWatch: &microvmsapi.CloudWatchLogging{LogGroup: "/rayito/local"}}, "", nil, []string{conn("INTERNET_EGRESS")}},
		{"connectors by name and ARN, a version", []Option{WithIngressConnectors("NO_INGRESS"), WithEgressConnectors(vpc, "INTERNET_EGRESS"), WithTemplateVersion("3")},
			"", microvmsapi.Logging{Disabled: &struct{}{}}, "3", []string{conn("NO_INGRESS")}, []string{vpc, conn("INTERNET_EGRESS")}},
		{"an explicit VPC-only egress replaces the internet", []Option{WithEgressConnectors(vpc)},
			"", microvmsapi.Logging{Disabled: &struct{}{}}, "", nil, []string{vpc}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPlatform(t)
			sbx, err := Create(t.Context(), p.opts(t, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer sbx.dp.close()
			p.vmMu.Lock()
			in := p.runs[0]
			p.vmMu.Unlock()
			if in.ExecutionRoleArn != tc.role || in.ImageVersion != tc.version {
				t.Errorf("role %q version %q, want %q %q", in.ExecutionRoleArn, in.ImageVersion, tc.role, tc.version)
			}
			if in.Logging == nil || (in.Logging.Disabled == nil) != (tc.logs.Disabled == nil) ||
				(in.Logging.CloudWatch == nil) != (tc.logs.CloudWatch == nil) ||
				in.Logging.CloudWatch != nil && *in.Logging.CloudWatch != *tc.logs.CloudWatch {
				t.Errorf("logging %+v, want %+v", in.Logging, tc.logs)
			}
			if !slices.Equal(in.IngressNetworkConnectors, tc.ingress) || !slices.Equal(in.EgressNetworkConnectors, tc.egress) {
				t.Errorf("connectors in %v out %v, want %v %v", in.IngressNetworkConnectors, in.EgressNetworkConnectors, tc.ingress, tc.egress)
			}
		})
	}
}

func TestCreateRefusesBadPlacement(t *testing.T) {
	t.Parallel()
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = "arn:aws:lambda:us-east-1:123456789012:network-connector:vpc-" + string(rune('a'+i))
	}
	for _, tc := range []struct {
		name string
		opt  Option
		want string
	}{
		{"NO_EGRESS is not a connector", WithEgressConnectors("NO_EGRESS"), "egress connector 1 of 1"},
		{"an ingress name as egress", WithEgressConnectors("ALL_INGRESS"), "egress connector"},
		{"an egress name as ingress", WithIngressConnectors("INTERNET_EGRESS"), "ingress connector"},
		{"a managed connector ARN", WithEgressConnectors(microvmsapi.ConnectorARN("us-east-1", "INTERNET_EGRESS")), "egress connector"},
		{"twice", WithIngressConnectors("NO_INGRESS", "NO_INGRESS"), "listed twice"},
		{"eleven", WithEgressConnectors(eleven...), "at most 10"},
		{"control characters", WithEgressConnectors("arn:aws:lambda:x:1:network-connector:a\nb"), "egress connector"},
		{"a role that is no role ARN", WithExecutionRole("admin"), "IAM role ARN"},
		{"a user ARN as role", WithExecutionRole("arn:aws:iam::123456789012:user/bob"), "IAM role ARN"},
	} {
		p := newPlatform(t)
		_, err := Create(t.Context(), p.opts(t, tc.opt)...)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Create = %v, want ErrInvalidArgument mentioning %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: the message carries the input: %q", tc.name, err)
		}
		p.vmMu.Lock()
		n := len(p.runs)
		p.vmMu.Unlock()
		if n != 0 {
			t.Errorf("%s: RunMicrovm was called", tc.name)
		}
	}
}

// Port refuses the hooks port and out-of-range ports before any call,
// and a port's requests carry its own headers, never the access token.
func TestPort(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	reqs := make(chan *http.Request, 1)
	p.app = func(w http.ResponseWriter, r *http.Request) { reqs <- r.Clone(r.Context()) }
	sbx, err := Create(t.Context(), p.opts(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.dp.close()
	for _, n := range []int{0, -1, 65536, 9000} {
		if _, err := sbx.Port(n); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Port(%d) = %v, want ErrInvalidArgument", n, err)
		}
	}
	port, err := sbx.Port(3000)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := sbx.Port(3000); again != port || port.Number() != 3000 || port.URL() != p.srv.URL {
		t.Fatalf("Port(3000) again %p/%p, number %d, URL %s", again, port, port.Number(), port.URL())
	}
	h, err := port.Headers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h.Get("Host") != "x.microvms.localhost" || h.Get("x-aws-proxy-port") != "3000" || h.Get("x-aws-proxy-auth") == "" {
		t.Errorf("headers %v", h)
	}
	resp, err := port.Client().Get(port.URL() + "/app")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	req := <-reqs
	if req.Host != "x.microvms.localhost" || req.Header.Get("x-aws-proxy-port") != "3000" || req.Header.Get("x-access-token") != "" {
		t.Errorf("the port's request: host %q port %q access token sent: %v", req.Host, req.Header.Get("x-aws-proxy-port"), req.Header.Get("x-access-token") != "")
	}
}
