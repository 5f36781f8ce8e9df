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
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
// size, CRC32C (the one of the bytes), content type, metadata, and a new
// generation when the destination exists. The MD5 is the fake's on the
// memory backend; on the filesystem backend, as on Cloud Storage, a
// composite object has none.
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
	run := func(stock bool, root string) outcome {
		g, c := startGCS(t, GCSOptions{StockCompose: stock, StorageRoot: root})
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
	fake, fast, file := run(true, ""), run(false, ""), run(false, t.TempDir())

	wantSecond := append(append([]byte{}, want...), want[:sizes[0]]...)
	for name, o := range map[string]outcome{"fake": fake, "shim": fast, "shim on the filesystem": file} {
		if !bytes.Equal(o.data, wantSecond) {
			t.Errorf("%s: composed bytes differ from the sources' concatenation", name)
		}
		if o.attrs.Size != int64(len(want)) || o.attrs.CRC32C != crc32c.Checksum(want) {
			t.Errorf("%s: size %d crc32c %08x, want %d %08x", name, o.attrs.Size, o.attrs.CRC32C, len(want), crc32c.Checksum(want))
		}
		sum := md5.Sum(want)
		if name == "shim on the filesystem" {
			if len(o.attrs.MD5) != 0 || len(o.second.MD5) != 0 {
				t.Errorf("%s: md5 %x and %x, want none, as Cloud Storage gives a composite object", name, o.attrs.MD5, o.second.MD5)
			}
		} else if !bytes.Equal(o.attrs.MD5, sum[:]) {
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
		{"content type on the filesystem", fake.attrs.ContentType, file.attrs.ContentType},
		{"metadata on the filesystem", fake.attrs.Metadata, file.attrs.Metadata},
		{"recomposed content type on the filesystem", fake.second.ContentType, file.second.ContentType},
		{"recomposed metadata on the filesystem", fake.second.Metadata, file.second.Metadata},
		{"storage class on the filesystem", fake.attrs.StorageClass, file.attrs.StorageClass},
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
// 1) with the fake's compose and with the shim's, on the memory backend and
// on the filesystem backend (in the test's temporary directory).
func BenchmarkCompose(b *testing.B) {
	mb := 1
	if v, err := strconv.Atoi(os.Getenv("FERRY_BENCH_COMPOSE_MB")); err == nil && v > 0 {
		mb = v
	}
	data := randomBytes(mb<<20, 1)
	for _, v := range []struct {
		name  string
		stock bool
		fs    bool
	}{{"fake", true, false}, {"shim", false, false}, {"fake on the filesystem", true, true}, {"shim on the filesystem", false, true}} {
		b.Run(v.name, func(b *testing.B) {
			o := GCSOptions{StockCompose: v.stock}
			if v.fs {
				o.StorageRoot = b.TempDir()
			}
			_, c := startGCS(b, o)
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
		i := 0
		eachName(t, c, "p/", func(name string) {
			if want := fmt.Sprintf("p/%05d", i); name != want {
				t.Fatalf("object %d is %s, want %s", i, name, want)
			}
			i++
		})
		if calls := g.shim.Stats().Requests - before; i != n || calls != 3 {
			t.Fatalf("listed %d objects in %d requests; want %d in 3", i, calls, n)
		}
	}
}

// eachName calls fn with the name of every object under prefix in bucket
// b, as the storage client lists them.
func eachName(t testing.TB, c *storage.Client, prefix string, fn func(name string)) {
	t.Helper()
	it := c.Bucket("b").Objects(context.Background(), &storage.Query{Prefix: prefix})
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(a.Name)
	}
}

// listRaw pages through a listing of bucket b with query q by plain HTTP,
// as every client does, and returns the objects' resources as served.
func listRaw(t testing.TB, h http.Handler, q url.Values) []json.RawMessage {
	t.Helper()
	var items []json.RawMessage
	for {
		req := httptest.NewRequest(http.MethodGet, "http://gcs/storage/v1/b/b/o?"+q.Encode(), nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var page listResponse
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &page) != nil {
			t.Fatalf("list %s: %d %s", q.Encode(), rec.Code, rec.Body.Bytes())
		}
		for _, it := range page.Items {
			var c bytes.Buffer
			if err := json.Compact(&c, it); err != nil {
				t.Fatal(err)
			}
			items = append(items, c.Bytes())
		}
		if page.NextPageToken == "" {
			return items
		}
		q.Set("pageToken", page.NextPageToken)
	}
}

// On the filesystem backend the shim lists names from the directory tree
// and reads each object's resource as its page is served: what it serves
// must be the fake's own listing, resource for resource, for every prefix
// and offset a client can ask (names that sort apart from their directory
// order, prefixes inside a name, offsets, a prefix that holds nothing).
func TestFilesystemListingIsTheFakes(t *testing.T) {
	g, _ := startGCS(t, GCSOptions{StorageRoot: t.TempDir()})
	names := []string{"a!", "a-b", "a.b", "a/b/c", "a/b-c", "a/bc/d", "a0", "dir/x y", "dir/ünï", "pct%2Fname", "z/empty"}
	for i := range 1100 {
		names = append(names, fmt.Sprintf("p/%02d/%04d", i%7, i))
	}
	for i, n := range names {
		g.srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "b", Name: n, ContentType: "text/plain",
			Metadata: map[string]string{"i": strconv.Itoa(i)}}, Content: randomBytes(i%50, uint64(i))})
	}
	g.srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "other", Name: "a/b"}, Content: []byte("x")})
	fake := g.srv.HTTPHandler()
	for _, q := range []url.Values{
		{},
		{"prefix": {"a"}},
		{"prefix": {"a/"}},
		{"prefix": {"a/b"}},
		{"prefix": {"p/0"}},
		{"prefix": {"p/03/"}, "maxResults": {"100"}},
		{"prefix": {"p/"}, "startOffset": {"p/02/0100"}, "endOffset": {"p/05"}, "maxResults": {"50"}},
		{"startOffset": {"a/b"}},
		{"prefix": {"nothing/"}},
		{"prefix": {"dir/ü"}},
		{"prefix": {"../"}}, // not bucket "other"'s objects
		{"prefix": {"../other/"}},
		{"prefix": {"p/../a/"}},
	} {
		want := listRaw(t, fake, url.Values{"prefix": q["prefix"], "startOffset": q["startOffset"], "endOffset": q["endOffset"]})
		got := listRaw(t, g.shim, q)
		if len(got) != len(want) {
			t.Fatalf("list %s: the shim served %d objects, the fake %d", q.Encode(), len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("list %s: object %d is\n%s\nwhere the fake's is\n%s", q.Encode(), i, got[i], want[i])
			}
		}
	}
}

// An object deleted while a listing is being paged is not served on a
// later page; the objects after it still are.
func TestFilesystemListingSkipsDeletedObjects(t *testing.T) {
	g, c := startGCS(t, GCSOptions{StorageRoot: t.TempDir()})
	for i := range 1100 {
		g.srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "b", Name: fmt.Sprintf("o/%04d", i)}, Content: []byte("x")})
	}
	var got []string
	eachName(t, c, "o/", func(name string) {
		if len(got) == 10 { // the first page is served; delete from the second
			if err := c.Bucket("b").Object("o/1050").Delete(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		got = append(got, name)
	})
	if len(got) != 1099 || slices.Contains(got, "o/1050") || got[1098] != "o/1099" {
		t.Fatalf("listed %d objects (o/1050 among them: %v, last %s); want 1,099 without o/1050", len(got), slices.Contains(got, "o/1050"), got[len(got)-1])
	}
}

// BenchmarkListing lists a bucket of 20,000 objects on the filesystem
// backend, as the shim serves it and as fake-gcs-server pages it alone:
// the time to the first page (what a client waits before its first object)
// and objects listed a second. The fake reads every object's metadata for
// every page; the shim reads the names once, then 1,000 objects a page.
func BenchmarkListing(b *testing.B) {
	const n = 20_000
	g, _ := startGCS(b, GCSOptions{StorageRoot: b.TempDir()})
	for i := range n {
		g.srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "b", Name: fmt.Sprintf("d%02d/%06d", i%50, i)}, Content: []byte("x")})
	}
	for _, via := range []struct {
		name string
		h    http.Handler
	}{{"shim", g.shim}, {"fake", g.srv.HTTPHandler()}} {
		b.Run(via.name, func(b *testing.B) {
			var first time.Duration
			for range b.N {
				t0 := time.Now()
				q := url.Values{"maxResults": {"1000"}}
				listed := 0
				for {
					req := httptest.NewRequest(http.MethodGet, "http://gcs/storage/v1/b/b/o?"+q.Encode(), nil)
					rec := httptest.NewRecorder()
					via.h.ServeHTTP(rec, req)
					var page listResponse
					if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
						b.Fatal(err)
					}
					if listed == 0 {
						first += time.Since(t0)
					}
					listed += len(page.Items)
					if page.NextPageToken == "" {
						break
					}
					q.Set("pageToken", page.NextPageToken)
				}
				if listed != n {
					b.Fatalf("listed %d, want %d", listed, n)
				}
			}
			b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "ms/first-page")
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}

// The shim deletes a compose's sources when the request asks it to
// (deleteSourceObjects), as GCS does and fake-gcs-server does not, and only
// when the compose succeeded; through the fast path and the fake's own.
func TestComposeDeletesSourcesWhenAsked(t *testing.T) {
	for _, stock := range []bool{false, true} {
		_, c := startGCS(t, GCSOptions{StockCompose: stock})
		ctx := context.Background()
		put(t, c, "x/a", []byte("aa"))
		put(t, c, "x/b", []byte("bb"))
		composer := c.Bucket("b").Object("keep").ComposerFrom(c.Bucket("b").Object("x/a"), c.Bucket("b").Object("x/b"))
		if _, err := composer.Run(ctx); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"x/a", "x/b"} {
			if _, err := c.Bucket("b").Object(n).Attrs(ctx); err != nil {
				t.Errorf("stock %v: a plain compose deleted its source %s: %v", stock, n, err)
			}
		}
		composer = c.Bucket("b").Object("ab").ComposerFrom(c.Bucket("b").Object("x/a"), c.Bucket("b").Object("x/b"))
		composer.DeleteSourceObjects = true
		if _, err := composer.Run(ctx); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"x/a", "x/b"} {
			if _, err := c.Bucket("b").Object(n).Attrs(ctx); err == nil {
				t.Errorf("stock %v: source %s is still there after a compose with deleteSourceObjects", stock, n)
			}
		}
		if got := read(t, c, "ab"); string(got) != "aabb" {
			t.Errorf("stock %v: composed %q", stock, got)
		}
		// A failed compose (a source missing) deletes nothing.
		put(t, c, "x/c", []byte("cc"))
		composer = c.Bucket("b").Object("cd").ComposerFrom(c.Bucket("b").Object("x/c"), c.Bucket("b").Object("x/nope"))
		composer.DeleteSourceObjects = true
		if _, err := composer.Run(ctx); err == nil {
			t.Errorf("stock %v: a compose from a missing source succeeded", stock)
		}
		if _, err := c.Bucket("b").Object("x/c").Attrs(ctx); err != nil {
			t.Errorf("stock %v: a failed compose deleted its source: %v", stock, err)
		}
	}
}
