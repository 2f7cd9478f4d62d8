package microvms

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// RunMicrovm launches a microVM from an image version and returns it,
// normally in state PENDING.
//
// When in.ClientToken is empty a random one (a UUID v4) is generated for
// this call, so the client's own retries cannot launch two microVMs; in is
// not modified. Set ClientToken yourself to make retries of the whole call
// idempotent too.
func (c *Client) RunMicrovm(ctx context.Context, in *microvmsapi.RunMicrovmInput) (*microvmsapi.Microvm, error) {
	const op = OpRunMicrovm
	if err := validateRun(in); err != nil {
		return nil, err
	}
	body := *in
	if body.ClientToken == "" {
		body.ClientToken = newUUID()
	}
	b, err := json.Marshal(&body)
	if err != nil {
		return nil, invalid(op, "cannot encode input: "+err.Error())
	}
	var out microvmsapi.Microvm
	if err := c.call(ctx, request{op: op, method: http.MethodPost, path: microvmsapi.PathMicrovms, body: b}, &out); err != nil {
		return nil, err
	}
	if out.MicrovmID == "" {
		return nil, &APIError{Kind: KindInternal, Operation: string(op), Reason: "response has no microvmId"}
	}
	return &out, nil
}

// GetMicrovm returns the microVM with the given id. Its state is eventually
// consistent.
func (c *Client) GetMicrovm(ctx context.Context, id string) (*microvmsapi.Microvm, error) {
	const op = OpGetMicrovm
	if err := validateID(op, id); err != nil {
		return nil, err
	}
	var out microvmsapi.Microvm
	if err := c.call(ctx, request{op: op, method: http.MethodGet, path: microvmsapi.MicrovmPath(id)}, &out); err != nil {
		return nil, err
	}
	if out.MicrovmID == "" {
		return nil, &APIError{Kind: KindInternal, Operation: string(op), Reason: "response has no microvmId"}
	}
	return &out, nil
}

// ListInput selects a page of [Client.ListMicrovms].
type ListInput struct {
	// MaxResults is the page size, 1 to 50; 0 leaves it to the service.
	MaxResults int
	// NextToken continues a previous listing.
	NextToken string
	// ImageIdentifier and ImageVersion filter by image; "" means any.
	ImageIdentifier string
	ImageVersion    string
}

// ListMicrovms returns one page of microVMs. Terminated microVMs stay
// listed for at least 20 minutes. See [Client.ListAll] for every page.
func (c *Client) ListMicrovms(ctx context.Context, in ListInput) (*microvmsapi.ListMicrovmsOutput, error) {
	const op = OpListMicrovms
	if in.MaxResults != 0 && (in.MaxResults < 1 || in.MaxResults > microvmsapi.MaxListResults) {
		return nil, invalid(op, "maxResults must be between 1 and "+strconv.Itoa(microvmsapi.MaxListResults))
	}
	q := url.Values{}
	if in.MaxResults != 0 {
		q.Set(microvmsapi.QueryMaxResults, strconv.Itoa(in.MaxResults))
	}
	if in.NextToken != "" {
		q.Set(microvmsapi.QueryNextToken, in.NextToken)
	}
	if in.ImageIdentifier != "" {
		q.Set(microvmsapi.QueryImageIdentifier, in.ImageIdentifier)
	}
	if in.ImageVersion != "" {
		q.Set(microvmsapi.QueryImageVersion, in.ImageVersion)
	}
	// url.Values.Encode writes a space as '+'; AWS wants %20 (a literal '+'
	// is already %2B).
	query := strings.ReplaceAll(q.Encode(), "+", "%20")
	var out microvmsapi.ListMicrovmsOutput
	if err := c.call(ctx, request{op: op, method: http.MethodGet, path: microvmsapi.PathMicrovms, query: query}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListAll returns every microVM matching in, following nextToken from
// in.NextToken on; in.MaxResults is the page size. Iteration stops at the
// first error, which is yielded with a zero summary.
//
//	for vm, err := range c.ListAll(ctx, microvms.ListInput{}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(vm.MicrovmID, vm.State)
//	}
func (c *Client) ListAll(ctx context.Context, in ListInput) iter.Seq2[microvmsapi.MicrovmSummary, error] {
	return func(yield func(microvmsapi.MicrovmSummary, error) bool) {
		page := in
		for {
			out, err := c.ListMicrovms(ctx, page)
			if err != nil {
				yield(microvmsapi.MicrovmSummary{}, err)
				return
			}
			for _, it := range out.Items {
				if !yield(it, nil) {
					return
				}
			}
			if out.NextToken == "" {
				return
			}
			if out.NextToken == page.NextToken {
				yield(microvmsapi.MicrovmSummary{}, &APIError{
					Kind: KindInternal, Operation: string(OpListMicrovms),
					Reason: "service returned the same nextToken again",
				})
				return
			}
			page.NextToken = out.NextToken
		}
	}
}

// TerminateMicrovm terminates a microVM.
//
// Terminate, Suspend and Resume are idempotent in practice (a repeat gets
// 200), but the service's documentation promises a ConflictException
// ([KindConflict]) for a microVM in the wrong state, so handle both.
func (c *Client) TerminateMicrovm(ctx context.Context, id string) error {
	const op = OpTerminateMicrovm
	if err := validateID(op, id); err != nil {
		return err
	}
	return c.call(ctx, request{op: op, method: http.MethodDelete, path: microvmsapi.MicrovmPath(id)}, nil)
}

// SuspendMicrovm suspends a running microVM (its suspend hook runs first).
func (c *Client) SuspendMicrovm(ctx context.Context, id string) error {
	const op = OpSuspendMicrovm
	if err := validateID(op, id); err != nil {
		return err
	}
	return c.call(ctx, request{op: op, method: http.MethodPost, path: microvmsapi.SuspendPath(id)}, nil)
}

// ResumeMicrovm resumes a suspended microVM.
func (c *Client) ResumeMicrovm(ctx context.Context, id string) error {
	const op = OpResumeMicrovm
	if err := validateID(op, id); err != nil {
		return err
	}
	return c.call(ctx, request{op: op, method: http.MethodPost, path: microvmsapi.ResumePath(id)}, nil)
}

// CreateMicrovmAuthToken mints a token for the microVM's endpoint proxy,
// valid for in.ExpirationInMinutes (1 to 60) on in.AllowedPorts, and
// returns the value to send in the x-aws-proxy-auth header.
//
// It refuses, without calling the service, allPorts and any port or range
// that covers the lifecycle hook port 9000: a token reaching 9000 could
// drive the sandbox's suspend, resume and terminate hooks. The service
// allows 50 calls per second, so cache tokens.
func (c *Client) CreateMicrovmAuthToken(ctx context.Context, id string, in *microvmsapi.CreateMicrovmAuthTokenInput) (string, error) {
	const op = OpCreateMicrovmAuthToken
	if err := validateID(op, id); err != nil {
		return "", err
	}
	if err := validateAuthToken(in); err != nil {
		return "", err
	}
	body := *in
	if body.AllowedPorts == nil {
		body.AllowedPorts = []microvmsapi.AllowedPort{}
	}
	b, err := json.Marshal(&body)
	if err != nil {
		return "", invalid(op, "cannot encode input: "+err.Error())
	}
	var out microvmsapi.CreateMicrovmAuthTokenOutput
	if err := c.call(ctx, request{op: op, method: http.MethodPost, path: microvmsapi.AuthTokenPath(id), body: b}, &out); err != nil {
		return "", err
	}
	if v := out.AuthToken[microvmsapi.AuthTokenResponseKey]; v != "" {
		return v, nil
	}
	for k, v := range out.AuthToken {
		if strings.EqualFold(k, microvmsapi.AuthTokenResponseKey) && v != "" {
			return v, nil
		}
	}
	return "", &APIError{
		Kind: KindInternal, Operation: string(op),
		Reason: "response has no " + microvmsapi.AuthTokenResponseKey + " token",
	}
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // never fails (crypto/rand crashes the program instead)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
