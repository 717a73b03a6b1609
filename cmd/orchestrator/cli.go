package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// A command is one node of the command tree: a group (subs set) or a leaf (setup set).
// A leaf's setup declares its flags on a fresh FlagSet and returns the function that runs
// it, which sees the parsed flag values through the closure; nothing is global, so run can
// be called many times in one process (the tests do).
type command struct {
	name    string
	args    string // synopsis of the positional arguments, e.g. "PIPELINE.yaml..."
	summary string // one line, for the parent's command list
	help    string // paragraphs shown by --help
	setup   func(fs *flag.FlagSet) runFunc
	subs    []*command
}

// runFunc runs a leaf command with its positional arguments (flags already parsed).
type runFunc func(ctx context.Context, env *env, args []string) error

// env is what a command may touch of the outside world.
type env struct {
	stdout, stderr io.Writer
	// lookupEnv reads environment variables (S3 settings, ${VAR} in pipelines).
	lookupEnv func(string) (string, bool)
	// now is the clock for commit timestamps and retention checks.
	now func() time.Time
	// stores opens the stores of the command's locations, each once; runEnv closes it.
	stores *storeurl.Stores
}

// opener opens pipelines' warehouses and sources through e.stores, with the command
// line's S3 settings (flags) over each pipeline's own.
func (e *env) opener(flags storeurl.Options) scheduler.URLOpener {
	return scheduler.URLOpener{Stores: e.stores, Flags: flags}
}

// who names the person running a command in run records: user@host.
func (e *env) who() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil {
		return name
	}
	return name + "@" + host
}

// rootCommand is the command tree. New commands (run, table changes/vacuum/restore) are
// entries here.
func rootCommand() *command {
	return &command{
		name: "orchestrator",
		help: "orchestrator runs YAML data pipelines over Delta Lake tables on local disk or S3\n" +
			"and answers questions about the tables: their history, their rows at any version\n" +
			"or time, what changed between two versions, their properties.",
		subs: []*command{
			runCommand(),
			serveCommand(),
			runsCommand(),
			scheduleCommand(),
			validateCommand(),
			tableCommand(),
			versionCommand(),
		},
	}
}

// run is the whole program; main only adds the process around it (signals, exit code).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runEnv(ctx, &env{stdout: stdout, stderr: stderr, lookupEnv: os.LookupEnv, now: time.Now}, args)
}

// runEnv runs the program in a given environment (tests pin the clock).
func runEnv(ctx context.Context, e *env, args []string) error {
	if e.stores == nil {
		e.stores = storeurl.NewStores()
		defer func() { e.stores.Close(); e.stores = nil }()
	}
	root := rootCommand()
	return dispatch(ctx, e, root, root.name, args)
}

// usageError is a mistake in the command line: exit code 2, with the command's usage.
type usageError struct {
	msg   string
	path  string // "orchestrator table show"
	usage string
}

func (e *usageError) Error() string { return e.msg }

// usagef reports a usage error from a command; dispatch adds the command's usage.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errReported is a failure whose details the command has already printed (exit code 1).
var errReported = errors.New("failed")

// exitCode prints err to stderr as fits its kind and returns the process exit code:
// 0 success, 1 failure, 2 usage error.
func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %s\n\n%s", ue.path, ue.msg, ue.usage)
		return 2
	case errors.Is(err, errReported):
		return 1
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "orchestrator: interrupted: %v\n", err)
		return 1
	default:
		fmt.Fprintf(stderr, "orchestrator: %v\n", err)
		return 1
	}
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

func dispatch(ctx context.Context, e *env, c *command, path string, args []string) error {
	if c.subs != nil {
		if len(args) == 0 {
			return &usageError{msg: "missing command", path: path, usage: c.usage(path, nil)}
		}
		if isHelp(args[0]) {
			if len(args) > 1 { // "orchestrator help table show"
				return dispatch(ctx, e, c, path, append(slices.Clone(args[1:]), "--help"))
			}
			io.WriteString(e.stdout, c.usage(path, nil))
			return nil
		}
		for _, sub := range c.subs {
			if sub.name == args[0] {
				return dispatch(ctx, e, sub, path+" "+sub.name, args[1:])
			}
		}
		return &usageError{msg: fmt.Sprintf("unknown command %q", args[0]), path: path, usage: c.usage(path, nil)}
	}
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fn := c.setup(fs)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		io.WriteString(e.stdout, c.usage(path, fs))
		return nil
	}
	if err != nil {
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
			msg = "unknown flag --" + name
		}
		msg = strings.NewReplacer("for flag -", "for --", "argument: -", "argument: --", "for -", "for --").Replace(msg)
		return &usageError{msg: msg, path: path, usage: c.usage(path, fs)}
	}
	err = fn(ctx, e, pos)
	var ue *usageError
	if errors.As(err, &ue) && ue.usage == "" {
		ue.path, ue.usage = path, c.usage(path, fs)
	}
	return err
}

// parseInterspersed parses flags that may come before, between or after the positional
// arguments ("table show ./t --limit 5"); everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usage renders a command's help: synopsis, description, and its commands or flags.
func (c *command) usage(path string, fs *flag.FlagSet) string {
	var b strings.Builder
	switch {
	case c.subs != nil:
		fmt.Fprintf(&b, "Usage: %s COMMAND [arguments] [flags]\n", path)
	default:
		syn := path
		if c.args != "" {
			syn += " " + c.args
		}
		if fs != nil && hasFlags(fs) {
			syn += " [flags]"
		}
		fmt.Fprintf(&b, "Usage: %s\n", syn)
	}
	if c.help != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimRight(c.help, "\n"))
	}
	if c.subs != nil {
		b.WriteString("\nCommands:\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
		for _, sub := range c.subs {
			fmt.Fprintf(tw, "  %s\t%s\n", sub.name, sub.summary)
		}
		tw.Flush()
		fmt.Fprintf(&b, "\nRun \"%s COMMAND --help\" for the arguments and flags of a command.\n", path)
		return b.String()
	}
	if fs != nil && hasFlags(fs) {
		b.WriteString("\nFlags:\n")
		fs.VisitAll(func(f *flag.Flag) {
			name, text := flag.UnquoteUsage(f)
			head := "  --" + f.Name
			if name != "" {
				head += " " + name
			}
			fmt.Fprintf(&b, "%s\n", head)
			for _, line := range strings.Split(text, "\n") {
				fmt.Fprintf(&b, "        %s\n", line)
			}
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "[]" {
				fmt.Fprintf(&b, "        (default %s)\n", f.DefValue)
			}
		})
	}
	return b.String()
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// listFlag is a repeatable flag ("--set a=1 --set b=2") that also splits on commas when
// split is set ("--columns a,b").
type listFlag struct {
	values []string
	split  bool
}

func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.values, ",")
}

func (l *listFlag) Set(v string) error {
	if !l.split {
		l.values = append(l.values, v)
		return nil
	}
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			l.values = append(l.values, part)
		}
	}
	return nil
}

// optionalInt is an integer flag that knows whether it was given.
type optionalInt struct {
	value int64
	set   bool
}

func (o *optionalInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatInt(o.value, 10)
}

func (o *optionalInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not an integer")
	}
	o.value, o.set = v, true
	return nil
}

// paramFlag is a repeatable name=value flag (--param), by name.
type paramFlag map[string]string

func (p paramFlag) String() string {
	return strings.Join(sortedKeys(p), ",")
}

func (p paramFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=value, got %q", v)
	}
	p[name] = value
	return nil
}
