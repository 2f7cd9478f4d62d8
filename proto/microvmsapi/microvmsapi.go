// Package microvmsapi is the wire contract of the AWS Lambda MicroVMs
// control plane (service lambda-microvms, API version 2025-09-09,
// rest-json), shared by the SDK's client (sdk/microvms) and the local
// platform that serves the same API (localvm). It holds request and
// response shapes, paths, states, limits and error names, and nothing that
// does I/O.
//
// Field names follow the service's JSON. Where public material does not
// name a field (the network connector lists), the name is our assumption
// and is marked as such.
package microvmsapi

import (
	"net/url"
	"time"
)

// APIVersion is the path prefix of every operation.
const APIVersion = "/2025-09-09"

// SigningName is the SigV4 service name (and endpoint prefix).
const SigningName = "lambda"

// Paths of the operations, relative to the endpoint.
const (
	PathMicrovms = APIVersion + "/microvms" // POST Run, GET List
)

// MicrovmPath is GET (Get) and DELETE (Terminate) of one microVM.
func MicrovmPath(id string) string { return PathMicrovms + "/" + url.PathEscape(id) }

// SuspendPath is POST SuspendMicrovm.
func SuspendPath(id string) string { return MicrovmPath(id) + "/suspend" }

// ResumePath is POST ResumeMicrovm.
func ResumePath(id string) string { return MicrovmPath(id) + "/resume" }

// AuthTokenPath is POST CreateMicrovmAuthToken.
func AuthTokenPath(id string) string { return MicrovmPath(id) + "/auth-token" }

// State is a microVM's state.
type State string

// The states of a microVM.
const (
	StatePending     State = "PENDING"
	StateRunning     State = "RUNNING"
	StateSuspending  State = "SUSPENDING"
	StateSuspended   State = "SUSPENDED"
	StateTerminating State = "TERMINATING"
	StateTerminated  State = "TERMINATED"
)

// Valid reports whether s is one of the states.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateRunning, StateSuspending, StateSuspended, StateTerminating, StateTerminated:
		return true
	}
	return false
}

// Limits of the API.
const (
	MaxRunHookPayload     = 4096
	MinDurationSeconds    = 1
	MaxDurationSeconds    = 28800
	MaxListResults        = 50
	MaxConnectors         = 10
	MaxClientTokenLen     = 128
	MinAuthTokenMinutes   = 1
	MaxAuthTokenMinutes   = 60
	DefaultProxyPort      = 8080
	HooksPort             = 9000
	MinIdleSeconds        = 60
	TerminatedListedFor   = 20 * time.Minute
	AuthTokenResponseKey  = "X-aws-proxy-auth"
	ProxyAuthHeader       = "x-aws-proxy-auth"
	ProxyPortHeader       = "x-aws-proxy-port"
	ProxyForceH2Header    = "x-aws-proxy-force-h2"
	ConnectorARNPrefix    = "arn:aws:lambda:"
	ConnectorARNInfix     = ":aws:network-connector:aws-network-connector:"
	ConnectorInternet     = "INTERNET_EGRESS"
	ConnectorAllIngress   = "ALL_INGRESS"
	ConnectorNoIngress    = "NO_INGRESS"
	ConnectorShellIngress = "SHELL_INGRESS"
)

// ConnectorARN is the ARN of a managed network connector in region.
func ConnectorARN(region, name string) string {
	return ConnectorARNPrefix + region + ConnectorARNInfix + name
}

// IdlePolicy suspends an idle microVM; all three fields or none.
type IdlePolicy struct {
	MaxIdleDurationSeconds   int  `json:"maxIdleDurationSeconds"`
	SuspendedDurationSeconds int  `json:"suspendedDurationSeconds"`
	AutoResumeEnabled        bool `json:"autoResumeEnabled"`
}

// Logging picks where runtime logs go: exactly one of the two.
type Logging struct {
	Disabled   *struct{}          `json:"disabled,omitempty"`
	CloudWatch *CloudWatchLogging `json:"cloudWatch,omitempty"`
}

// CloudWatchLogging names a log group.
type CloudWatchLogging struct {
	LogGroup string `json:"logGroup"`
}

// RunMicrovmInput is the body of RunMicrovm.
type RunMicrovmInput struct {
	ImageIdentifier          string      `json:"imageIdentifier"`
	ImageVersion             string      `json:"imageVersion,omitempty"`
	ExecutionRoleArn         string      `json:"executionRoleArn,omitempty"`
	IdlePolicy               *IdlePolicy `json:"idlePolicy,omitempty"`
	Logging                  *Logging    `json:"logging,omitempty"`
	RunHookPayload           string      `json:"runHookPayload,omitempty"`
	MaximumDurationInSeconds int         `json:"maximumDurationInSeconds,omitempty"`
	// IngressNetworkConnectors and EgressNetworkConnectors are connector
	// ARNs. Their JSON names are our assumption.
	IngressNetworkConnectors []string `json:"ingressNetworkConnectors,omitempty"`
	EgressNetworkConnectors  []string `json:"egressNetworkConnectors,omitempty"`
	ClientToken              string   `json:"clientToken,omitempty"`
}

// Microvm is the answer of RunMicrovm and GetMicrovm.
type Microvm struct {
	MicrovmID                string      `json:"microvmId"`
	State                    State       `json:"state"`
	Endpoint                 string      `json:"endpoint,omitempty"`
	ImageArn                 string      `json:"imageArn,omitempty"`
	ImageVersion             string      `json:"imageVersion,omitempty"`
	StartedAt                *time.Time  `json:"startedAt,omitempty"`
	TerminatedAt             *time.Time  `json:"terminatedAt,omitempty"`
	StateReason              string      `json:"stateReason,omitempty"`
	ExecutionRoleArn         string      `json:"executionRoleArn,omitempty"`
	IdlePolicy               *IdlePolicy `json:"idlePolicy,omitempty"`
	Logging                  *Logging    `json:"logging,omitempty"`
	MaximumDurationInSeconds int         `json:"maximumDurationInSeconds,omitempty"`
	IngressNetworkConnectors []string    `json:"ingressNetworkConnectors,omitempty"`
	EgressNetworkConnectors  []string    `json:"egressNetworkConnectors,omitempty"`
}

// MicrovmSummary is one item of ListMicrovms (no endpoint).
type MicrovmSummary struct {
	MicrovmID    string     `json:"microvmId"`
	State        State      `json:"state"`
	ImageArn     string     `json:"imageArn,omitempty"`
	ImageVersion string     `json:"imageVersion,omitempty"`
	StartedAt    *time.Time `json:"startedAt,omitempty"`
}

// List query parameters.
const (
	QueryMaxResults      = "maxResults"
	QueryNextToken       = "nextToken"
	QueryImageIdentifier = "imageIdentifier"
	QueryImageVersion    = "imageVersion"
)

// ListMicrovmsOutput is the answer of ListMicrovms.
type ListMicrovmsOutput struct {
	Items     []MicrovmSummary `json:"items"`
	NextToken string           `json:"nextToken,omitempty"`
}

// PortRange is an inclusive range of ports.
type PortRange struct {
	StartPort int `json:"startPort"`
	EndPort   int `json:"endPort"`
}

// AllowedPort is one entry of CreateMicrovmAuthToken's allowedPorts:
// exactly one of its fields.
type AllowedPort struct {
	Port     *int       `json:"port,omitempty"`
	Range    *PortRange `json:"range,omitempty"`
	AllPorts *struct{}  `json:"allPorts,omitempty"`
}

// CreateMicrovmAuthTokenInput is the body of CreateMicrovmAuthToken.
type CreateMicrovmAuthTokenInput struct {
	ExpirationInMinutes int           `json:"expirationInMinutes"`
	AllowedPorts        []AllowedPort `json:"allowedPorts"`
}

// CreateMicrovmAuthTokenOutput maps header names to values; the key is
// AuthTokenResponseKey (match it case-insensitively).
type CreateMicrovmAuthTokenOutput struct {
	AuthToken map[string]string `json:"authToken"`
}

// Error is the rest-json error body. The exception name also travels in
// the X-Amzn-ErrorType header.
type Error struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// ErrorTypeHeader carries the exception name.
const ErrorTypeHeader = "X-Amzn-ErrorType"

// Exception names and their HTTP statuses.
const (
	ResourceNotFoundException     = "ResourceNotFoundException"     // 404
	ValidationException           = "ValidationException"           // 400
	ConflictException             = "ConflictException"             // 409
	ServiceQuotaExceededException = "ServiceQuotaExceededException" // 402
	ThrottlingException           = "ThrottlingException"           // 429
	AccessDeniedException         = "AccessDeniedException"         // 403
	InsufficientCapacityException = "InsufficientCapacityException" // 503 (our assumption)
	InternalServerException       = "InternalServerException"       // 500

	// NotOwnerException is the local platform's answer (403) to a client
	// that is not its owner: another user of the machine. A Rayito
	// extension: the service never sends it.
	NotOwnerException = "NotOwnerException" // 403
)

// OwnerHeader carries, with NotOwnerException, the uid of the user the
// local platform serves.
const OwnerHeader = "X-Rayito-Platform-Owner"

// StatusOf returns the HTTP status the service uses for an exception.
func StatusOf(exception string) int {
	switch exception {
	case ResourceNotFoundException:
		return 404
	case ValidationException:
		return 400
	case ConflictException:
		return 409
	case ServiceQuotaExceededException:
		return 402
	case ThrottlingException:
		return 429
	case AccessDeniedException, NotOwnerException:
		return 403
	case InsufficientCapacityException:
		return 503
	default:
		return 500
	}
}

// ValidSandboxID reports whether id may be a sandbox (microVM) id for
// Rayito's clients: 1 to 128 characters of [A-Za-z0-9._-], not starting
// with a dot (so it is safe as a file name, a path segment and a DNS-ish
// label: no "..", no separators, no hidden files). Every client-side check
// of an id is this one.
func ValidSandboxID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
