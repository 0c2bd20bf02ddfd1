package process

import (
	"errors"
	"io"
	"strings"
	"testing"
)

type noExt struct{}

func parseAll(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	o, err := Parse(NewFlags("t", NetExtras|SystemLog, io.Discard), args, &noExt{})
	if err == nil {
		err = o.Validate()
	}
	return o, err
}

func TestVerbosityFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 0}, {[]string{"-v"}, 1}, {[]string{"-vv"}, 2}, {[]string{"-vvvvv"}, 5},
		{[]string{"--verbose"}, 1}, {[]string{"--verbose=vvv"}, 3},
		{[]string{"--config", writeConfig(t, "systemLog:\n  verbosity: 4\n")}, 4},
		{[]string{"--config", writeConfig(t, "systemLog:\n  verbosity: 4\n"), "-v"}, 1},
	} {
		o, err := parseAll(t, tc.args...)
		if err != nil || o.Verbosity != tc.want {
			t.Errorf("%v: verbosity %v, %v; want %d", tc.args, o, err, tc.want)
			continue
		}
		params := o.StartupParameters()
		if tc.want > 0 && (len(params) == 0 || params[0] != [2]string{"logLevel", string(rune('0' + tc.want))}) {
			t.Errorf("%v: startup parameters %v", tc.args, params)
		}
	}
	_, err := parseAll(t, "--config", writeConfig(t, "systemLog:\n  verbosity: -1\n"))
	if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), "systemLog.verbosity YAML Config cannot be negative") {
		t.Errorf("negative verbosity: %v", err)
	}
}

func TestBindIPAllAndIPv6(t *testing.T) {
	o, err := parseAll(t, "--bind_ip_all")
	if err != nil || strings.Join(o.BindIPs, ",") != "0.0.0.0" {
		t.Errorf("--bind_ip_all: %v %v", o.BindIPs, err)
	}
	o, err = parseAll(t, "--bind_ip_all", "--ipv6")
	if err != nil || strings.Join(o.BindIPs, ",") != "0.0.0.0,::" || !o.IPv6 {
		t.Errorf("--bind_ip_all --ipv6: %v %v", o.BindIPs, err)
	}
	o, err = parseAll(t, "--config", writeConfig(t, "net:\n  bindIpAll: true\n  ipv6: true\n"))
	if err != nil || strings.Join(o.BindIPs, ",") != "0.0.0.0,::" {
		t.Errorf("net.bindIpAll, net.ipv6: %v %v", o.BindIPs, err)
	}
}

func TestForkAndLogRotateOptions(t *testing.T) {
	if _, err := parseAll(t, "--fork"); !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), "--fork has to be used with --logpath or --syslog") {
		t.Errorf("--fork alone: %v", err)
	}
	if o, err := parseAll(t, "--fork", "--logpath", "/tmp/x.log", "--pidfilepath", "/tmp/x.pid"); err != nil || !o.Fork || o.PIDFile != "/tmp/x.pid" {
		t.Errorf("--fork --logpath: %+v %v", o, err)
	}
	if o, err := parseAll(t, "--config", writeConfig(t, "processManagement:\n  fork: true\n  pidFilePath: /tmp/p\nsystemLog:\n  destination: file\n  path: /tmp/l\n")); err != nil || !o.Fork || o.PIDFile != "/tmp/p" {
		t.Errorf("processManagement: %+v %v", o, err)
	}
	if _, err := parseAll(t, "--logpath", "/tmp/x.log", "--logRotate", "reopen"); err == nil || !strings.Contains(err.Error(), "logAppend must equal true if logRotate is set to reopen") {
		t.Errorf("reopen without logappend: %v", err)
	}
	if _, err := parseAll(t, "--logRotate", "bogus"); err == nil || !strings.Contains(err.Error(), "unsupported value for logRotate bogus") {
		t.Errorf("bad logRotate: %v", err)
	}
	if o, err := parseAll(t, "--logpath", "/tmp/x.log", "--logappend", "--logRotate", "reopen"); err != nil || o.LogRotate != "reopen" {
		t.Errorf("reopen: %v", err)
	}
}

// Options with no meaning here are accepted and listed for a startup warning.
func TestIgnoredOptionsWarn(t *testing.T) {
	o, err := parseAll(t, "--nounixsocket", "--timeStampFormat", "iso8601-utc", "--config",
		writeConfig(t, "net:\n  unixDomainSocket:\n    enabled: false\nsystemLog:\n  component:\n    query:\n      verbosity: 2\nprocessManagement:\n  timeZoneInfo: /usr/share/zoneinfo\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(o.Warnings, " ")
	for _, w := range []string{"--nounixsocket", "--timeStampFormat", "net.unixDomainSocket", "systemLog.component", "processManagement.timeZoneInfo"} {
		if !strings.Contains(got, w) {
			t.Errorf("warnings %q lack %s", got, w)
		}
	}
}

// Config-file errors name the option as mongod does, never a Go type or struct.
func TestConfigErrorsNameTheOption(t *testing.T) {
	for yml, want := range map[string]string{
		"net:\n  bogus: 1\n":               "Unrecognized option: net.bogus",
		"net:\n  port: abc\n":              `Bad value for option net.port: "abc" is not an integer`,
		"systemLog:\n  quiet: maybe\n":     `Bad value for option systemLog.quiet: "maybe" is not a boolean`,
		"net:\n  port: [1, 2]\n":           "option net.port takes a single value",
		"net: 5\n":                         "option net must be a section of options",
		"systemLog:\n  verbosity: high\n":  `Bad value for option systemLog.verbosity: "high" is not an integer`,
		"processManagement:\n  bogus: 1\n": "Unrecognized option: processManagement.bogus",
		"net:\n  port: [\n":                "Error parsing YAML config file",
	} {
		_, err := parseAll(t, "--config", writeConfig(t, yml))
		if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", yml, err, want)
			continue
		}
		for _, internal := range []string{"struct", "*int", "*bool", "!!str", "unmarshal"} {
			if strings.Contains(err.Error(), internal) {
				t.Errorf("%q: message shows Go internals: %v", yml, err)
			}
		}
	}
}

// A bad flag is reported as mongod reports it; --help prints the options and exits 0.
func TestCommandLineErrors(t *testing.T) {
	var stderr strings.Builder
	_, err := Parse(NewFlags("humongod", NetExtras|SystemLog, &stderr), []string{"--nope"}, &noExt{})
	if code := OptionsFailed(err, &stderr); code != ExitBadOptions ||
		stderr.String() != "Error parsing command line: unrecognised option '--nope'\ntry 'humongod --help' for more information\n" {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	_, err = Parse(NewFlags("humongod", NetExtras|SystemLog, &stderr), []string{"--help"}, &noExt{})
	if code := OptionsFailed(err, &stderr); code != ExitClean || !strings.Contains(stderr.String(), "-bind_ip_all") {
		t.Errorf("--help: exit %d, %q", code, stderr.String())
	}
}
