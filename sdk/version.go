package rayito

// Version is this SDK's semantic version, without the leading v: the sdk
// entry of versions.yaml (`make check-modules` compares them).
//
// Create and Connect compare it with the sandbox daemon's version
// (Health's agent_version) through the table of proto/compat: an
// incompatible daemon is an *IncompatibleAgentError, a newer but
// compatible one a single warning through WithLogger's logger.
const Version = "0.1.0"
