// Package microvms is a client for the AWS Lambda MicroVMs control plane
// (service lambda-microvms, REST-JSON API version 2025-09-09) and for
// localvm, Rayito's local stand-in that serves the same API unsigned on
// loopback.
//
// There is no generated aws-sdk-go-v2 client for this service; this package
// is a small hand-written one. It covers the microVM operations Rayito
// needs: RunMicrovm, GetMicrovm, ListMicrovms (and ListAll, which follows
// nextToken), TerminateMicrovm, SuspendMicrovm, ResumeMicrovm and
// CreateMicrovmAuthToken. The request and response shapes are those of
// package github.com/rayito-dev/rayito/proto/microvmsapi.
//
// # Behaviour
//
//   - Requests to AWS are signed with SigV4 (signing name "lambda") through
//     aws-sdk-go-v2/aws/signer/v4, and re-signed on every attempt.
//     Requests to localvm are not signed (see [Unsigned]).
//   - Arguments are checked before anything is sent; a refusal is an
//     [*APIError] of kind [KindInvalidArgument] and no request is made.
//   - Each operation has a client-side token bucket matching the service's
//     published rates (see [DefaultRateLimits]); a call waits for a token
//     and gives up when its context ends.
//   - Throttling, HTTP 500/502/503/504 and connection errors are retried
//     with exponential backoff and full jitter, up to [WithMaxAttempts]
//     attempts. A Retry-After header replaces the backoff; one longer than
//     30 s, or one that would outlast the context's deadline, ends the
//     retries and the last error is returned. RunMicrovm always sends a
//     clientToken, so its retries are idempotent.
//   - Service errors become [*APIError] values classified by exception name
//     (the quota error arrives with HTTP 402). Only the exception name is
//     kept: the service's message is never copied into an error, because
//     some messages (signature failures) echo the canonical request,
//     session token included. Use errors.Is with [ErrNotFound],
//     [ErrConflict] and the other sentinels, or errors.As for details.
//     Connection failures (after the retries) and context errors are not
//     [*APIError]s; they wrap the underlying error, so errors.Is(err,
//     context.Canceled) works.
//   - Response bodies are read up to 1 MiB.
//   - The package never logs.
//
// # Example
//
// Against a local localvm:
//
//	c, err := microvms.New("http://127.0.0.1:7450", microvms.Unsigned())
//	if err != nil {
//		return err
//	}
//	vm, err := c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{
//		ImageIdentifier: imageARN,
//		Logging:         &microvmsapi.Logging{Disabled: &struct{}{}},
//	})
//	if err != nil {
//		return err
//	}
//	fmt.Println(vm.MicrovmID, vm.State)
//
// Against AWS, with region and credentials from the usual AWS configuration:
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	if err != nil {
//		return err
//	}
//	c, err := microvms.NewFromConfig(cfg)
//	if err != nil {
//		return err
//	}
//	_, err = c.GetMicrovm(ctx, id)
//	if errors.Is(err, microvms.ErrNotFound) {
//		// gone
//	}
package microvms
