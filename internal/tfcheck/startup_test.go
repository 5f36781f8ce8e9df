package tfcheck

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// fakeGoogle serves what startup.sh asks of the metadata server and of
// Cloud Storage's JSON API, and records the downloads.
type fakeGoogle struct {
	metadata map[string]string
	objects  map[string][]byte // "bucket/object" → bytes
	mu       sync.Mutex
	fetched  []string
	// onFetch, when set, runs before each object download is answered,
	// with the count of downloads so far.
	onFetch func(n int)
	// Each access token the metadata server hands out is good for
	// tokenUses downloads (0: any number), as a real one expires.
	tokens    map[string]int
	issued    int
	tokenUses int
	// agentScript is Google's add-google-cloud-ops-agent-repo.sh; nil: its
	// host cannot be reached.
	agentScript []byte
}

func (f *fakeGoogle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasPrefix(r.URL.Path, "/computeMetadata/v1/"):
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "missing Metadata-Flavor", http.StatusForbidden)
			return
		}
		key := strings.TrimPrefix(r.URL.Path, "/computeMetadata/v1/")
		if key == "instance/service-accounts/default/token" {
			f.mu.Lock()
			f.issued++
			tok := fmt.Sprintf("tok-%d", f.issued)
			if f.tokens == nil {
				f.tokens = map[string]int{}
			}
			f.tokens[tok] = 0
			f.mu.Unlock()
			_, _ = fmt.Fprintf(w, `{"access_token":%q,"expires_in":3599,"token_type":"Bearer"}`, tok)
			return
		}
		v, ok := f.metadata[strings.TrimPrefix(key, "instance/attributes/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(v))
	case r.URL.Path == "/add-google-cloud-ops-agent-repo.sh":
		if f.agentScript == nil {
			http.Error(w, "unreachable", http.StatusBadGateway)
			return
		}
		_, _ = w.Write(f.agentScript)
	case strings.HasPrefix(r.URL.Path, "/storage/v1/b/"):
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		uses, ok := f.tokens[tok]
		valid := ok && (f.tokenUses == 0 || uses < f.tokenUses)
		f.tokens[tok] = uses + 1
		f.mu.Unlock()
		if !valid || r.URL.Query().Get("alt") != "media" {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		// The object name arrives %2F-escaped; RawPath keeps it so.
		p := strings.TrimPrefix(r.URL.EscapedPath(), "/storage/v1/b/")
		bucket, obj, _ := strings.Cut(p, "/o/")
		name := bucket + "/" + strings.ReplaceAll(obj, "%2F", "/")
		f.mu.Lock()
		f.fetched = append(f.fetched, name)
		if f.onFetch != nil {
			f.onFetch(len(f.fetched))
		}
		b, ok := f.objects[name]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

// startupFor returns the metadata Terraform gives binary's VMs in scenario,
// and a fake Google serving it with a release whose binary is payload.
func startupFor(t *testing.T, scenario, binary string, payload []byte, sums string) (*fakeGoogle, service) {
	t.Helper()
	ev := evaluate(t, "../../terraform", scenarios[scenario])
	svcs, problems := services(ev)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	var svc service
	for _, s := range svcs {
		if s.binary == binary {
			svc = s
		}
	}
	if svc.tmpl == nil {
		t.Fatalf("no template runs %s", binary)
	}
	f := &fakeGoogle{metadata: map[string]string{}, objects: map[string][]byte{}}
	for k, v := range svc.metadata {
		if k != "startup-script" {
			f.metadata[k] = v
		}
	}
	rel := strings.TrimPrefix(svc.metadata["ferry-release"], "gs://")
	f.objects[rel+"/"+binary] = payload
	f.objects[rel+"/SHA256SUMS"] = []byte(sums)
	return f, svc
}

func runStartup(t *testing.T, f *fakeGoogle, root string, env ...string) (string, error) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cmd := exec.Command("bash", "../../terraform/startup.sh")
	cmd.Env = append(append(os.Environ(), "FERRY_METADATA_URL="+srv.URL+"/computeMetadata/v1", "FERRY_STORAGE_URL="+srv.URL, "FERRY_ROOT="+root,
		"FERRY_OPS_AGENT_SCRIPT_URL="+srv.URL+"/add-google-cloud-ops-agent-repo.sh", "FERRY_STARTUP_RETRY_SECONDS=0"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func sumLine(name string, b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]) + "  " + name + "\n"
}

func TestStartupScriptInstallsTheReleaseAsConfigured(t *testing.T) {
	payload := []byte("#!/bin/sh\necho worker binary\n")
	f, svc := startupFor(t, "defaults", "worker", payload, sumLine("merger", []byte("x"))+sumLine("worker", payload))
	root := t.TempDir()
	out, err := runStartup(t, f, root)
	if err != nil {
		t.Fatalf("startup.sh: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(root, "opt/ferry/worker"))
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("installed binary %q, %v; want the release's", got, err)
	}
	if st, _ := os.Stat(filepath.Join(root, "opt/ferry/worker")); st.Mode().Perm() != 0o755 {
		t.Errorf("binary mode %v, want 0755", st.Mode().Perm())
	}
	env, _ := os.ReadFile(filepath.Join(root, "etc/ferry/env"))
	if string(env) != svc.metadata["ferry-env"]+"\n" {
		t.Errorf("env file:\n%s\nwant the ferry-env metadata:\n%s", env, svc.metadata["ferry-env"])
	}
	unit, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/ferry.service"))
	for _, want := range []string{"ExecStart=/opt/ferry/worker \n", "EnvironmentFile=/etc/ferry/env\n", "TimeoutStopSec=" + svc.metadata["ferry-stop-timeout"] + "\n", "KillSignal=SIGTERM\n", "User=ferry\n"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	cmds, _ := os.ReadFile(filepath.Join(root, "commands"))
	if !strings.Contains(string(cmds), "systemctl restart ferry.service") || strings.Contains(string(cmds), "mnt-ferry") {
		t.Errorf("commands:\n%s\nwant the unit restarted and no NFS mount (transport pubsub)", cmds)
	}
	rel := strings.TrimPrefix(svc.metadata["ferry-release"], "gs://")
	if strings.Join(f.fetched, " ") != rel+"/SHA256SUMS "+rel+"/worker" {
		t.Errorf("fetched %v", f.fetched)
	}
}

func TestStartupScriptMountsTheSpoolShare(t *testing.T) {
	payload := []byte("producer")
	f, svc := startupFor(t, "spool, filestore, kms, on-demand", "producer", payload, sumLine("producer", payload))
	f.metadata["ferry-nfs"] = "10.20.0.5:/ferry" // known after apply
	root := t.TempDir()
	out, err := runStartup(t, f, root)
	if err != nil {
		t.Fatalf("startup.sh: %v\n%s", err, out)
	}
	cmds, _ := os.ReadFile(filepath.Join(root, "commands"))
	install := strings.Index(string(cmds), "install -y -q -o Acquire::Retries=1 -o Acquire::http::Timeout=20 nfs-common")
	mount := strings.Index(string(cmds), "systemctl start mnt-ferry.mount")
	if mount < 0 || install < 0 || install > mount || !strings.Contains(string(cmds), "systemctl enable mnt-ferry.mount") {
		t.Errorf("commands:\n%s\nwant nfs-common installed (stock Debian has no NFS client), then the share's mount unit enabled and started", cmds)
	}
	mountUnit, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/mnt-ferry.mount"))
	for _, want := range []string{"What=10.20.0.5:/ferry\n", "Where=/mnt/ferry\n", "Type=nfs\n", "WantedBy=remote-fs.target\n"} {
		if !strings.Contains(string(mountUnit), want) {
			t.Errorf("mount unit lacks %q:\n%s", want, mountUnit)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/ferry.service"))
	if !strings.Contains(string(unit), "ExecStart=/opt/ferry/producer serve\n") || !strings.Contains(string(unit), "ReadWritePaths=/var/lib/ferry /mnt/ferry /var/log/ferry\n") ||
		!strings.Contains(string(unit), "RequiresMountsFor=/mnt/ferry\n") {
		t.Errorf("unit:\n%s\nwant the share writable and required: after a reboot the service never runs without it", unit)
	}
	if !strings.Contains(svc.metadata["ferry-env"], "FERRY_SPOOL_DIR=/mnt/ferry/spool") {
		t.Errorf("producer env %q does not spool on the share", svc.metadata["ferry-env"])
	}
}

// TestStartupScriptMountsTheSourceShareForTheAgent: an agent's VM runs
// `ferry agent` from the release's ferry, with the source share mounted
// read-only at the first source root and required by the service.
func TestStartupScriptMountsTheSourceShareForTheAgent(t *testing.T) {
	payload := []byte("ferry")
	f, svc := startupFor(t, "pool", "ferry-linux-amd64", payload, sumLine("worker", []byte("w"))+sumLine("ferry-linux-amd64", payload))
	root := t.TempDir()
	out, err := runStartup(t, f, root)
	if err != nil {
		t.Fatalf("startup.sh: %v\n%s", err, out)
	}
	if got, err := os.ReadFile(filepath.Join(root, "opt/ferry/ferry-linux-amd64")); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("installed binary %q, %v; want the release's ferry", got, err)
	}
	const unitName = `srv-nfs\x2ddata.mount` // systemd-escape --path --suffix=mount /srv/nfs-data
	cmds, _ := os.ReadFile(filepath.Join(root, "commands"))
	install := strings.Index(string(cmds), "nfs-common")
	mount := strings.Index(string(cmds), "systemctl start "+unitName)
	if mount < 0 || install < 0 || install > mount || !strings.Contains(string(cmds), "systemctl enable "+unitName) || strings.Contains(string(cmds), "mnt-ferry") {
		t.Errorf("commands:\n%s\nwant nfs-common installed, then %s enabled and started, and no spool share", cmds, unitName)
	}
	mountUnit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system", unitName))
	if err != nil {
		t.Fatalf("no mount unit %s: %v", unitName, err)
	}
	for _, want := range []string{"What=10.0.0.2:/exports/data\n", "Where=/srv/nfs-data\n", "Type=nfs\n", "Options=ro,hard,noatime,_netdev\n", "WantedBy=remote-fs.target\n"} {
		if !strings.Contains(string(mountUnit), want) {
			t.Errorf("mount unit lacks %q:\n%s", want, mountUnit)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/ferry.service"))
	if !strings.Contains(string(unit), "ExecStart=/opt/ferry/ferry-linux-amd64 agent\n") || !strings.Contains(string(unit), "RequiresMountsFor=/srv/nfs-data\n") ||
		!strings.Contains(string(unit), "ReadWritePaths=/var/lib/ferry /var/log/ferry\n") {
		t.Errorf("unit:\n%s\nwant ferry agent, the share required and not writable", unit)
	}
	if env := parseEnv(svc.metadata["ferry-env"]); env["FERRY_SOURCE_ROOTS"] != "/srv/nfs-data" {
		t.Errorf("agent env FERRY_SOURCE_ROOTS=%q, want the share's mount point", env["FERRY_SOURCE_ROOTS"])
	}
}

func TestStartupScriptRefusesABinaryWithTheWrongChecksum(t *testing.T) {
	payload := []byte("tampered")
	f, _ := startupFor(t, "defaults", "merger", payload, sumLine("merger", []byte("the real merger")))
	root := t.TempDir()
	out, err := runStartup(t, f, root)
	if err == nil || !strings.Contains(out, "refusing it") {
		t.Fatalf("startup.sh = %v, output %q; want it to refuse the binary", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "opt/ferry/merger")); !os.IsNotExist(err) {
		t.Fatalf("a refused binary was installed (%v)", err)
	}
}

func TestStartupScriptRefusesEnvThatIsNotFerrys(t *testing.T) {
	payload := []byte("worker")
	f, _ := startupFor(t, "defaults", "worker", payload, sumLine("worker", payload))
	f.metadata["ferry-env"] += "\nLD_PRELOAD=evil.so"
	out, err := runStartup(t, f, t.TempDir())
	if err == nil || !strings.Contains(out, `ferry-env line "LD_PRELOAD=evil.so"`) {
		t.Fatalf("startup.sh = %v, output %q; want the line refused", err, out)
	}
}

// Issue 18 §3: on a first deploy the release is uploaded after the VMs
// start; the script waits for it, saying why, instead of failing into an
// autohealing loop.
func TestStartupScriptWaitsForTheRelease(t *testing.T) {
	payload := []byte("worker")
	f, svc := startupFor(t, "defaults", "worker", payload, sumLine("worker", payload))
	rel := strings.TrimPrefix(svc.metadata["ferry-release"], "gs://")
	sums := f.objects[rel+"/SHA256SUMS"]
	delete(f.objects, rel+"/SHA256SUMS")
	f.onFetch = func(n int) {
		if n == 3 { // uploaded after two looks
			f.objects[rel+"/SHA256SUMS"] = sums
		}
	}
	root := t.TempDir()
	out, err := runStartup(t, f, root, "FERRY_RELEASE_RETRY_SECONDS=0")
	if err != nil {
		t.Fatalf("startup.sh: %v\n%s", err, out)
	}
	if n := strings.Count(out, "is not there yet: upload release v1.2.3 with make release"); n != 2 {
		t.Fatalf("output %q: want two waits that say why", out)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "opt/ferry/worker")); !bytes.Equal(got, payload) {
		t.Fatalf("installed %q after the wait", got)
	}
}

// Issue 18 §9: the Ops Agent is configured to ship the service's JSON logs
// with their severity and to scrape its /metrics.
func TestStartupScriptConfiguresTheOpsAgent(t *testing.T) {
	payload := []byte("merger")
	f, _ := startupFor(t, "defaults", "merger", payload, sumLine("merger", payload))
	f.agentScript = []byte("echo repository added\n")
	root := t.TempDir()
	if out, err := runStartup(t, f, root); err != nil {
		t.Fatalf("startup.sh: %v\n%s", err, out)
	}
	cfg, err := os.ReadFile(filepath.Join(root, "etc/google-cloud-ops-agent/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"include_paths: [/var/log/ferry/ferry.log]", "type: parse_json", "move_from: jsonPayload.severity",
		"type: prometheus", `targets: ["localhost:8080"]`} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("Ops Agent config lacks %q:\n%s", want, cfg)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/ferry.service"))
	cmds, _ := os.ReadFile(filepath.Join(root, "commands"))
	if !strings.Contains(string(unit), "StandardOutput=append:/var/log/ferry/ferry.log") || !strings.Contains(string(cmds), "systemctl restart google-cloud-ops-agent") {
		t.Errorf("unit:\n%s\ncommands:\n%s\nwant the log in the agent's file and the agent restarted", unit, cmds)
	}
	// Installed the way Google documents: its repository script, not
	// apt-get from Debian's mirrors, which do not carry the agent.
	if !regexp.MustCompile(`timeout 600 bash \S+/add-ops-agent-repo.sh --also-install`).Match(cmds) || strings.Contains(string(cmds), "apt-get install -y -q google-cloud-ops-agent") {
		t.Errorf("commands:\n%s\nwant the agent installed by Google's repository script", cmds)
	}
}

// Issue 28 §6 and §7: where the agent's repository cannot be reached (no
// NAT), the script tries a bounded number of times, says so in one line,
// and still runs the service.
func TestStartupScriptSaysOnceWhenTheAgentCannotBeInstalled(t *testing.T) {
	payload := []byte("worker")
	f, _ := startupFor(t, "defaults", "worker", payload, sumLine("worker", payload))
	root := t.TempDir()
	out, err := runStartup(t, f, root)
	if err != nil {
		t.Fatalf("startup.sh: %v\n%s", err, out)
	}
	if n := strings.Count(out, "FAILED: cannot install the Ops Agent"); n != 1 || strings.Count(out, "installing the Ops Agent failed (attempt") != 2 {
		t.Fatalf("output:\n%s\nwant two retries, then one line saying the agent could not be installed", out)
	}
	cmds, _ := os.ReadFile(filepath.Join(root, "commands"))
	if !strings.Contains(string(cmds), "systemctl restart ferry.service") {
		t.Fatalf("commands:\n%s\nwant the service running without the agent", cmds)
	}
}

// Issue 28 §9: a token is asked for at each download, so a wait for the
// release never outlives it.
func TestStartupScriptAsksForAFreshTokenForEachDownload(t *testing.T) {
	payload := []byte("worker")
	f, svc := startupFor(t, "defaults", "worker", payload, sumLine("worker", payload))
	f.tokenUses = 1
	rel := strings.TrimPrefix(svc.metadata["ferry-release"], "gs://")
	sums := f.objects[rel+"/SHA256SUMS"]
	delete(f.objects, rel+"/SHA256SUMS")
	f.onFetch = func(n int) {
		if n == 3 {
			f.objects[rel+"/SHA256SUMS"] = sums
		}
	}
	root := t.TempDir()
	out, err := runStartup(t, f, root, "FERRY_RELEASE_RETRY_SECONDS=0")
	if err != nil {
		t.Fatalf("startup.sh: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "opt/ferry/worker")); !bytes.Equal(got, payload) {
		t.Fatalf("installed %q", got)
	}
}
