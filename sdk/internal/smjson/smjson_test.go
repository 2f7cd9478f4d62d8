package smjson

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
)

func testClient(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return New(aws.Config{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), HTTPClient: srv.Client(),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET"}, nil
		}),
	})
}

// The wire: the target header, the JSON body, a SigV4 signature for
// secretsmanager; a binary secret wins over its string; an error answer
// is a smithy.APIError of the exception's name.
func TestWire(t *testing.T) {
	ctx := context.Background()
	var got []string
	c := testClient(t, func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(data, &body)
		target := r.Header.Get("X-Amz-Target")
		got = append(got, target)
		if !strings.Contains(r.Header.Get("Authorization"), "/us-east-1/secretsmanager/aws4_request") {
			t.Errorf("unsigned: %q", r.Header.Get("Authorization"))
		}
		switch target {
		case "secretsmanager.GetSecretValue":
			if body["SecretId"] == "missing" {
				w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException:http://internal")
				w.WriteHeader(400)
				_, _ = io.WriteString(w, `{"__type":"com.amazonaws#ResourceNotFoundException","message":"no"}`)
				return
			}
			_, _ = io.WriteString(w, `{"SecretBinary":"a2V5","SecretString":"str"}`)
		case "secretsmanager.CreateSecret":
			if body["Name"] != "webhooks/x" || body["SecretString"] != "s" || len(body["Tags"].([]any)) != 1 {
				t.Errorf("create body: %v", body)
			}
			_, _ = io.WriteString(w, `{}`)
		case "secretsmanager.DeleteSecret":
			if body["SecretId"] != "webhooks/x" || body["ForceDeleteWithoutRecovery"] != true {
				t.Errorf("delete body: %v", body)
			}
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"__type":"AccessDeniedException"}`)
		}
	})
	v, err := c.GetSecretValue(ctx, "arn")
	if err != nil || string(v) != "key" {
		t.Fatalf("get: %q %v", v, err)
	}
	_, err = c.GetSecretValue(ctx, "missing")
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ResourceNotFoundException" {
		t.Fatalf("missing: %v", err)
	}
	if err := c.CreateSecret(ctx, CreateSecretInput{Name: "webhooks/x", SecretString: "s", Tags: []Tag{{Key: "k", Value: "v"}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSecret(ctx, "webhooks/x", true); !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" {
		t.Fatalf("delete: %v", err)
	}
	if len(got) != 4 {
		t.Fatalf("calls: %v", got)
	}
}

func TestNoRegion(t *testing.T) {
	if _, err := New(aws.Config{}).GetSecretValue(context.Background(), "x"); err == nil {
		t.Fatal("no region, no error")
	}
}

// FuzzAPIError: any answer body and error header give an APIError with a
// code, and no panic.
func FuzzAPIError(f *testing.F) {
	f.Add("", `{"__type":"a#B:c","message":"m"}`)
	f.Add("X:y", `not json`)
	f.Fuzz(func(t *testing.T, header, body string) {
		resp := &http.Response{StatusCode: 400, Header: http.Header{}}
		resp.Header.Set("X-Amzn-Errortype", header)
		var ae *APIError
		if err := apiError(resp, []byte(body)); !errors.As(err, &ae) || ae.Code == "" {
			t.Fatalf("%v", err)
		}
	})
}
