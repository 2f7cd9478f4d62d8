package rayito

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/smithy-go"
)

// awsErrorCode is the exception name of an AWS API error ("" for any
// other error), letters and digits only.
func awsErrorCode(err error) string {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return ""
	}
	return sanitizeExceptionName(ae.ErrorCode())
}

// awsErr is the one mapping of an AWS service's error (Secrets Manager,
// DynamoDB) to the SDK's: the message holds the service, the operation
// and the exception's name only. The raw error is not kept: its message
// is AWS's, which may quote the request. A context's end stays reachable
// with errors.Is.
func awsErr(service, op string, err error) error {
	code := awsErrorCode(err)
	if code == "" {
		switch {
		case errors.Is(err, context.Canceled):
			return newError(ReasonCanceled, "rayito: "+service+" "+op+": canceled", context.Canceled)
		case errors.Is(err, context.DeadlineExceeded):
			return newError(ReasonTimeout, "rayito: "+service+" "+op+": timed out", context.DeadlineExceeded)
		}
		return newError(ReasonInternal, "rayito: "+service+" "+op+" failed (no answer, or no AWS credentials)")
	}
	reason := ReasonInternal
	switch code {
	case "ResourceNotFoundException":
		reason = ReasonNotFound
	case "InvalidParameterException", "InvalidRequestException", "MalformedPolicyDocumentException", "ValidationException":
		reason = ReasonInvalidArgument
	case "AccessDeniedException", "AccessDenied":
		reason = ReasonPermissionDenied
	case "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException", "IncompleteSignature", "MissingAuthenticationToken":
		reason = ReasonUnauthenticated
	case "ThrottlingException", "TooManyRequestsException", "ProvisionedThroughputExceededException", "RequestLimitExceeded":
		reason = ReasonRateLimited
	case "LimitExceededException":
		reason = ReasonResourceExhausted
	}
	return newError(reason, "rayito: "+service+" "+op+" failed: "+code)
}

// sanitizeExceptionName keeps an exception name's letters and digits (at
// most 64).
func sanitizeExceptionName(code string) string {
	var b strings.Builder
	for _, r := range code {
		if b.Len() >= 64 {
			break
		}
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "UnknownError"
	}
	return b.String()
}
