// Package rayito is the Go SDK of Rayito: disposable, isolated Linux
// sandboxes for AI agents and programs, on AWS Lambda MicroVMs in your own
// account or on the local platform (localvm) that runs the same guest
// daemon on one Linux machine.
//
// Create a sandbox, run a command, and kill it:
//
//	sbx, err := rayito.Create(ctx)
//	if err != nil { ... }
//	defer sbx.Kill(context.WithoutCancel(ctx))
//	res, err := sbx.Commands.Run(ctx, "echo hello")
//	fmt.Print(res.Stdout)
//
// The backend is chosen by option (WithBackend), else by RAYITO_BACKEND
// ("local" or "aws"), else local. The local platform is reached at
// RAYITO_ENDPOINT, else where the user's own platform recorded it serves,
// else http://127.0.0.1:7450 (see WithEndpoint); AWS through the usual AWS
// configuration (region, credentials) and a template (image ARN) from
// WithTemplate or RAYITO_TEMPLATE.
//
// Every sandbox gets a fresh 32-byte access token made here; only its
// sha256 travels in the creation payload. A *Sandbox is safe for concurrent
// use. The SDK never logs tokens, headers, envs, payloads, file contents or
// commands. Errors are typed: use errors.As with *APIError (control plane),
// *CommandExitError (a command's non-zero exit), *RPCError (sandbox RPCs),
// *SandboxEndedError (the sandbox ended, and why), *CapExceededError
// (SetTimeout past the cap) and *IncompatibleAgentError (a sandbox daemon
// this SDK cannot drive), or errors.Is with the Err* sentinels.
//
// # Pausing and resuming
//
// Pause suspends a sandbox (Sandbox.Pause, or Pause by id with no token)
// and returns once the platform reports it SUSPENDED; Resume resumes it and
// returns once its daemon answers again. Both are idempotent. A paused
// sandbox keeps its memory, processes, terminals and files and costs no
// compute; its streams are cut, and its paused time counts towards its
// maximum lifetime. WithIdlePolicy lets the platform pause a sandbox
// nobody talks to and, with auto-resume, resume it on the next request.
//
// # Deadlines
//
// By default a sandbox lives until the platform's maximum duration
// (DefaultTimeout, 5 minutes; end reason EndMaxDuration) and nothing can
// move that. With WithTimeout (or WithOnTimeout, WithMaxLifetime) it gets
// a deadline instead, enforced by its daemon: at WithTimeout from its
// start it is killed (TimeoutKill, the default; end reason EndTimeout) or
// kept for a pause (TimeoutPause). SetTimeout moves the deadline
// (AtLeast: only later), up to the maximum lifetime (WithMaxLifetime:
// default the timeout plus a minute when killing, 8 hours when pausing);
// Info.Lifecycle reports it. Past its deadline a sandbox answers only
// Health and SetTimeout (ErrSandboxTimeout), and its commands end with
// StatusSandboxTimeout.
//
//	sbx, err := rayito.Create(ctx, rayito.WithTimeout(10*time.Minute),
//		rayito.WithOnTimeout(rayito.TimeoutKill), rayito.WithMaxLifetime(time.Hour))
//	...
//	l, err := sbx.SetTimeout(ctx, 30*time.Minute, rayito.AtLeast())
//
// # End reasons
//
// An ended sandbox says why: Info.EndReason and SandboxEndedError.Reason
// are one of a closed set (EndKilledByUser, EndTimeout, EndMaxDuration,
// EndOutOfMemory, EndInitExited, EndPlatformShutdown, EndPlatformError,
// EndIdle, else EndUnknown), read from the platform's state reason, with
// a detail ("exit status 3"). A command the kernel's OOM killer ended has
// Status StatusOOMKilled.
//
// # Reconnecting
//
// Command, terminal and watch handles survive pauses and dropped
// connections. When a stream is cut before its end the handle first asks
// the control plane, which never wakes a paused sandbox:
//
//   - while the sandbox is SUSPENDING or SUSPENDED it waits, asking the
//     control plane again every 1 s up to every 5 s, and sends nothing to
//     the sandbox itself, for as long as the pause lasts (until the
//     handle's context ends): a handle never wakes a paused sandbox nor
//     keeps it from going idle;
//   - when it RUNS, it asks the sandbox's Health, backing off from 0.5 s
//     to 4 s, for up to WithReconnectTimeout (60 s) of running time, then
//     reattaches from the last output it delivered: commands and terminals
//     lose and repeat no byte;
//   - when it has ended, the handle returns a *SandboxEndedError.
//
// A watch cannot replay what changed while it was away: once armed again
// it delivers a FileEvent with Resynced set. Calls made while a sandbox is
// paused (Commands.Run, Files.Read, SetTimeout, Metrics, ...) do reach its
// endpoint: the platform resumes the sandbox for them when auto-resume is
// on, and refuses them otherwise.
//
// # Versions
//
// Version is this SDK's version. Create and Connect compare it with the
// sandbox daemon's (rayd's) version through the table of
// github.com/rayito-dev/rayito/proto/compat: an incompatible daemon is an
// *IncompatibleAgentError, a newer compatible one a single warning through
// WithLogger.
//
// # Installing and dependencies
//
//	go get github.com/rayito-dev/rayito/sdk@latest
//
// The SDK pulls in connectrpc.com/connect and google.golang.org/protobuf
// (the sandbox RPCs), the module github.com/rayito-dev/rayito/proto (the
// contract), and aws-sdk-go-v2's core, config and credential modules with
// smithy-go (SigV4 and the credential chain of the AWS backend): that is
// the whole list, kept by a test. Driving the local platform needs no AWS
// credentials, configuration or network beyond the platform's loopback
// endpoint: the AWS configuration is loaded only when the backend is aws.
// The local platform itself (module localvm) and the guest daemon (rayd)
// are never linked into a program that imports the SDK.
//
// # Packages
//
// The root package is the sandbox core: Sandbox, Commands, Pty, Files,
// Code, errors and options. Built on it, and never imported by it:
// sdk/secrets (secret stores, the cache, gateway routes, placeholders,
// header rules, the audit trail; only programs that import it link AWS
// Secrets Manager's client) and sdk/git (git with one-command
// credentials). Below it, sdk/internal/*: the data plane's transport,
// the stream follower and its reconnection, the one backoff helper, the
// Secrets Manager calls of lifecycle events, the token store and the
// extension hook. A test
// (layers_test.go) keeps every arrow pointing down. docs/sdk-migration.md
// maps the names that moved.
package rayito
