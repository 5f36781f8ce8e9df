package localstack

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/ferry-dev/ferry/internal/crc32c"
)

func startGCS(t testing.TB, o GCSOptions) (*GCS, *storage.Client) {
	t.Helper()
	g, err := StartGCSWith(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	g.CreateBucket("b")
	c, err := storage.NewClient(context.Background(), option.WithEndpoint("http://"+g.Host+"/storage/v1/"),
		option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return g, c
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func put(t testing.TB, c *storage.Client, name string, data []byte) {
	t.Helper()
	w := c.Bucket("b").Object(name).NewWriter(context.Background())
	w.ChunkSize = 0
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("upload %s: %v", name, err)
	}
}

func read(t testing.TB, c *storage.Client, name string) []byte {
	t.Helper()
	r, err := c.Bucket("b").Object(name).NewReader(context.Background())
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}

// composeAll composes srcs into dst the way ferry's merger does.
func composeAll(t testing.TB, c *storage.Client, dst string, srcs []string, md map[string]string) *storage.ObjectAttrs {
	t.Helper()
	var hs []*storage.ObjectHandle
	for _, s := range srcs {
		hs = append(hs, c.Bucket("b").Object(s))
	}
	comp := c.Bucket("b").Object(dst).ComposerFrom(hs...)
	comp.ContentType = "application/zstd"
	comp.Metadata = md
	a, err := comp.Run(context.Background())
	if err != nil {
		t.Fatalf("compose %s: %v", dst, err)
	}
	return a
}

// The shim's compose must give what the fake's own gives: the same bytes,
// size, CRC32C (the one of the bytes), MD5, content type, metadata, and a
// new generation when the destination exists.
func TestFastComposeMatchesFake(t *testing.T) {
	sizes := []int{3 << 20, 0, 1, 70_001, 1 << 20}
	var want []byte
	for i, n := range sizes {
		want = append(want, randomBytes(n, uint64(i))...)
	}
	var srcs []string
	for i := range sizes {
		srcs = append(srcs, fmt.Sprintf("src/%d", i))
	}
	md := map[string]string{"ferry-raw-size": "123", "ferry-codec": "zstd"}
	type outcome struct {
		data          []byte
		attrs, second *storage.ObjectAttrs
	}
	run := func(stock bool) outcome {
		g, c := startGCS(t, GCSOptions{StockCompose: stock})
		off := 0
		for i, n := range sizes {
			put(t, c, srcs[i], want[off:off+n])
			off += n
		}
		a := composeAll(t, c, "dst", srcs, md)
		// Again onto the existing object, from a composite source.
		a2 := composeAll(t, c, "dst", []string{"dst", srcs[0]}, map[string]string{"k": "v"})
		if st := g.Stats(); st.ComposeCalls != 2 || st.FastCompose == stock {
			t.Errorf("stock=%v: stats %+v, want 2 compose calls and fast_compose %v", stock, st, !stock)
		}
		return outcome{data: read(t, c, "dst"), attrs: a, second: a2}
	}
	fake, fast := run(true), run(false)

	wantSecond := append(append([]byte{}, want...), want[:sizes[0]]...)
	for name, o := range map[string]outcome{"fake": fake, "shim": fast} {
		if !bytes.Equal(o.data, wantSecond) {
			t.Errorf("%s: composed bytes differ from the sources' concatenation", name)
		}
		if o.attrs.Size != int64(len(want)) || o.attrs.CRC32C != crc32c.Checksum(want) {
			t.Errorf("%s: size %d crc32c %08x, want %d %08x", name, o.attrs.Size, o.attrs.CRC32C, len(want), crc32c.Checksum(want))
		}
		sum := md5.Sum(want)
		if !bytes.Equal(o.attrs.MD5, sum[:]) {
			t.Errorf("%s: md5 %x, want %x", name, o.attrs.MD5, sum)
		}
		if o.second.CRC32C != crc32c.Checksum(wantSecond) || o.second.Generation <= o.attrs.Generation {
			t.Errorf("%s: recompose: crc32c %08x generation %d (first %d), want %08x and a newer generation",
				name, o.second.CRC32C, o.second.Generation, o.attrs.Generation, crc32c.Checksum(wantSecond))
		}
	}
	for _, f := range []struct {
		name      string
		fake, got any
	}{
		{"content type", fake.attrs.ContentType, fast.attrs.ContentType},
		{"metadata", fake.attrs.Metadata, fast.attrs.Metadata},
		{"recomposed content type", fake.second.ContentType, fast.second.ContentType},
		{"recomposed metadata", fake.second.Metadata, fast.second.Metadata},
		{"storage class", fake.attrs.StorageClass, fast.attrs.StorageClass},
	} {
		if fmt.Sprint(f.fake) != fmt.Sprint(f.got) {
			t.Errorf("%s: fake %v, shim %v", f.name, f.fake, f.got)
		}
	}
}

// Requests the fast path does not take answer as the fake does.
func TestFastComposeErrorsAreTheFakes(t *testing.T) {
	type answer struct {
		code int
		body string
	}
	post := func(host, body string) answer {
		resp, err := http.Post("http://"+host+"/storage/v1/b/b/o/dst/compose", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, string(b)}
	}
	var many []string
	for i := 0; i < 33; i++ {
		many = append(many, `{"name":"a"}`)
	}
	cases := map[string]string{
		"missing source": `{"sourceObjects":[{"name":"a"},{"name":"nope"}]}`,
		"33 sources":     `{"sourceObjects":[` + strings.Join(many, ",") + `]}`,
		"bad json":       `{"sourceObjects":[`,
	}
	got := map[bool]map[string]answer{}
	for _, stock := range []bool{true, false} {
		g, c := startGCS(t, GCSOptions{StockCompose: stock})
		put(t, c, "a", []byte("aaa"))
		got[stock] = map[string]answer{}
		for name, body := range cases {
			got[stock][name] = post(g.Host, body)
		}
	}
	for name := range cases {
		f, s := got[true][name], got[false][name]
		if f != s || f.code < 400 {
			t.Errorf("%s: fake answered %d %q, shim %d %q", name, f.code, f.body, s.code, s.body)
		}
	}
}

func TestDeleteAnswers204(t *testing.T) {
	g, c := startGCS(t, GCSOptions{})
	put(t, c, "dir/x", []byte("x"))
	del := func(name string) int {
		req, _ := http.NewRequest(http.MethodDelete, "http://"+g.Host+"/storage/v1/b/b/o/"+name, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := del("dir%2Fx"); code != http.StatusNoContent {
		t.Errorf("DELETE of an object: %d, want 204", code)
	}
	if code := del("dir%2Fx"); code != http.StatusNotFound {
		t.Errorf("DELETE of a missing object: %d, want 404", code)
	}
	if err := c.Bucket("b").Object("dir/x").Delete(context.Background()); err == nil {
		t.Error("the Go client deleted a missing object without error")
	}
}

func TestStatsEndpoint(t *testing.T) {
	g, c := startGCS(t, GCSOptions{})
	put(t, c, "a", []byte("abc"))
	composeAll(t, c, "d", []string{"a", "a"}, nil)
	resp, err := http.Get("http://" + g.Host + StatsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.ComposeCalls != 1 || st.ComposeBytes != 6 || !st.FastCompose || st.Requests < 2 {
		t.Errorf("stats %+v, want 1 compose call of 6 bytes, fast, and the upload counted", st)
	}
}

func TestTLS(t *testing.T) {
	g, _ := startGCS(t, GCSOptions{TLS: true})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(g.CertPEM) {
		t.Fatal("CertPEM holds no certificate")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c, err := storage.NewClient(context.Background(), option.WithEndpoint("https://"+g.TLSHost+"/storage/v1/"),
		option.WithHTTPClient(hc), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	put(t, c, "over-tls", []byte("secret"))
	if got := read(t, c, "over-tls"); string(got) != "secret" {
		t.Errorf("read back %q over TLS", got)
	}
}

// BenchmarkCompose composes 32 sources of FERRY_BENCH_COMPOSE_MB MiB (default
// 1) with the fake's compose and with the shim's.
func BenchmarkCompose(b *testing.B) {
	mb := 1
	if v, err := strconv.Atoi(os.Getenv("FERRY_BENCH_COMPOSE_MB")); err == nil && v > 0 {
		mb = v
	}
	data := randomBytes(mb<<20, 1)
	for _, stock := range []bool{true, false} {
		name := "shim"
		if stock {
			name = "fake"
		}
		b.Run(name, func(b *testing.B) {
			_, c := startGCS(b, GCSOptions{StockCompose: stock})
			var srcs []string
			for i := 0; i < 32; i++ {
				srcs = append(srcs, fmt.Sprintf("src/%d", i))
				put(b, c, srcs[i], data)
			}
			b.SetBytes(int64(32 * len(data)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				composeAll(b, c, fmt.Sprintf("dst/%d", i), srcs, nil)
				if err := c.Bucket("b").Object(fmt.Sprintf("dst/%d", i)).Delete(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUploadIntoAFullBucket uploads 10 KB objects into a bucket that
// already holds 0, 1,000 and 5,000 objects: fake-gcs-server's memory
// backend scans the bucket's objects on every write, so an upload costs more
// the fuller the bucket is, for every client alike (the small-files
// workload of make bench writes 5,000 objects).
func BenchmarkUploadIntoAFullBucket(b *testing.B) {
	data := randomBytes(10_000, 2)
	for _, held := range []int{0, 1000, 5000} {
		b.Run(fmt.Sprintf("holding-%d", held), func(b *testing.B) {
			_, c := startGCS(b, GCSOptions{})
			for i := 0; i < held; i++ {
				put(b, c, fmt.Sprintf("held/%d", i), data)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				put(b, c, fmt.Sprintf("new/%d", i), data)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "uploads/s")
		})
	}
}

// A listing that names no page size comes in pages of 1,000, as from GCS,
// not as fake-gcs-server's one response of every object: every object,
// in name order, and one request a page.
func TestListingsArePaged(t *testing.T) {
	for _, o := range []GCSOptions{{}, {StorageRoot: t.TempDir()}} {
		g, c := startGCS(t, o)
		const n = 2100
		for i := range n {
			g.srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "b", Name: fmt.Sprintf("p/%05d", i)}, Content: []byte("x")})
		}
		g.srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "b", Name: "q/other"}, Content: []byte("x")})
		resp, err := http.Get("http://" + g.Host + "/storage/v1/b/b/o?prefix=p/")
		if err != nil {
			t.Fatal(err)
		}
		var page listResponse
		err = json.NewDecoder(resp.Body).Decode(&page)
		_ = resp.Body.Close()
		if err != nil || len(page.Items) != listPage || !strings.HasPrefix(page.NextPageToken, listTokenPrefix) {
			t.Fatalf("first page: %d objects, token %q (%v); want %d and a token", len(page.Items), page.NextPageToken, err, listPage)
		}
		before := g.shim.Stats().Requests
		it := c.Bucket("b").Objects(context.Background(), &storage.Query{Prefix: "p/"})
		i := 0
		for {
			a, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("p/%05d", i); a.Name != want {
				t.Fatalf("object %d is %s, want %s", i, a.Name, want)
			}
			i++
		}
		if calls := g.shim.Stats().Requests - before; i != n || calls != 3 {
			t.Fatalf("listed %d objects in %d requests; want %d in 3", i, calls, n)
		}
	}
}
