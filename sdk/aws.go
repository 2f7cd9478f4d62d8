package rayito

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// awsConfig holds the options that shape a microVM on the platform:
// its role, its logging and its network connectors. The local platform
// takes the same fields (it validates them like AWS).
type awsConfig struct {
	executionRole string
	imageVersion  string
	ingress       []string // names or VPC connector ARNs, as given
	egress        []string // nil: INTERNET_EGRESS when internet access is on
	egressSet     bool
	endpointCAs   *x509.CertPool
}

// WithExecutionRole runs the microVM under an IAM role (its ARN). Without
// one, the default, the microVM has no AWS credentials inside and writes
// no runtime logs; with one, its runtime logs go to the CloudWatch log
// group /rayito/<image name>. Code in the sandbox can read the role's
// credentials unless the image blocks the metadata service for the
// sandbox user: give the role only what sandbox code may do.
func WithExecutionRole(roleARN string) Option {
	return sandboxOption(func(c *config) { c.aws.executionRole = roleARN })
}

// WithTemplateVersion pins the image version the microVM runs (default:
// the latest ACTIVE one).
func WithTemplateVersion(v string) Option {
	return sandboxOption(func(c *config) { c.aws.imageVersion = v })
}

// WithIngressConnectors sets the microVM's ingress network connectors:
// ALL_INGRESS, NO_INGRESS or SHELL_INGRESS (managed connectors, by name)
// or VPC connector ARNs; at most 10. Without it the platform's default,
// HTTP ingress through the endpoint, applies.
func WithIngressConnectors(connectors ...string) Option {
	return sandboxOption(func(c *config) { c.aws.ingress = append([]string(nil), connectors...) })
}

// WithEgressConnectors sets the microVM's egress network connectors:
// INTERNET_EGRESS (by name) or VPC connector ARNs; at most 10. It
// replaces the default (INTERNET_EGRESS while internet access is on):
// list INTERNET_EGRESS too to keep the internet beside a VPC. The
// sandbox's network policy (WithNetwork) still applies inside.
func WithEgressConnectors(connectors ...string) Option {
	return sandboxOption(func(c *config) {
		c.aws.egress = append([]string(nil), connectors...)
		c.aws.egressSet = true
	})
}

// WithEndpointRootCAs makes the SDK trust pool, instead of the system's
// roots, for the sandbox endpoints' TLS certificates (a TLS-inspecting
// corporate proxy, a test endpoint). The local platform's endpoints are
// plain HTTP on loopback and ignore it.
func WithEndpointRootCAs(pool *x509.CertPool) Option {
	return sandboxOption(func(c *config) { c.aws.endpointCAs = pool })
}

// Connector names accepted in each direction.
var (
	ingressNames = connectorNames{microvmsapi.ConnectorAllIngress, microvmsapi.ConnectorNoIngress, microvmsapi.ConnectorShellIngress}
	egressNames  = connectorNames{microvmsapi.ConnectorInternet}
)

// connectorNames are the managed connectors of one direction.
type connectorNames []string

func (n connectorNames) has(s string) bool { return slices.Contains(n, s) }
func (n connectorNames) String() string    { return strings.Join(n, ", ") }

// connectors turns names into managed connector ARNs of region and
// checks the list before any call: known names only, VPC connectors as
// ARNs, no duplicates, at most MaxConnectors.
func connectors(dir, region string, list []string, names connectorNames) ([]string, error) {
	if len(list) > microvmsapi.MaxConnectors {
		return nil, newError(ReasonInvalidArgument, fmt.Sprintf("%d %s connectors: at most %d", len(list), dir, microvmsapi.MaxConnectors))
	}
	out := make([]string, 0, len(list))
	seen := map[string]bool{}
	for i, c := range list {
		arn := c
		switch {
		case names.has(c):
			arn = microvmsapi.ConnectorARN(region, c)
		case strings.HasPrefix(c, "arn:") && !strings.Contains(c, microvmsapi.ConnectorARNInfix) &&
			strings.Contains(c, ":network-connector:") && printableASCII(c):
			// A VPC connector of the account.
		default:
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("%s connector %d of %d: want %s or a VPC connector ARN", dir, i+1, len(list), names))
		}
		if seen[arn] {
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("%s connector %d of %d is listed twice", dir, i+1, len(list)))
		}
		seen[arn] = true
		out = append(out, arn)
	}
	return out, nil
}

// planPlacement fills in the run input's role, logging, version and
// connectors. With a role, Create names the log group once it knows the
// image's name.
func planPlacement(cfg *config, in *microvmsapi.RunMicrovmInput) error {
	r := region(cfg)
	if cfg.aws.executionRole != "" {
		if !strings.HasPrefix(cfg.aws.executionRole, "arn:") || !strings.Contains(cfg.aws.executionRole, ":role/") || !printableASCII(cfg.aws.executionRole) {
			return newError(ReasonInvalidArgument, "the execution role must be an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)")
		}
		in.ExecutionRoleArn = cfg.aws.executionRole
		in.Logging = &microvmsapi.Logging{CloudWatch: &microvmsapi.CloudWatchLogging{}}
	} else {
		// Always sent: the image's log group is not inherited, and no
		// role means nothing could write logs anyway.
		in.Logging = &microvmsapi.Logging{Disabled: &struct{}{}}
	}
	in.ImageVersion = cfg.aws.imageVersion
	ingress, err := connectors("ingress", r, cfg.aws.ingress, ingressNames)
	if err != nil {
		return err
	}
	if len(ingress) > 0 {
		in.IngressNetworkConnectors = ingress
	}
	egress := cfg.aws.egress
	if !cfg.aws.egressSet && (cfg.internet || cfg.secretEgress()) {
		egress = []string{microvmsapi.ConnectorInternet}
	}
	out, err := connectors("egress", r, egress, egressNames)
	if err != nil {
		return err
	}
	if len(out) > 0 {
		in.EgressNetworkConnectors = out
	}
	return nil
}

// resolveTemplate returns the image ARN a template names on AWS (a name
// is looked up in the caller's account and region), and the image's name.
// Locally any name is the template.
func resolveTemplate(ctx context.Context, cfg *config, mv *microvms.Client, template string) (ident, name string, err error) {
	if cfg.backend != BackendAWS {
		return template, template, nil
	}
	arn, err := mv.ResolveImageARN(ctx, template)
	var ae *APIError
	switch {
	case errors.As(err, &ae) && ae.Kind == microvms.KindNotFound:
		return "", "", newError(ReasonNotFound, "template "+template+": no MicroVM image of that name in this account and region (publish it with `rayito image publish`)", err)
	case errors.As(err, &ae) && ae.Kind == microvms.KindInvalidArgument && ae.StatusCode == 0:
		return "", "", newError(ReasonInvalidArgument, "the template must be a MicroVM image ARN or an image name (letters, digits, '-', '_')", err)
	case err != nil:
		return "", "", controlPlaneErr(cfg, "", err)
	}
	return arn, arn[strings.LastIndexByte(arn, ':')+1:], nil
}

func printableASCII(s string) bool {
	if len(s) == 0 || len(s) > 2048 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
