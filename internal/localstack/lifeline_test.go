package localstack_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// childEnv names the directory of the Java emulator a child process of
// TestJavaEmulatorEndsWhenItsStarterIsKilled starts.
const childEnv = "FERRY_TEST_EMULATOR_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		emulatorChild(dir)
		return
	}
	os.Exit(m.Run())
}

// emulatorChild starts the Java emulator, says where, and waits to be
// killed (two minutes at most).
func emulatorChild(dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := localstack.StartPubSub(ctx, localstack.PubSubOptions{Kind: "java", Dir: dir})
	if err != nil {
		fmt.Printf("unavailable: %v\n", err)
		os.Exit(0)
	}
	fmt.Printf("host=%s\n", p.Host)
	time.Sleep(2 * time.Minute)
	p.Stop()
	os.Exit(1)
}

// kill -9 of whatever started the Java emulator (localstack, make run, a
// test binary past its deadline) ends the emulator too: gcloud and java
// run in a process group of their own, which Stop ends, but nothing calls
// Stop after a kill -9.
func TestJavaEmulatorEndsWhenItsStarterIsKilled(t *testing.T) {
	if os.Getenv("FERRY_TEST_PUBSUB") == "pstest" {
		t.Skip("FERRY_TEST_PUBSUB=pstest: no Java emulator")
	}
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+t.TempDir())
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	said := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		said <- strings.TrimSpace(line)
	}()
	var line string
	select {
	case line = <-said:
	case <-time.After(2 * time.Minute):
		t.Fatal("the child process did not say where its emulator serves within 2 minutes")
	}
	host, ok := strings.CutPrefix(line, "host=")
	if !ok {
		if os.Getenv("FERRY_TEST_PUBSUB") == "java" {
			t.Fatalf("FERRY_TEST_PUBSUB=java, and the Java emulator did not start: %s", line)
		}
		t.Skipf("no Java emulator here: %s", line)
	}
	if c, err := net.DialTimeout("tcp", host, 5*time.Second); err != nil {
		t.Fatalf("the emulator the child started does not answer on %s: %v", host, err)
	} else {
		_ = c.Close()
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	teststack.UntilSays(t, time.Minute, "the emulator on "+host+" to end after its starter was killed", func() (bool, string) {
		c, err := net.DialTimeout("tcp", host, time.Second)
		if err != nil {
			return true, ""
		}
		_ = c.Close()
		return false, "it still accepts connections"
	})
}
