// Package e2b is E2B's SDK vocabulary for Go programs moving from E2B to
// Rayito: Sandbox.Create, SandboxID, Commands.Run, Files.Read, SetTimeout,
// IsRunning, GetInfo and the rest under E2B's names, with E2B's
// conventions (a Kill of a sandbox that is gone returns false, Files.Read
// returns text, a command's non-zero exit is a *CommandExitError), mapped
// onto package rayito, which does the work. Reach for rayito itself in new
// code: it has more (secrets, network policy, PTYs, metrics history).
//
// What E2B has and Rayito does not answers an *UnimplementedError naming
// the feature (errors.Is(err, ErrUnimplemented)), never a silent no-op:
// see the functions that return one. Errors otherwise keep rayito's
// sentinels reachable (errors.Is(err, rayito.ErrNotFound)) and add E2B's
// names for them (ErrNotFound, ErrTimeout, ...).
//
// The platform is chosen as rayito chooses it (RAYITO_BACKEND,
// RAYITO_ENDPOINT, the AWS configuration); pass rayito options with
// WithRayitoOptions.
package e2b
