package s3_test

import (
	"context"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore/s3"
)

func TestConfigFromEnv(t *testing.T) {
	all := []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
		"AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT",
		"S3_FORCE_PATH_STYLE", "AWS_S3_FORCE_PATH_STYLE"}
	cases := []struct {
		name string
		env  map[string]string
		want s3.Config
	}{
		{"nothing set", nil, s3.Config{Secure: true}},
		{"keys, region, endpoint URL, path style",
			map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "TOK",
				"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://minio:9000", "S3_FORCE_PATH_STYLE": "true"},
			s3.Config{AccessKey: "AK", SecretKey: "SK", SessionToken: "TOK", Region: "eu-west-1",
				Endpoint: "http://minio:9000", PathStyle: true, Secure: true}},
		{"AWS_REGION wins over AWS_DEFAULT_REGION",
			map[string]string{"AWS_REGION": "a", "AWS_DEFAULT_REGION": "b"}, s3.Config{Region: "a", Secure: true}},
		{"AWS_DEFAULT_REGION alone", map[string]string{"AWS_DEFAULT_REGION": "b"}, s3.Config{Region: "b", Secure: true}},
		{"AWS_ENDPOINT_URL_S3 wins",
			map[string]string{"AWS_ENDPOINT_URL_S3": "https://s3.x", "AWS_ENDPOINT_URL": "https://y", "S3_ENDPOINT": "z:1"},
			s3.Config{Endpoint: "https://s3.x", Secure: true}},
		{"S3_ENDPOINT last", map[string]string{"S3_ENDPOINT": "z:1", "AWS_S3_FORCE_PATH_STYLE": "1"},
			s3.Config{Endpoint: "z:1", PathStyle: true, Secure: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range all {
				t.Setenv(k, c.env[k])
			}
			got, err := s3.ConfigFromEnv()
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("ConfigFromEnv()\n got: %+v\nwant: %+v", got, c.want)
			}
		})
	}
	t.Run("bad path style", func(t *testing.T) {
		t.Setenv("S3_FORCE_PATH_STYLE", "sometimes")
		if _, err := s3.ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "S3_FORCE_PATH_STYLE") {
			t.Fatalf("got err %v, want one naming S3_FORCE_PATH_STYLE", err)
		}
	})
}

func TestNew(t *testing.T) {
	cases := []struct {
		name    string
		cfg     s3.Config
		where   string // String() of the store, when New succeeds
		wantErr string
	}{
		{"URL endpoint", s3.Config{Bucket: "b", Prefix: "/wh/prod/", Endpoint: "http://127.0.0.1:9000"},
			"s3://b/wh/prod/ (http://127.0.0.1:9000)", ""},
		{"bare host, secure", s3.Config{Bucket: "b", Endpoint: "minio.local:9000", Secure: true},
			"s3://b/ (https://minio.local:9000)", ""},
		{"AWS default", s3.Config{Bucket: "b"}, "s3://b/ (https://s3.amazonaws.com)", ""},
		{"no bucket", s3.Config{}, "", "no bucket"},
		{"bad scheme", s3.Config{Bucket: "b", Endpoint: "ftp://x"}, "", "scheme must be http or https"},
		{"endpoint with path", s3.Config{Bucket: "b", Endpoint: "http://x/y"}, "", "no path"},
		{"bad prefix", s3.Config{Bucket: "b", Prefix: "a/../b"}, "", "invalid object key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := s3.New(c.cfg)
			switch {
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("New(%+v): got err %v, want one containing %q", c.cfg, err, c.wantErr)
			case c.wantErr == "" && err != nil:
				t.Fatalf("New(%+v): %v", c.cfg, err)
			case c.wantErr == "" && st.String() != c.where:
				t.Fatalf("New(%+v).String() = %q, want %q", c.cfg, st.String(), c.where)
			}
		})
	}
}

func TestCheckBucket(t *testing.T) {
	cfg := testenv.S3Config(t)
	ctx := context.Background()
	st, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CheckBucket(ctx); err != nil {
		t.Fatalf("CheckBucket on the test bucket: %v", err)
	}
	cfg.Bucket = "no-such-bucket-" + strings.ToLower(testenv.S3Prefix(t)[len("test/"):])[:20]
	st, err = s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CheckBucket(ctx); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("CheckBucket on a missing bucket: got err %v, want one saying it does not exist", err)
	}
}
