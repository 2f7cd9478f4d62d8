package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	rayito "github.com/rayito-dev/rayito/sdk"
)

type awsCall struct {
	target string
	body   map[string]any
}

func awsTestStore(t *testing.T, answer func(target string) (int, string)) (*AWSStore, func() []awsCall) {
	var mu sync.Mutex
	var calls []awsCall
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(data, &body)
		target := r.Header.Get("X-Amz-Target")
		mu.Lock()
		calls = append(calls, awsCall{target, body})
		mu.Unlock()
		code, resp := answer(target)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, resp)
	}))
	t.Cleanup(srv.Close)
	cfg := aws.Config{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		HTTPClient:   srv.Client(),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET"}, nil
		}),
	}
	return NewAWSStore(cfg), func() []awsCall { mu.Lock(); defer mu.Unlock(); return append([]awsCall(nil), calls...) }
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestAWSSecretStoreWire(t *testing.T) {
	ctx := context.Background()
	s, calls := awsTestStore(t, func(target string) (int, string) {
		switch target {
		case "secretsmanager.CreateSecret", "secretsmanager.PutSecretValue":
			return 200, `{"Name":"rayito/db/pw"}`
		case "secretsmanager.GetSecretValue":
			return 200, `{"Name":"rayito/db/pw","SecretString":"` + secretCanary + `","VersionId":"11111111-1111-4111-8111-111111111111","CreatedDate":1700000000}`
		case "secretsmanager.ListSecrets":
			return 200, `{"SecretList":[{"Name":"rayito/z"},{"Name":"other"},{"Name":"rayito/a","SecretVersionsToStages":{"v-cur":["AWSCURRENT"],"v-old":["AWSPREVIOUS"]}}]}`
		}
		return 200, `{}`
	})
	info, err := s.CreateSecret(ctx, "db/pw", []byte(secretCanary))
	if err != nil || !uuidV4.MatchString(info.Version) {
		t.Fatal(info, err)
	}
	up, err := s.UpdateSecret(ctx, "db/pw", []byte{0xff, 0x00})
	if err != nil || !uuidV4.MatchString(up.Version) || up.Version == info.Version {
		t.Fatal(up, err)
	}
	sec, err := s.GetSecret(ctx, Ref{Name: "db/pw", Version: "11111111-1111-4111-8111-111111111111"})
	if err != nil || string(sec.Value()) != secretCanary || sec.Version != "11111111-1111-4111-8111-111111111111" || sec.CreatedAt.Unix() != 1700000000 {
		t.Fatal(sec, err)
	}
	if _, err := s.GetSecret(ctx, Ref{Name: "db/pw"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSecret(ctx, "db/pw"); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListSecrets(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "a" || list[0].Version != "v-cur" || list[1].Name != "z" {
		t.Fatal(list, err)
	}
	got := calls()
	want := []struct {
		target string
		fields map[string]any
		absent []string
	}{
		{"secretsmanager.CreateSecret", map[string]any{"Name": "rayito/db/pw", "SecretString": secretCanary, "ClientRequestToken": info.Version}, []string{"SecretBinary"}},
		{"secretsmanager.PutSecretValue", map[string]any{"SecretId": "rayito/db/pw", "SecretBinary": "/wA=", "ClientRequestToken": up.Version}, []string{"SecretString"}},
		{"secretsmanager.GetSecretValue", map[string]any{"SecretId": "rayito/db/pw", "VersionId": "11111111-1111-4111-8111-111111111111"}, nil},
		{"secretsmanager.GetSecretValue", map[string]any{"SecretId": "rayito/db/pw"}, []string{"VersionId"}},
		{"secretsmanager.DeleteSecret", map[string]any{"SecretId": "rayito/db/pw", "ForceDeleteWithoutRecovery": true}, nil},
		{"secretsmanager.ListSecrets", nil, nil},
	}
	if len(got) != len(want) {
		t.Fatalf("%d calls, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].target != w.target {
			t.Errorf("call %d: %s, want %s", i, got[i].target, w.target)
		}
		for k, v := range w.fields {
			if got[i].body[k] != v {
				t.Errorf("%s: %s = %v, want %v", w.target, k, got[i].body[k], v)
			}
		}
		for _, k := range w.absent {
			if _, ok := got[i].body[k]; ok {
				t.Errorf("%s: has %s", w.target, k)
			}
		}
	}
	filters, _ := json.Marshal(got[5].body["Filters"])
	if string(filters) != `[{"Key":"name","Values":["rayito/"]}]` {
		t.Errorf("Filters = %s", filters)
	}
}

func TestAWSSecretStoreErrors(t *testing.T) {
	ctx := context.Background()
	const raw = "raw-aws-message-" + secretCanary
	typ := "ResourceNotFoundException"
	s, _ := awsTestStore(t, func(string) (int, string) {
		return 400, `{"__type":"` + typ + `","message":"` + raw + `"}`
	})
	check := func(err error, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%v, want %v", err, want)
		}
		if err != nil && (strings.Contains(err.Error(), raw) || strings.Contains(err.Error(), secretCanary)) {
			t.Errorf("error leaks: %v", err)
		}
	}
	_, err := s.GetSecret(ctx, Ref{Name: "x"})
	check(err, rayito.ErrSecretNotFound)
	_, err = s.UpdateSecret(ctx, "x", []byte(secretCanary))
	check(err, rayito.ErrSecretNotFound)
	check(s.DeleteSecret(ctx, "x"), rayito.ErrSecretNotFound)
	typ = "ResourceExistsException"
	_, err = s.CreateSecret(ctx, "x", []byte(secretCanary))
	check(err, rayito.ErrSecretExists)
	typ = "com.amazonaws#AccessDeniedException"
	_, err = s.CreateSecret(ctx, "x", []byte(secretCanary))
	check(err, rayito.ErrPermissionDenied)
	if err == nil || !strings.Contains(err.Error(), "CreateSecret") || !strings.Contains(err.Error(), "AccessDeniedException") {
		t.Errorf("summary: %v", err)
	}
	typ = "InternalServiceError"
	_, err = s.ListSecrets(ctx)
	if err == nil || err.Error() != "rayito: secrets manager ListSecrets failed: InternalServiceError" || strings.Contains(err.Error(), raw) {
		t.Errorf("summary: %v", err)
	}
}
