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
// RAYITO_ENDPOINT (default http://127.0.0.1:7450); AWS through the usual AWS
// configuration (region, credentials) and a template (image ARN) from
// WithTemplate or RAYITO_TEMPLATE.
//
// Every sandbox gets a fresh 32-byte access token made here; only its
// sha256 travels in the creation payload. A *Sandbox is safe for concurrent
// use. The SDK never logs tokens, headers, envs, payloads, file contents or
// commands. Errors are typed: use errors.As with *APIError (control plane),
// *CommandExitError (a command's non-zero exit), *RPCError (sandbox RPCs)
// and *IncompatibleAgentError (a sandbox daemon this SDK cannot drive), or
// errors.Is with the Err* sentinels.
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
package rayito
