// Package runpayload defines version 1 of the run hook payload: the JSON
// document the SDK places in RunMicrovm's runHookPayload and that rayd
// decodes when the platform calls its /run hook.
//
// The wire form is a single JSON object of at most MaxLen characters, with
// keys sorted at every level, no insignificant whitespace and only ASCII
// characters, exactly as Python's
//
//	json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
//
// produces it. Encode writes that form; Decode parses it strictly (no
// duplicate or unknown top-level keys, no trailing data, integers only) and
// both apply the same validation rules (see Payload.Validate).
//
// Errors describe the offending field and rule but never quote payload
// content: neither values nor the keys of envs and metadata appear in them.
package runpayload

import (
	"errors"
	"strconv"

	"github.com/rayito-dev/rayito/proto/limits"
)

// Version is the only payload version this package understands.
const Version = 1

// MaxLen is the maximum length of an encoded payload, in characters. An
// encoded payload is pure ASCII, so this is also its length in bytes.
const MaxLen = limits.MaxRunPayloadLen

// Values of Lifecycle.OnTimeout.
const (
	OnTimeoutKill  = "kill"
	OnTimeoutPause = "pause"
)

// Default values reported by Payload.EffectiveUser and
// Payload.EffectiveWorkdir.
const (
	DefaultUser    = limits.DefaultUser
	DefaultWorkdir = "/home/" + limits.DefaultUser
)

// Validation limits.
const (
	MaxEnvs            = 256                    // maximum number of envs entries
	MaxEnvKeyLen       = 256                    // maximum envs key length in bytes
	MaxEnvValueLen     = 4096                   // maximum envs value length in bytes
	MaxUserLen         = 32                     // maximum user name length in bytes
	MaxWorkdirLen      = 4096                   // maximum workdir length in bytes
	MaxMetadata        = limits.MetadataMaxKeys // maximum number of metadata entries
	MaxMetaKeyLen      = 128                    // maximum metadata key length in bytes
	MaxMetaValueLen    = 1024                   // maximum metadata value length in bytes
	MaxCPUSeconds      = 28800                  // maximum limits.cpu_seconds
	MaxTimeoutS        = 28800                  // maximum lifecycle.timeout_s
	MinCapS            = 120                    // minimum lifecycle.cap_s
	MaxCapS            = 28800                  // maximum lifecycle.cap_s
	MinBucketLen       = 3                      // minimum persist.bucket length
	MaxBucketLen       = 63                     // maximum persist.bucket length
	MaxKeyPrefixLen    = 900                    // maximum persist.key_prefix length in bytes
	MaxNetworkEntries  = 256                    // maximum network.allow_out plus network.deny_out entries
	MaxNetworkEntryLen = 260                    // maximum length of one network entry in bytes
)

// Payload is a decoded run hook payload. The zero values of the optional
// fields mean "absent": they are omitted by Encode.
type Payload struct {
	// V is the payload version; it must be Version.
	V int `json:"v"`
	// TokenSHA256 is the lowercase hex SHA-256 digest of the decoded access
	// token (see the accesstoken package). Required.
	TokenSHA256 string `json:"token_sha256"`
	// Envs are environment variables for processes started in the sandbox.
	Envs map[string]string `json:"envs,omitempty"`
	// User is the default user; "" means DefaultUser.
	User string `json:"user,omitempty"`
	// Workdir is the default working directory; "" means DefaultWorkdir.
	Workdir string `json:"workdir,omitempty"`
	// Metadata is opaque key/value data echoed back by rayd's Health RPC.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Limits holds resource limits.
	Limits *Limits `json:"limits,omitempty"`
	// Lifecycle holds the sandbox timeout policy.
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
	// Network holds the network policy.
	Network *Network `json:"network,omitempty"`
	// Persist names where sandbox state is persisted.
	Persist *Persist `json:"persist,omitempty"`
}

// Limits holds resource limits. CPUSeconds is required, 1..MaxCPUSeconds.
type Limits struct {
	CPUSeconds int `json:"cpu_seconds"`
}

// Lifecycle is the sandbox timeout policy. All four fields are required on
// the wire.
type Lifecycle struct {
	// TimeoutS is the idle timeout in seconds, 1..MaxTimeoutS, ≤ CapS.
	TimeoutS int `json:"timeout_s"`
	// CapS is the hard lifetime cap in seconds, MinCapS..MaxCapS.
	CapS int `json:"cap_s"`
	// OnTimeout is OnTimeoutKill or OnTimeoutPause.
	OnTimeout string `json:"on_timeout"`
	// AutoResume resumes a paused sandbox on demand; it requires
	// OnTimeout == OnTimeoutPause.
	AutoResume bool `json:"auto_resume"`
}

// Network is the network policy. Enforce is required on the wire; unknown
// keys are ignored by Decode.
//
// With Enforce, rayd installs the policy (deny-all first) before /run
// answers, or reports the sandbox as unable to enforce it (the SDK then
// terminates it: it never hands out a sandbox whose network is open when
// a policy was asked for). AllowOut and DenyOut are the entries of
// NetworkService's NetworkPolicy (CIDR, IP, all traffic, host or
// *.suffix; deny: CIDR or IP), at most MaxNetworkEntries together, each
// at most MaxNetworkEntryLen printable ASCII characters; rayd checks their
// syntax. An operator proxy's credentials never go here: only by RPC.
type Network struct {
	Enforce  bool     `json:"enforce"`
	AllowOut []string `json:"allow_out,omitempty"`
	DenyOut  []string `json:"deny_out,omitempty"`
}

// Persist names the object storage location for persisted sandbox state.
// Unknown keys are ignored by Decode.
type Persist struct {
	// Bucket is required: MinBucketLen..MaxBucketLen characters of [a-z0-9.-].
	Bucket string `json:"bucket"`
	// KeyPrefix is optional: at most MaxKeyPrefixLen bytes, no NUL.
	KeyPrefix string `json:"key_prefix,omitempty"`
}

// EffectiveUser returns p.User, or DefaultUser when it is empty.
func (p *Payload) EffectiveUser() string {
	if p == nil || p.User == "" {
		return DefaultUser
	}
	return p.User
}

// EffectiveWorkdir returns p.Workdir, or DefaultWorkdir when it is empty.
func (p *Payload) EffectiveWorkdir() string {
	if p == nil || p.Workdir == "" {
		return DefaultWorkdir
	}
	return p.Workdir
}

// ErrTooLarge is returned when a payload, or its encoding, exceeds MaxLen
// characters.
var ErrTooLarge = errors.New("runpayload: payload exceeds " + strconv.Itoa(MaxLen) + " characters")

// Error reports an invalid payload. Field is the dotted path of the
// offending key (such as "lifecycle.timeout_s"), or "" when the problem is
// not tied to one field. Neither Field nor Reason contains payload content.
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return "runpayload: " + e.Reason
	}
	return "runpayload: " + e.Field + ": " + e.Reason
}

func fieldErr(field, reason string) error {
	return &Error{Field: field, Reason: reason}
}
