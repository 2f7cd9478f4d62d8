// Package smjson is the three AWS Secrets Manager calls the root package
// makes for lifecycle events (GetSecretValue of the events stack's key,
// CreateSecret and DeleteSecret of a webhook's signing secret), over the
// service's JSON protocol with SigV4 signing. It keeps the Secrets
// Manager client module out of the root package: only programs that
// import sdk/secrets link it.
package smjson

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go"
)

// maxResponse bounds an answer's body.
const maxResponse = 1 << 20

// Client calls Secrets Manager with an AWS configuration's credentials,
// region, endpoint (BaseEndpoint) and HTTP client.
type Client struct {
	cfg aws.Config
}

// New returns a Client of cfg.
func New(cfg aws.Config) *Client { return &Client{cfg: cfg} }

// APIError is an error answer of the service. It is a smithy.APIError,
// so the SDK's one mapping of AWS errors reads its exception name.
type APIError struct {
	Code    string
	Message string
	Status  int
}

func (e *APIError) Error() string {
	return fmt.Sprintf("secrets manager: %s (HTTP %d)", e.Code, e.Status)
}

// ErrorCode is the exception's name (e.g. ResourceNotFoundException).
func (e *APIError) ErrorCode() string { return e.Code }

// ErrorMessage is the service's message (it may quote the request: never
// logged by the SDK).
func (e *APIError) ErrorMessage() string { return e.Message }

// ErrorFault is smithy's fault kind: unknown.
func (e *APIError) ErrorFault() smithy.ErrorFault { return smithy.FaultUnknown }

var _ smithy.APIError = (*APIError)(nil)

// Tag is a secret's tag.
type Tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// CreateSecretInput is CreateSecret's request.
type CreateSecretInput struct {
	Name         string `json:"Name"`
	SecretString string `json:"SecretString,omitempty"`
	Description  string `json:"Description,omitempty"`
	Tags         []Tag  `json:"Tags,omitempty"`
}

// CreateSecret stores a new secret.
func (c *Client) CreateSecret(ctx context.Context, in CreateSecretInput) error {
	return c.call(ctx, "CreateSecret", in, nil)
}

// DeleteSecret removes a secret; force skips the recovery window.
func (c *Client) DeleteSecret(ctx context.Context, id string, force bool) error {
	in := struct {
		SecretID string `json:"SecretId"`
		Force    bool   `json:"ForceDeleteWithoutRecovery,omitempty"`
	}{id, force}
	return c.call(ctx, "DeleteSecret", in, nil)
}

// GetSecretValue reads a secret's current value: its SecretBinary, else
// its SecretString.
func (c *Client) GetSecretValue(ctx context.Context, id string) ([]byte, error) {
	in := struct {
		SecretID string `json:"SecretId"`
	}{id}
	var out struct {
		SecretBinary []byte  `json:"SecretBinary"`
		SecretString *string `json:"SecretString"`
	}
	if err := c.call(ctx, "GetSecretValue", in, &out); err != nil {
		return nil, err
	}
	if len(out.SecretBinary) == 0 && out.SecretString != nil {
		return []byte(*out.SecretString), nil
	}
	return out.SecretBinary, nil
}

// endpoint is BaseEndpoint, else the region's.
func (c *Client) endpoint() (string, error) {
	if c.cfg.BaseEndpoint != nil && *c.cfg.BaseEndpoint != "" {
		return strings.TrimSuffix(*c.cfg.BaseEndpoint, "/") + "/", nil
	}
	if c.cfg.Region == "" {
		return "", errors.New("secrets manager: no AWS region")
	}
	return "https://secretsmanager." + c.cfg.Region + ".amazonaws.com/", nil
}

// call posts one signed JSON request; out (when not nil) gets the answer.
func (c *Client) call(ctx context.Context, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	url, err := c.endpoint()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "secretsmanager."+op)
	if err := c.sign(ctx, req, body); err != nil {
		return err
	}
	var hc interface {
		Do(*http.Request) (*http.Response, error)
	} = http.DefaultClient
	if c.cfg.HTTPClient != nil {
		hc = c.cfg.HTTPClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return apiError(resp, data)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// sign signs req with SigV4 for secretsmanager in the configuration's
// region.
func (c *Client) sign(ctx context.Context, req *http.Request, body []byte) error {
	if c.cfg.Credentials == nil {
		return &APIError{Code: "MissingAuthenticationToken", Status: 0}
	}
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	return v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "secretsmanager", c.cfg.Region, time.Now())
}

// apiError reads the exception's name from the x-amzn-ErrorType header,
// else the body's __type (both may carry a namespace and a ':' suffix).
func apiError(resp *http.Response, data []byte) error {
	var b struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
		Msg     string `json:"Message"`
	}
	_ = json.Unmarshal(data, &b)
	code := resp.Header.Get("X-Amzn-Errortype")
	if code == "" {
		code = b.Type
	}
	if i := strings.LastIndexByte(code, '#'); i >= 0 {
		code = code[i+1:]
	}
	if i := strings.IndexByte(code, ':'); i >= 0 {
		code = code[:i]
	}
	if code == "" {
		code = "UnknownError"
	}
	msg := b.Message
	if msg == "" {
		msg = b.Msg
	}
	return &APIError{Code: code, Message: msg, Status: resp.StatusCode}
}
