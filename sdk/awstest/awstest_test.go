package awstest_test

import (
	"context"
	"testing"

	"github.com/rayito-dev/rayito/sdk/awstest"
)

func TestDynalite(t *testing.T) {
	c := awstest.Dynalite(t)
	out, err := c.ListTables(context.Background(), nil)
	if err != nil || len(out.TableNames) != 0 {
		t.Fatalf("ListTables: %v, %v", out, err)
	}
}
