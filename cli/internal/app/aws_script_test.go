package app

import (
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

// TestAWSScripts runs testdata/aws/*.txtar: golden output of the commands
// that call AWS (image publish, list, prune; doctor --aws), run as a
// user would, against a MicroVMs fake and an in-process S3 (gofakes3)
// that each script gets for itself, reached through the AWS SDK's own
// environment variables. S3 has one bucket, rayito-artifacts.
func TestAWSScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/aws",
		Setup: func(e *testscript.Env) error {
			mv, err := microvmstest.New(microvmstest.Options{Polls: 3})
			if err != nil {
				return err
			}
			e.Defer(mv.Close)
			be := s3mem.New()
			if err := be.CreateBucket("rayito-artifacts"); err != nil {
				return err
			}
			s3 := httptest.NewServer(gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
			e.Defer(s3.Close)
			e.Values["mv"] = mv
			for k, v := range map[string]string{
				"AWS_CONFIG_FILE":             filepath.Join(e.WorkDir, ".aws-config"),
				"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(e.WorkDir, ".aws-credentials"),
				"AWS_ACCESS_KEY_ID":           microvmstest.DefaultAccessKeyID,
				"AWS_SECRET_ACCESS_KEY":       microvmstest.DefaultSecretAccessKey,
				"AWS_REGION":                  microvmstest.DefaultRegion,
				"AWS_ENDPOINT_URL":            mv.URL(),
				"AWS_ENDPOINT_URL_S3":         s3.URL,
				"AWS_EC2_METADATA_DISABLED":   "true",
				"ROLE":                        mv.RoleARN("rayito-build"),
				"ARN_PREFIX":                  mv.ImageARN(""),
			} {
				e.Setenv(k, v)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// status N CMD [ARGS...]: run CMD and want exit status N.
			"status": cmdStatus,
			// fakeaws addimage NAME | failbuilds N | runvm NAME VERSION |
			// requests N: script the MicroVMs fake, or check how many
			// control-plane requests it got.
			"fakeaws": func(ts *testscript.TestScript, neg bool, args []string) {
				mv := ts.Value("mv").(*microvmstest.Server)
				if neg || len(args) < 2 {
					ts.Fatalf("usage: fakeaws addimage NAME | failbuilds N | runvm NAME VERSION | requests N")
				}
				switch args[0] {
				case "addimage":
					mv.AddImage(args[1])
				case "failbuilds":
					n, _ := strconv.Atoi(args[1])
					mv.FailBuilds(n)
				case "runvm":
					c, err := mv.Client()
					ts.Check(err)
					_, err = c.RunMicrovm(t.Context(), &microvmsapi.RunMicrovmInput{ImageIdentifier: mv.ImageARN(args[1]), ImageVersion: args[2],
						Logging: &microvmsapi.Logging{Disabled: &struct{}{}}})
					ts.Check(err)
				case "requests":
					n, _ := strconv.Atoi(args[1])
					var got int
					for _, r := range mv.Requests() {
						if r.Op != microvms.OpRunMicrovm {
							got++
						}
					}
					if got != n {
						ts.Fatalf("%d control-plane requests, want %d", got, n)
					}
				default:
					ts.Fatalf("fakeaws: unknown %q", args[0])
				}
			},
		},
	})
}
