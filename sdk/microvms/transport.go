package microvms

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// request is one API call, ready to be sent as many times as needed.
type request struct {
	op     Operation
	method string
	path   string // escaped, from microvmsapi
	query  string // encoded, without '?'
	body   []byte // nil: no body
}

type response struct {
	status int
	header http.Header
	body   []byte // at most maxResponseBodySize+1 bytes
}

// call sends r, retrying as the policy allows, and decodes a 2xx body into
// out (unless out is nil).
func (c *Client) call(ctx context.Context, r request, out any) error {
	var payloadHash string
	if c.creds != nil {
		sum := sha256.Sum256(r.body)
		payloadHash = hex.EncodeToString(sum[:])
	}
	target := c.endpoint + r.path
	if r.query != "" {
		target += "?" + r.query
	}

	var last error
	for attempt := 1; ; attempt++ {
		if err := c.wait(ctx, r.op); err != nil {
			return fmt.Errorf("microvms: %s: %w", r.op, err)
		}
		res, err := c.send(ctx, r, target, payloadHash)
		var retryAfter time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return fmt.Errorf("microvms: %s: %w", r.op, ctx.Err())
			}
			var ae *APIError
			if errors.As(err, &ae) {
				return ae // made up here (credentials, signing): final
			}
			last = fmt.Errorf("microvms: %s: %w", r.op, err)
		case res.status/100 == 2:
			return decode(r.op, res, out)
		default:
			ae := responseError(r.op, res.status, res.header, res.body, time.Now())
			if !retryable(ae) {
				return ae
			}
			last, retryAfter = ae, ae.RetryAfter
		}

		if attempt >= c.maxAttempts {
			return last
		}
		d := c.backoff(attempt)
		if retryAfter > 0 {
			if retryAfter > maxRetryAfter {
				return last
			}
			d = retryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return last
		}
		if err := c.sleep(ctx, d); err != nil {
			return fmt.Errorf("microvms: %s: %w", r.op, err)
		}
	}
}

// send makes one attempt: a fresh request, signed now, and its response
// body read up to the cap. Transport errors are returned as they are.
func (c *Client) send(ctx context.Context, r request, target, payloadHash string) (*response, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, &APIError{Kind: KindInternal, Operation: string(r.op), Reason: "building request", cause: err}
	}
	req.Header.Set("User-Agent", c.userAgent)
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.creds != nil {
		creds, err := c.creds.Retrieve(ctx)
		if err != nil {
			return nil, &APIError{Kind: KindAuthentication, Operation: string(r.op), Reason: "retrieving AWS credentials", cause: err}
		}
		req.Header.Set("X-Amz-Content-Sha256", payloadHash)
		err = c.signer.SignHTTP(ctx, creds, req, payloadHash, microvmsapi.SigningName, c.region, c.clock().UTC())
		if err != nil {
			return nil, &APIError{Kind: KindAuthentication, Operation: string(r.op), Reason: "signing request", cause: err}
		}
	}

	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBodySize+1))
	if err != nil {
		return nil, err
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func decode(op Operation, res *response, out any) error {
	fail := func(reason string, cause error) error {
		return &APIError{
			Kind: KindInternal, Operation: string(op), StatusCode: res.status,
			RequestID: requestID(res.header), Reason: reason, cause: cause,
		}
	}
	if len(res.body) > maxResponseBodySize {
		return fail("response body larger than 1 MiB", nil)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(res.body, out); err != nil {
		return fail("undecodable response body", err)
	}
	return nil
}

// backoff returns the full-jitter wait before retry number attempt (1 for
// the first retry).
func (c *Client) backoff(attempt int) time.Duration {
	ceil := c.backoffBase
	for i := 1; i < attempt && ceil < c.backoffMax; i++ {
		ceil *= 2
	}
	ceil = min(ceil, c.backoffMax)
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil)
}
