package delta

import "testing"

func TestCanonicalFilePath(t *testing.T) {
	loc := parseFilePath("file:///data/wh/t")
	s3 := parseFilePath("s3://bucket/wh/t")
	for _, tc := range []struct {
		in   string
		loc  *filePath
		want string
	}{
		{"part-0.parquet", &loc, "part-0.parquet"},
		{"x%20y/part%2D0.parquet", &loc, "x%20y/part-0.parquet"},
		{"x y/part-0.parquet", nil, "x%20y/part-0.parquet"},
		{"time=1971-07-22T03:06:40.000000Z/part-0.parquet", &loc, "time=1971-07-22T03:06:40.000000Z/part-0.parquet"},
		{"time=1971-07-22T03%3A06%3A40.000000Z/part-0.parquet", &loc, "time=1971-07-22T03:06:40.000000Z/part-0.parquet"},
		{"p=2021-09-08%2011%253A11%253A11/f.parquet", &loc, "p=2021-09-08%2011%253A11%253A11/f.parquet"},
		{"100%done.parquet", &loc, "100%25done.parquet"},
		{"/some/unqualified/absolute/path", &loc, "file:///some/unqualified/absolute/path"},
		{"file:/some/unqualified/absolute/path", &loc, "file:///some/unqualified/absolute/path"},
		{"file:///some/unqualified/absolute/path", &loc, "file:///some/unqualified/absolute/path"},
		{"file://localhost/some/unqualified/absolute/path", nil, "file:///some/unqualified/absolute/path"},
		{"/some/unqualified/with%20space/p@%23h", nil, "file:///some/unqualified/with%20space/p@%23h"},
		{"file:/some/unqualified/with%20space/p@%23h", &loc, "file:///some/unqualified/with%20space/p@%23h"},
		{"file:///data/wh/t/x/part-0.parquet", &loc, "x/part-0.parquet"},
		{"file:/data/wh/t/x%20y/part-0.parquet", &loc, "x%20y/part-0.parquet"},
		{"/data/wh/t/part-0.parquet", &loc, "part-0.parquet"},
		{"/data/wh/t2/part-0.parquet", &loc, "file:///data/wh/t2/part-0.parquet"},
		{"s3://bucket/wh/t/part-0.parquet", &s3, "part-0.parquet"},
		{"S3://bucket/wh/t/part-0.parquet", &s3, "part-0.parquet"},
		{"/wh/t/part-0.parquet", &s3, "part-0.parquet"},
		{"s3://other/wh/t/part-0.parquet", &s3, "s3://other/wh/t/part-0.parquet"},
		{"s3://bucket/wh/t/part-0.parquet", &loc, "s3://bucket/wh/t/part-0.parquet"},
	} {
		if got := canonicalFilePath(tc.in, tc.loc); got != tc.want {
			t.Errorf("canonicalFilePath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
