package commands

import (
	"context"
	"os"
	"runtime"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func addHostInfo(r *service.Registry) {
	add(r, &service.Command{
		Name:      "hostInfo",
		Auth:      service.AuthOnCluster(auth.HostInfo),
		Handler:   runHostInfo,
		Help:      "returns information about the daemon's host",
		Secondary: service.SecondaryAlways,
	})
}

func runHostInfo(context.Context, *service.Env, bsoncore.Document) (bsoncore.Document, error) {
	host, _ := os.Hostname()
	memMB := memTotalMB()
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendDocumentElement(b, "system", bsoncore.NewDocumentBuilder().
			AppendDateTime("currentTime", time.Now().UnixMilli()).
			AppendString("hostname", host).
			AppendInt32("cpuAddrSize", 64).
			AppendInt64("memSizeMB", memMB).
			AppendInt64("memLimitMB", memMB).
			AppendInt32("numCores", int32(runtime.NumCPU())).
			AppendInt32("numPhysicalCores", int32(runtime.NumCPU())).
			AppendString("cpuArch", runtime.GOARCH).
			AppendBoolean("numaEnabled", false).Build())
		b = bsoncore.AppendDocumentElement(b, "os", bsoncore.NewDocumentBuilder().
			AppendString("type", osType()).
			AppendString("name", osName()).
			AppendString("version", kernelVersion()).Build())
		b = bsoncore.AppendDocumentElement(b, "extra", bsoncore.NewDocumentBuilder().
			AppendString("versionString", kernelVersion()).
			AppendInt64("pageSize", int64(os.Getpagesize())).Build())
		return b
	}), nil
}

func osType() string {
	if runtime.GOOS == "linux" {
		return "Linux"
	}
	return runtime.GOOS
}

// osName is PRETTY_NAME from /etc/os-release, as mongod reports it.
func osName() string {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return runtime.GOOS
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}

func kernelVersion() string {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// memTotalMB reads MemTotal from /proc/meminfo (0 when unavailable).
func memTotalMB() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				return parseInt(f[0]) / 1024
			}
		}
	}
	return 0
}

func parseInt(s string) int64 {
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
