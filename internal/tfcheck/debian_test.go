package tfcheck

import (
	"bytes"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The start-up script on what a VM really boots: a stock Debian 12 root
// built from Debian's packages (mmdebstrap, the packages of a cloud image
// that matter here: systemd, curl, ca-certificates), run in a chroot against
// the fake metadata server and GCS. What a chroot cannot do is stubbed and
// said: systemctl works offline (SYSTEMD_OFFLINE=1: enable writes its
// links, start and restart are not run), and apt-get is a stub that installs
// nfs-common's mount helper, or fails as a VM without NAT does.

// debianRoot returns a tarball of a stock Debian 12 root, built once into
// .run/ and kept there; it skips the test, in one line, where it cannot.
var debianRoot = sync.OnceValues(func() (string, string) {
	if os.Geteuid() != 0 {
		return "", "startup on Debian 12: skipped, chroot needs root"
	}
	tar, err := filepath.Abs("../../.run/debian12-root.tar")
	if err != nil {
		return "", err.Error()
	}
	if _, err := os.Stat(tar); err == nil {
		return tar, ""
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", "startup on Debian 12: skipped, mmdebstrap is not installed (make deps installs it)"
	}
	// The machine's own package sources: no mirror is named here.
	sources, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	if len(sources) == 0 {
		sources, _ = filepath.Glob("/etc/apt/sources.list")
	}
	if len(sources) == 0 {
		return "", "startup on Debian 12: skipped, this machine has no apt sources to build a root from"
	}
	if err := os.MkdirAll(filepath.Dir(tar), 0o755); err != nil {
		return "", err.Error()
	}
	// mmdebstrap picks its output format by the name's ending: .tar.
	part := strings.TrimSuffix(tar, ".tar") + ".part.tar"
	args := []string{"--variant=important", "--include=curl,ca-certificates,systemd-sysv", "bookworm", part, sources[0]}
	out, err := exec.Command("mmdebstrap", args...).CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return "", "startup on Debian 12: skipped, mmdebstrap bookworm failed: " + lines[len(lines)-1]
	}
	if err := os.Rename(part, tar); err != nil {
		return "", err.Error()
	}
	return tar, ""
})

// chrootVM unpacks a fresh Debian 12 root with the start-up script and the
// apt-get stub in it.
func chrootVM(t *testing.T, aptWorks bool) string {
	t.Helper()
	tar, skip := debianRoot()
	if skip != "" {
		t.Skip(skip)
	}
	root := t.TempDir()
	if out, err := exec.Command("tar", "-xf", tar, "-C", root).CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", tar, err, out)
	}
	script, err := os.ReadFile("../../terraform/startup.sh")
	if err != nil {
		t.Fatal(err)
	}
	apt := "#!/bin/sh\n# apt-get on a VM without NAT: no mirror answers.\necho \"E: Failed to fetch: Could not connect to the mirror (Connection timed out)\" >&2\nexit 100\n"
	if aptWorks {
		apt = "#!/bin/sh\n# apt-get with a mirror: installing nfs-common brings mount.nfs.\ncase \" $* \" in *\" nfs-common \"*) printf '#!/bin/sh\\n' >/usr/sbin/mount.nfs; chmod 755 /usr/sbin/mount.nfs ;; esac\n"
	}
	for name, body := range map[string]string{"ferry-startup.sh": string(script), "ferry-test/bin/apt-get": apt} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// bootVM runs the start-up script in root as the VM's first boot would.
func bootVM(t *testing.T, f *fakeGoogle, root string) (string, error) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cmd := exec.Command("chroot", root, "/usr/bin/env", "-i", "PATH=/ferry-test/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SYSTEMD_OFFLINE=1",
		"FERRY_METADATA_URL="+srv.URL+"/computeMetadata/v1", "FERRY_STORAGE_URL="+srv.URL,
		"FERRY_OPS_AGENT_SCRIPT_URL="+srv.URL+"/add-google-cloud-ops-agent-repo.sh", "FERRY_STARTUP_RETRY_SECONDS=0",
		"bash", "/ferry-startup.sh")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func inVM(t *testing.T, root string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("chroot", append([]string{root, "/usr/bin/env", "SYSTEMD_OFFLINE=1"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ask sends one HTTP request to the start-up status answer, as the health
// checker would through systemd-socket-activate.
func ask(t *testing.T, root, path string) string {
	t.Helper()
	cmd := exec.Command("chroot", root, "/opt/ferry/startup-status")
	cmd.Stdin = strings.NewReader("GET " + path + " HTTP/1.1\r\nHost: vm\r\nUser-Agent: GoogleHC/1.0\r\n\r\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("startup-status %s: %v\n%s", path, err, out)
	}
	return string(out)
}

func TestStartupScriptOnStockDebian12(t *testing.T) {
	payload := []byte("#!/bin/sh\nexec sleep infinity\n")
	f, _ := startupFor(t, "spool, filestore, kms, on-demand", "worker", payload, sumLine("worker", payload))
	f.metadata["ferry-nfs"] = "10.20.0.5:/ferry"
	f.agentScript = []byte("#!/bin/bash\n# Google's script adds the repository and installs the agent.\n[ \"$1\" = --also-install ] || exit 2\nmkdir -p /opt/google-cloud-ops-agent && echo installed\n")
	f.tokenUses = 1
	root := chrootVM(t, true)
	out, err := bootVM(t, f, root)
	if err != nil {
		t.Fatalf("startup.sh on Debian 12: %v\n%s", err, out)
	}
	if pw, err := inVM(t, root, "getent", "passwd", "ferry"); err != nil || !strings.HasPrefix(pw, "ferry:x:2000:2000:") || !strings.HasSuffix(strings.TrimSpace(pw), ":/var/lib/ferry:/usr/sbin/nologin") {
		t.Errorf("user ferry: %q, %v; want uid 2000, home /var/lib/ferry, no login", pw, err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "opt/ferry/worker")); !bytes.Equal(got, payload) {
		t.Errorf("/opt/ferry/worker = %q, want the release's binary", got)
	}
	units := []string{"/etc/systemd/system/ferry.service", "/etc/systemd/system/mnt-ferry.mount", "/etc/systemd/system/ferry-startup.service"}
	if v, err := inVM(t, root, append([]string{"systemd-analyze", "verify"}, units...)...); err != nil || strings.Contains(v, "Unknown") || strings.Contains(v, "ignoring") {
		t.Errorf("systemd-analyze verify %v: %v\n%s", units, err, v)
	}
	for link, what := range map[string]string{
		"etc/systemd/system/multi-user.target.wants/ferry.service":  "ferry.service starts at boot",
		"etc/systemd/system/remote-fs.target.wants/mnt-ferry.mount": "the spool share is mounted at boot",
	} {
		if _, err := os.Lstat(filepath.Join(root, link)); err != nil {
			t.Errorf("%s: %v (want: %s)", link, err, what)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/ferry.service"))
	if !strings.Contains(string(unit), "RequiresMountsFor=/mnt/ferry\n") {
		t.Errorf("ferry.service does not require the share:\n%s", unit)
	}
	if _, err := os.Stat(filepath.Join(root, "opt/google-cloud-ops-agent")); err != nil || !strings.Contains(out, "installed") {
		t.Errorf("the Ops Agent was not installed by Google's script: %v\n%s", err, out)
	}
	if cfg, err := os.ReadFile(filepath.Join(root, "etc/google-cloud-ops-agent/config.yaml")); err != nil || !strings.Contains(string(cfg), "include_paths: [/var/log/ferry/ferry.log]") {
		t.Errorf("agent config: %v\n%s", err, cfg)
	}
	if st, err := os.Stat(filepath.Join(root, "var/log/ferry")); err != nil || st.Sys() == nil {
		t.Errorf("/var/log/ferry: %v", err)
	}
}

// Issue 28 §7: a VM without NAT cannot install nfs-common. The script tries
// a bounded number of times, says why in one line, does not start the
// service without its share, and keeps answering /healthz so that
// autohealing does not recreate the VM in a loop; /readyz says why.
func TestStartupScriptOnDebian12WithoutNAT(t *testing.T) {
	payload := []byte("#!/bin/sh\nexec sleep infinity\n")
	f, _ := startupFor(t, "spool, filestore, kms, on-demand", "worker", payload, sumLine("worker", payload))
	f.metadata["ferry-nfs"] = "10.20.0.5:/ferry"
	root := chrootVM(t, false)
	out, err := bootVM(t, f, root)
	if err == nil {
		t.Fatalf("startup.sh succeeded without a package mirror:\n%s", out)
	}
	if n := strings.Count(out, "FAILED: cannot install nfs-common"); n != 1 || strings.Count(out, "installing nfs-common failed (attempt") != 2 {
		t.Fatalf("output:\n%s\nwant three bounded attempts, then one line that names the cause", out)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/ferry.service")); err == nil {
		t.Errorf("ferry.service was enabled without its spool share")
	}
	if v, err := inVM(t, root, "systemd-analyze", "verify", "/etc/systemd/system/ferry-startup.service"); err != nil {
		t.Errorf("ferry-startup.service: %v\n%s", err, v)
	}
	if got := ask(t, root, "/healthz"); !strings.HasPrefix(got, "HTTP/1.0 200 OK\r\n") {
		t.Errorf("/healthz answered %q; want 200, so autohealing leaves the VM alone", got)
	}
	if got := ask(t, root, "/readyz"); !strings.HasPrefix(got, "HTTP/1.0 503 ") || !strings.Contains(got, "ferry did not start: cannot install nfs-common") {
		t.Errorf("/readyz answered %q; want 503 with the cause", got)
	}
}
