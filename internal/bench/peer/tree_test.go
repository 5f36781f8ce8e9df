package peer

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TreeCPU counts a child's CPU in its parent's tree: a shell that runs a
// busy child shows at least the child's CPU while both live.
func TestTreeCPUCountsDescendants(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen int64
	for deadline := time.Now().Add(time.Minute); seen == 0 && time.Now().Before(deadline); {
		seen = int64(TreeCPU(cmd.Process.Pid))
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if seen == 0 {
		t.Fatal("TreeCPU saw no CPU in a shell whose child counts to 300,000")
	}
	if TreeCPU(os.Getpid()) <= 0 {
		t.Fatal("TreeCPU of this test process is 0")
	}
}
