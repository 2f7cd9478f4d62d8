// Package limits holds the numeric limits and defaults shared by the Rayito
// SDK and the rayd guest daemon.
//
// Both sides import these constants so that a limit enforced by rayd and the
// limit the SDK checks or documents can never drift apart. Changing a value
// here is a protocol change: both the SDK and rayd must be rebuilt.
package limits

import "time"

// Process supervision.
const (
	// MaxLiveProcesses is the maximum number of processes rayd tracks at once.
	MaxLiveProcesses = 256

	// ProcessRingBytes is the size of the per-process output ring buffer.
	ProcessRingBytes = 1 << 20

	// EndedRetention is how long an ended process stays queryable.
	EndedRetention = 30 * time.Second

	// KeepAliveInterval is the interval between keep-alive messages on streams.
	KeepAliveInterval = 30 * time.Second

	// TimeoutKillGrace is the delay between SIGTERM and SIGKILL on timeout.
	TimeoutKillGrace = 5 * time.Second

	// StuckSubscriber is how long a subscriber may block before it is dropped.
	StuckSubscriber = 30 * time.Second

	// SandboxOutputBudget is the total output bytes buffered per sandbox.
	SandboxOutputBudget = 128 << 20

	// MaxSubscriberLag is how many bytes a subscriber may fall behind.
	MaxSubscriberLag = 8 << 20

	// MaxKernels is the maximum number of concurrently running code kernels.
	MaxKernels = 8
)

// Run hook payload and authentication.
const (
	// MaxRunPayloadLen is the maximum length of the run hook payload in characters.
	MaxRunPayloadLen = 4096

	// AccessTokenMinBytes is the minimum decoded length of an access token.
	AccessTokenMinBytes = 16

	// MetadataMaxBytes is the maximum total size of sandbox metadata in bytes.
	MetadataMaxBytes = 4000

	// MetadataMaxKeys is the maximum number of sandbox metadata entries.
	MetadataMaxKeys = 64
)

// Network ports.
const (
	// DefaultAPIPort is the TCP port on which rayd serves its API.
	DefaultAPIPort = 8080

	// HooksPort is the TCP port on which rayd receives platform hooks.
	HooksPort = 9000

	// E2BEnvdPort is the TCP port on which rayd serves E2B's envd
	// protocol (the E2B shim: process.Process, filesystem.Filesystem,
	// /files, /health), the port the e2b SDKs address as envd's.
	E2BEnvdPort = 49983

	// E2BCodePort is the TCP port on which rayd serves the E2B code
	// interpreter's HTTP API (/execute, /contexts) for @e2b/code-interpreter.
	E2BCodePort = 49999

	// EgressProxyPort is the port of rayd's egress proxy on 127.0.0.1
	// inside the sandbox (HTTP CONNECT, absolute-form HTTP, SOCKS5, and
	// the sandbox's own connections redirected to it): NetworkState's
	// local_proxy_port.
	EgressProxyPort = 9180
	// DNSForwarderPort is the port of rayd's DNS forwarder on 127.0.0.1
	// inside the sandbox, to which a policy with host rules redirects the
	// sandbox's DNS queries.
	DNSForwarderPort = 9153
)

// Users and resource limits.
const (
	// DefaultUser is the user commands run as when none is given.
	DefaultUser = "user"

	// DefaultUID is the numeric user ID of DefaultUser.
	DefaultUID = 1000

	// MinUserID is the lowest user ID rayd assigns or accepts for sandbox users.
	MinUserID = 1000

	// MaxUserID is the highest user ID rayd assigns or accepts for sandbox users.
	MaxUserID = 65535

	// NprocLimit is the RLIMIT_NPROC applied to sandbox user processes.
	NprocLimit = 512

	// NofileLimit is the RLIMIT_NOFILE applied to sandbox user processes.
	NofileLimit = 4096

	// DiskReserveBytes is the free disk space rayd keeps in reserve.
	DiskReserveBytes = 256 << 20
)

// Terminals and filesystem.
const (
	// PtyMaxDim is the maximum number of rows or columns of a pseudo-terminal.
	PtyMaxDim = 4096

	// FileChunkBytes is the size of chunks used when streaming file contents.
	FileChunkBytes = 256 << 10

	// WriteChunkMax is the maximum size of one chunk in a file write.
	WriteChunkMax = 1 << 20

	// MaxListDirEntries is the maximum number of entries a directory listing returns.
	MaxListDirEntries = 10000

	// MaxWatches is the maximum number of concurrent filesystem watches.
	MaxWatches = 64
)
