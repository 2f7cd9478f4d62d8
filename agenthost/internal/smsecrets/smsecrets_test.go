package smsecrets

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/rayito-dev/rayito/agenthost/secretenv"
)

// TestWire: one GetSecretValue per secret, exactly (Secrets Manager's
// JSON protocol: the target header and the SecretId body), signed; AWS
// errors become closed codes without AWS's message.
func TestWire(t *testing.T) {
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gh-AbCdEf"
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-Amz-Target")+" "+string(body))
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
			t.Errorf("unsigned: %q", r.Header.Get("Authorization"))
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		switch {
		case strings.Contains(string(body), "zq-missing"):
			w.WriteHeader(400)
			io.WriteString(w, `{"__type":"ResourceNotFoundException","Message":"Secrets Manager can't find the specified secret missing"}`)
		case strings.Contains(string(body), "zq-denied"):
			w.WriteHeader(400)
			io.WriteString(w, `{"__type":"AccessDeniedException","Message":"User is not authorized on denied"}`)
		case strings.Contains(string(body), "zq-binary"):
			io.WriteString(w, `{"ARN":"x","Name":"binary","SecretBinary":"AAE="}`)
		case strings.Contains(string(body), "zq-broken"):
			w.WriteHeader(500)
			io.WriteString(w, `{"__type":"InternalServiceError","Message":"broken"}`)
		default:
			io.WriteString(w, `{"ARN":"`+arn+`","Name":"gh","SecretString":"value-1"}`)
		}
	}))
	defer srv.Close()
	api := secretsmanager.New(secretsmanager.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
	})
	src := &Source{API: api}
	v, err := src.SecretString(context.Background(), arn)
	if err != nil || v != "value-1" {
		t.Fatalf("%q %v", v, err)
	}
	if want := "POST / secretsmanager.GetSecretValue {\"SecretId\":\"" + arn + "\"}"; len(got) != 1 || got[0] != want {
		t.Errorf("wire %q, want %q", got, want)
	}
	for id, code := range map[string]string{
		"zq-missing": secretenv.CodeNotFound, "zq-denied": secretenv.CodeDenied,
		"zq-binary": secretenv.CodeValueInvalid, "zq-broken": secretenv.CodeFetchFailed,
	} {
		_, err := src.SecretString(context.Background(), id)
		var se *secretenv.Error
		if !errors.As(err, &se) || se.Code != code || strings.Contains(err.Error(), id) {
			t.Errorf("%s: %v", id, err)
		}
	}
}
