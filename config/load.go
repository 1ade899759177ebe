package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// EnvPrefix starts every environment variable understudy reads: the flag
// --max-learners is UNDERSTUDY_MAX_LEARNERS.
const EnvPrefix = "UNDERSTUDY_"

// ConfigFileFlag names the flag that points at a YAML file of flag values.
const ConfigFileFlag = "config-file"

// ErrHelp is returned by Load when the arguments ask for help.
var ErrHelp = flag.ErrHelp

// Sections maps a nested YAML section to the flag prefix its keys stand for.
// etcd's config file nests TLS settings ("client-transport-security:
// cert-file: …" is the flag --cert-file, "peer-transport-security: cert-file:
// …" is --peer-cert-file); the same file must work for a primary.
type Sections map[string]string

// EtcdSections are the nested sections of etcd's own YAML config file.
var EtcdSections = Sections{
	"client-transport-security": "",
	"peer-transport-security":   "peer-",
}

// Loaded reports what Load found besides the flag values it set.
type Loaded struct {
	// Set holds the name of every flag given a value by a file, the
	// environment or the command line, as etcd's FlagsExplicitlySet does.
	Set map[string]bool
	// Args are the positional arguments, in order.
	Args []string
}

// Load fills fs from, in increasing precedence, the YAML file named by
// --config-file (or UNDERSTUDY_CONFIG_FILE), UNDERSTUDY_* environment
// variables, and args. Every problem is reported, one per line, in one
// joined error, each naming the flag, variable or key and the value given.
// fs must define the flag ConfigFileFlag.
//
// The command line is scanned by hand rather than by fs.Parse because Parse
// stops at the first bad flag; an operator fixing a unit file wants them all.
// Both -flag and --flag are accepted, as etcd accepts them.
func Load(fs *flag.FlagSet, args []string, sections Sections) (Loaded, error) {
	return load(fs, args, sections, EnvPrefix)
}

// EtcdEnvPrefix starts the environment variables etcd reads (ETCD_NAME is
// --name). The primary reads them too, below UNDERSTUDY_* ones, so that an
// etcd unit file's environment works unchanged.
const EtcdEnvPrefix = "ETCD_"

// load is Load with the environment read under each of envPrefixes in
// turn, a later prefix overriding an earlier one.
func load(fs *flag.FlagSet, args []string, sections Sections, envPrefixes ...string) (Loaded, error) {
	got := Loaded{Set: map[string]bool{}}
	cmdline, positional, problems := scanArgs(fs, args)
	got.Args = positional
	for _, kv := range cmdline {
		if kv.name == "help" || kv.name == "h" {
			return got, ErrHelp
		}
	}

	file := os.Getenv(EnvPrefix + envName(ConfigFileFlag))
	for _, kv := range cmdline {
		if kv.name == ConfigFileFlag {
			file = kv.value
		}
	}
	if file != "" {
		problems = append(problems, loadFile(fs, file, sections, got.Set)...)
	}
	for _, prefix := range envPrefixes {
		problems = append(problems, loadEnv(fs, prefix, got.Set)...)
	}
	for _, kv := range cmdline {
		if err := setFlag(fs, kv.name, kv.value); err != nil {
			problems = append(problems, fmt.Errorf("--%s %q: %v", kv.name, kv.value, err))
			continue
		}
		got.Set[kv.name] = true
	}
	return got, errors.Join(problems...)
}

// loadFlagsOnly is Load for a command that takes flags and no arguments:
// an argument is one more problem. ErrHelp comes back alone.
func loadFlagsOnly(fs *flag.FlagSet, args []string, sections Sections, envPrefixes ...string) (Loaded, error) {
	if len(envPrefixes) == 0 {
		envPrefixes = []string{EnvPrefix}
	}
	got, err := load(fs, args, sections, envPrefixes...)
	if errors.Is(err, ErrHelp) {
		return got, err
	}
	if len(got.Args) > 0 {
		err = errors.Join(err, fmt.Errorf("%q: unexpected argument (%s takes only flags)", got.Args[0], fs.Name()))
	}
	return got, err
}

type flagValue struct{ name, value string }

func scanArgs(fs *flag.FlagSet, args []string) (kvs []flagValue, positional []string, problems []error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		value, hasValue := "", false
		if eq := strings.IndexByte(name, '='); eq >= 0 {
			name, value, hasValue = name[:eq], name[eq+1:], true
		}
		if name == "help" || name == "h" {
			kvs = append(kvs, flagValue{name: "help"})
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			problems = append(problems, fmt.Errorf("--%s: unknown flag (see --help for the flags there are)", name))
			if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++ // its value, so it is not mistaken for a positional argument
			}
			continue
		}
		if !hasValue {
			if isBool(f) {
				value = "true"
			} else if i+1 < len(args) {
				i++
				value = args[i]
			} else {
				problems = append(problems, fmt.Errorf("--%s: needs a value", name))
				continue
			}
		}
		kvs = append(kvs, flagValue{name: name, value: value})
	}
	return kvs, positional, problems
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func loadEnv(fs *flag.FlagSet, prefix string, set map[string]bool) (problems []error) {
	fs.VisitAll(func(f *flag.Flag) {
		key := prefix + envName(f.Name)
		v, ok := os.LookupEnv(key)
		if !ok || f.Name == ConfigFileFlag {
			return
		}
		if err := setFlag(fs, f.Name, v); err != nil {
			problems = append(problems, fmt.Errorf("%s=%q: %v", key, v, err))
			return
		}
		set[f.Name] = true
	})
	return problems
}

// UnknownEnv lists the UNDERSTUDY_* environment variables that name no flag
// of fs, as etcd warns of an unrecognized ETCD_* variable: a misspelt one
// would otherwise be ignored without a word.
func UnknownEnv(fs *flag.FlagSet, prefixes ...string) []string {
	if len(prefixes) == 0 {
		prefixes = []string{EnvPrefix}
	}
	var unknown []string
	for _, kv := range os.Environ() {
		key, _, _ := strings.Cut(kv, "=")
		for _, prefix := range prefixes {
			name, ok := strings.CutPrefix(key, prefix)
			if ok && name != "" && fs.Lookup(strings.ToLower(strings.ReplaceAll(name, "_", "-"))) == nil {
				unknown = append(unknown, key)
			}
		}
	}
	slices.Sort(unknown)
	return unknown
}

func envName(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func loadFile(fs *flag.FlagSet, path string, sections Sections, set map[string]bool) []error {
	b, err := os.ReadFile(path)
	if err != nil {
		return []error{fmt.Errorf("--%s %q: cannot read: %v", ConfigFileFlag, path, unwrapPathError(err))}
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return []error{fmt.Errorf("--%s %q: not valid YAML: %v", ConfigFileFlag, path, strings.TrimPrefix(err.Error(), "yaml: "))}
	}
	values := map[string]string{}
	var problems []error
	for key, v := range doc {
		if prefix, ok := sections[key]; ok {
			sub, isMap := v.(map[string]any)
			if !isMap {
				if v != nil {
					problems = append(problems, fmt.Errorf("config file %q: key %q: must be a mapping of settings", path, key))
				}
				continue
			}
			for k, sv := range sub {
				if s, err := yamlString(sv); err != nil {
					problems = append(problems, fmt.Errorf("config file %q: key %q: %v", path, key+"."+k, err))
				} else if s != "" {
					values[prefix+k] = s
				}
			}
			continue
		}
		s, err := yamlString(v)
		if err != nil {
			problems = append(problems, fmt.Errorf("config file %q: key %q: %v", path, key, err))
			continue
		}
		values[key] = s
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys) // errors in a stable order
	for _, k := range keys {
		if fs.Lookup(k) == nil || k == ConfigFileFlag {
			problems = append(problems, fmt.Errorf("config file %q: unknown key %q (keys are the flag names without dashes)", path, k))
			continue
		}
		if err := setFlag(fs, k, values[k]); err != nil {
			problems = append(problems, fmt.Errorf("config file %q: key %q: value %q: %v", path, k, values[k], err))
			continue
		}
		set[k] = true
	}
	return problems
}

// yamlString renders a YAML scalar or list the way the flag would be typed:
// lists become comma-separated, as etcd's file accepts for log-outputs.
func yamlString(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	case bool:
		return strconv.FormatBool(t), nil
	case int:
		return strconv.Itoa(t), nil
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), nil
	case []any:
		parts := make([]string, 0, len(t))
		for _, e := range t {
			s, err := yamlString(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	default:
		return "", fmt.Errorf("must be a string, number, boolean or list, not %T", v)
	}
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// setFlag sets one flag and rewrites the flag package's bare "parse error"
// into what a valid value looks like. A value that does not parse leaves the
// flag as it was: the flag package's own types store their zero first, and
// Validate would then report that zero as a second, wrong problem.
func setFlag(fs *flag.FlagSet, name, value string) error {
	f := fs.Lookup(name)
	var before string
	if f != nil {
		before = f.Value.String()
	}
	err := fs.Set(name, value)
	if err == nil {
		return nil
	}
	if _, typed := f.Value.(flag.Getter); f != nil && typed {
		_ = f.Value.Set(before) // its own String, which it parses
	}
	if msg := err.Error(); msg == "parse error" || msg == "value out of range" {
		kind, _ := flag.UnquoteUsage(fs.Lookup(name))
		return fmt.Errorf("not a valid %s", describeKind(kind))
	}
	if ne := (*strconv.NumError)(nil); errors.As(err, &ne) { // etcd's own number flags
		return fmt.Errorf("not a valid whole number, 0 or more (%v)", ne.Err)
	}
	return err
}

func describeKind(kind string) string {
	switch kind {
	case "":
		return "boolean (true or false)"
	case "uint", "uint64":
		return "whole number, 0 or more"
	case "int", "int64":
		return "whole number"
	case "duration":
		return "duration (such as 500ms, 10s, 2m)"
	case "float":
		return "number"
	}
	return kind
}

// PrintFlags writes fs's flags the way etcd documents its own: --name, then
// the help text and default on the next line. The default is the flag's
// DefValue, left out when it is the zero of the flag's type; a default that
// follows other flags names them as ${flag}, as etcd's ${name}.etcd.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		if isBool(f) {
			kind = "" // a back-quoted word in a boolean's help is no argument
		}
		if kind != "" {
			kind = " " + kind
		}
		def := ""
		if f.DefValue != zeroDefault(f) {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s%s\n      %s%s\n", f.Name, kind, usage, def)
	})
}

// zeroDefault is the default a flag of f's type has when none is given:
// false, 0, 0s, or empty.
func zeroDefault(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		if f.DefValue == "[]" { // etcd's lists
			return "[]"
		}
		return ""
	}
	switch g.Get().(type) {
	case bool:
		return "false"
	case int, int64, uint, uint64, float64:
		return "0"
	case time.Duration:
		return "0s"
	}
	return ""
}

// PrintProblems writes err one line per problem, as errors.Join joins
// them, each after "prog: " (once, if the problem already starts so).
func PrintProblems(w io.Writer, prog string, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "%s: %s\n", prog, strings.TrimPrefix(line, prog+": "))
	}
}
