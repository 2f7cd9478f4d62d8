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
// *CommandExitError (a command's non-zero exit) and *RPCError (sandbox
// RPCs), or errors.Is with the Err* sentinels.
package rayito
