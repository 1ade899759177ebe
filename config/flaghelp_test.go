package config

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// maxFlagHelp is the longest a flag's help may be: the detail belongs in
// docs/, which the help names.
const maxFlagHelp = 200

// Every flag's help is at most maxFlagHelp characters.
func TestFlagHelpIsShort(t *testing.T) {
	// The primary's flags are etcd's, with etcd's own help.
	r, m, a, c := DefaultReplica(), DefaultMirror(), Admin{}, DefaultCompare()
	for _, fs := range []*flag.FlagSet{NewReplicaFlags(&r), NewMirrorFlags(&m), NewAdminFlags(&a, "hold"), NewCompareFlags(&c)} {
		fs.VisitAll(func(f *flag.Flag) {
			if len(f.Usage) > maxFlagHelp {
				t.Errorf("%s --%s: help of %d characters, want at most %d (put the detail in docs/)", fs.Name(), f.Name, len(f.Usage), maxFlagHelp)
			}
		})
	}
}

// command is one command's flags as --help shows them, and its config as
// the command loads it.
type command struct {
	name string
	// defaults is the config's default (DefaultReplica, …), untouched by
	// any flag set.
	defaults any
	// load builds a new config from its default, registers the flags on it
	// and loads args, as the command does.
	load func(args []string) (cfg any, fs *flag.FlagSet, err error)
	// ignore are config fields that record how a value was given rather
	// than the value (etcd's FlagsExplicitlySet).
	ignore []string
	// dependsOn lists, for a flag whose default follows other flags by a
	// rule its help names, the flags it follows.
	dependsOn map[string][]string
	// also lists, for a flag that, given, drops another's default by a
	// rule the other's help names, that other: it is given its shown
	// default too.
	also map[string][]string
	// noEmpty are flags with no default that cannot be given "".
	noEmpty []string
}

func commands() []command {
	return []command{
		{
			name:     "replica",
			defaults: DefaultReplica(),
			load: func(args []string) (any, *flag.FlagSet, error) {
				cfg := DefaultReplica()
				fs := NewReplicaFlags(&cfg)
				err := LoadReplica(&cfg, fs, args)
				return cfg, fs, err
			},
			// The flags given that have no effect, not a setting.
			ignore: []string{"Unused"},
		},
		{
			name:     "replica mirror",
			defaults: DefaultMirror(),
			load: func(args []string) (any, *flag.FlagSet, error) {
				cfg := DefaultMirror()
				fs := NewMirrorFlags(&cfg)
				err := LoadMirror(&cfg, fs, args)
				return cfg, fs, err
			},
			// --dest-prefix's help: keys keep their names, so it is
			// --prefix unless given.
			dependsOn: map[string][]string{"dest-prefix": {"prefix"}},
		},
		{
			name:     "replica compare",
			defaults: DefaultCompare(),
			load: func(args []string) (any, *flag.FlagSet, error) {
				cfg := DefaultCompare()
				fs := NewCompareFlags(&cfg)
				err := LoadCompare(&cfg, fs, args)
				return cfg, fs, err
			},
			ignore: []string{"Command"},
		},
		{
			name:     "primary",
			defaults: DefaultPrimary(),
			load: func(args []string) (any, *flag.FlagSet, error) {
				cfg := DefaultPrimary()
				pf := NewPrimaryFlags(&cfg)
				err := pf.Load(args)
				return cfg, pf.FS, err
			},
			ignore: []string{"FlagsExplicitlySet"},
			// etcd's rules, which its help and the primary's name: no
			// default advertise URL once --listen-client-urls is given, no
			// default initial cluster with discovery.
			dependsOn: map[string][]string{
				"advertise-client-urls": {"listen-client-urls"},
				"initial-cluster":       {"discovery-srv", "discovery-srv-name", "discovery-endpoints"},
			},
			also: map[string][]string{"listen-client-urls": {"advertise-client-urls"}},
			// etcd's embed.Config.Validate refuses an empty endpoint; its
			// flag takes "" as one.
			noEmpty: []string{"discovery-endpoints"},
		},
	}
}

// helpEntry is one flag as --help shows it: its help, and the default
// after it, if any.
type helpEntry struct {
	kind, usage, def string
	shown            bool
}

// parseHelp reads config.PrintFlags' output back.
func parseHelp(t *testing.T, text string) map[string]helpEntry {
	t.Helper()
	entries := map[string]helpEntry{}
	var name string
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "  --"); ok {
			n, kind, _ := strings.Cut(rest, " ")
			name = n
			entries[name] = helpEntry{kind: kind}
			continue
		}
		if name == "" || line == "" {
			continue
		}
		e := entries[name]
		e.usage = strings.TrimSpace(strings.TrimPrefix(e.usage+"\n"+strings.TrimPrefix(line, "      "), "\n"))
		entries[name] = e
	}
	for name, e := range entries {
		if i := strings.LastIndex(e.usage, " (default "); i >= 0 && strings.HasSuffix(e.usage, ")") {
			e.def, e.shown = e.usage[i+len(" (default "):len(e.usage)-1], true
			e.usage = e.usage[:i]
		}
		entries[name] = e
	}
	return entries
}

// zeroFor is what a flag of kind holds when --help shows no default.
func zeroFor(kind string) string {
	switch kind {
	case "":
		return "false"
	case "int", "int64", "uint", "uint64", "float":
		return "0"
	case "duration":
		return "0s"
	}
	return ""
}

// samples are tried, in order, as another flag's value: the first that
// loads and changes the config is used.
var samples = []string{"true", "7", "7s", "http://10.9.9.9:1234", "zz", "existing", "revision", "TLS1.3", "voter", "always"}

// placeholder matches ${flag} in a shown default: the value of that flag.
var placeholder = regexp.MustCompile(`\$\{([a-z0-9-]+)\}`)

// clearEnv unsets every variable a command reads, for the test.
func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		key, _, _ := strings.Cut(kv, "=")
		for _, p := range []string{EnvPrefix, EtcdEnvPrefix} {
			if strings.HasPrefix(key, p) {
				t.Setenv(key, "") // restored after the test
				os.Unsetenv(key)
			}
		}
	}
}

// Every default that `replica --help`, `replica mirror --help`,
// `replica compare --help` and `primary --help` show is the config's default: the config a command
// loads with no flags is its DefaultX(); giving each flag the value its help
// shows as its default (or none: the zero value) changes nothing, alone or
// beside any other flag; a default that follows another flag says so as
// ${flag} and follows it. Help texts state no default of their own besides
// the one PrintFlags appends.
func TestHelpShowsEveryDefaultAsItIs(t *testing.T) {
	clearEnv(t)
	for _, cmd := range commands() {
		t.Run(cmd.name, func(t *testing.T) {
			base, fs, err := cmd.load(nil)
			if err != nil {
				t.Fatalf("%s with no flags: %v", cmd.name, err)
			}
			if diff := diffExported(cmd.defaults, base, cmd.ignore); diff != "" {
				t.Errorf("%s with no flags loads another config than its default: %s (a flag registered with a default of its own?)", cmd.name, diff)
			}
			var help bytes.Buffer
			PrintFlags(&help, fs)
			entries := parseHelp(t, help.String())
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			if len(entries) != len(names) {
				t.Fatalf("--help lists %d flags, the flag set has %d", len(entries), len(names))
			}
			sample := sampleValues(t, cmd, base, names)
			for _, name := range names {
				e := entries[name]
				// etcd's own help says "Default 'info'."; it must agree.
				if strings.Contains(e.usage, "(default ") || strings.Contains(e.usage, "Default ") && !strings.Contains(e.usage, "'"+e.def+"'") {
					t.Errorf("%s --%s: the help states a default of its own: %q; let PrintFlags show the flag's", cmd.name, name, e.usage)
				}
				if strings.Contains(e.usage, "(default:") && e.shown {
					t.Errorf("%s --%s: the help describes a default in words and shows %q too", cmd.name, name, e.def)
				}
				def := e.def
				if !e.shown {
					def = zeroFor(e.kind)
					if slices.Contains(cmd.noEmpty, name) {
						continue
					}
				}
				refs := placeholder.FindAllStringSubmatch(def, -1)
				// expand is def with ${flag} replaced by that flag's
				// value in fs.
				expand := func(fs *flag.FlagSet) string { return expandDefault(t, fs, def) }
				// Alone: the shown default is what the command runs with.
				give := func(fs *flag.FlagSet) []string {
					args := []string{"--" + name + "=" + expand(fs)}
					for _, a := range cmd.also[name] {
						args = append(args, "--"+a+"="+expandDefault(t, fs, entries[a].def))
					}
					return args
				}
				got, _, err := cmd.load(give(fs))
				if err != nil {
					t.Errorf("%s --%s: its shown default %q does not load: %v", cmd.name, name, def, err)
					continue
				}
				if diff := diffExported(base, got, cmd.ignore); diff != "" {
					t.Errorf("%s --%s: --help shows default %q, but giving it changes the config: %s", cmd.name, name, def, diff)
					continue
				}
				// Beside every other flag: the default follows only the
				// flags its help names.
				for _, other := range names {
					v, ok := sample[other]
					if other == name || !ok || slices.Contains(cmd.dependsOn[name], other) || slices.Contains(cmd.also[name], other) {
						continue
					}
					withOther, ofs := v.cfg, v.fs
					both, _, err := cmd.load(append([]string{"--" + other + "=" + v.value}, give(ofs)...))
					if err != nil {
						t.Errorf("%s --%s: its shown default %q, with --%s=%s, does not load: %v", cmd.name, name, def, other, v.value, err)
						continue
					}
					if diff := diffExported(withOther, both, cmd.ignore); diff != "" {
						if len(refs) == 0 {
							t.Errorf("%s --%s: --help shows default %q, but with --%s=%s its default is another: %s", cmd.name, name, def, other, v.value, diff)
						} else {
							t.Errorf("%s --%s: --help shows default %q, but with --%s=%s it does not follow it so: %s", cmd.name, name, def, other, v.value, diff)
						}
					}
				}
			}
		})
	}
}

// expandDefault is a shown default with each ${flag} replaced by that
// flag's value in fs.
func expandDefault(t *testing.T, fs *flag.FlagSet, def string) string {
	return placeholder.ReplaceAllStringFunc(def, func(m string) string {
		ref := fs.Lookup(m[2 : len(m)-1])
		if ref == nil {
			t.Fatalf("%s: default %q names no flag", fs.Name(), def)
		}
		return ref.Value.String()
	})
}

// sampled is a flag given a value other than its default, and the config
// loaded so.
type sampled struct {
	value string
	cfg   any
	fs    *flag.FlagSet
}

// sampleValues picks, for every flag it can, a value that loads and
// changes the config.
func sampleValues(t *testing.T, cmd command, base any, names []string) map[string]sampled {
	t.Helper()
	out := map[string]sampled{}
	for _, name := range names {
		if name == ConfigFileFlag {
			continue // a file to read, not a value
		}
		for _, v := range samples {
			got, fs, err := cmd.load([]string{"--" + name + "=" + v})
			if err == nil && diffExported(base, got, cmd.ignore) != "" {
				out[name] = sampled{value: v, cfg: got, fs: fs}
				break
			}
		}
	}
	t.Logf("%s: sample values for %d of %d flags", cmd.name, len(out), len(names))
	if len(out) < len(names)*3/4 {
		t.Errorf("%s: a sample value for only %d of %d flags; add values to samples", cmd.name, len(out), len(names))
	}
	return out
}

// diffExported names the first exported field, at any depth, in which a
// and b differ ("" if none); functions are not compared, nor fields
// named in ignore.
func diffExported(a, b any, ignore []string) string {
	return diffValue(reflect.ValueOf(a), reflect.ValueOf(b), "", ignore)
}

func diffValue(a, b reflect.Value, path string, ignore []string) string {
	if a.IsValid() != b.IsValid() {
		return path + ": one is nil"
	}
	if !a.IsValid() {
		return ""
	}
	switch a.Kind() {
	case reflect.Func:
		return ""
	case reflect.Slice, reflect.Map:
		if blank(a) && blank(b) {
			return "" // nil, empty or one empty string: no setting
		}
	case reflect.Interface:
		// etcd's feature gate: its flag value, not its logger.
		sa, oka := a.Interface().(fmt.Stringer)
		sb, okb := b.Interface().(fmt.Stringer)
		if oka && okb && !a.IsNil() && !b.IsNil() {
			if sa.String() != sb.String() {
				return path + ": " + sa.String() + " ≠ " + sb.String()
			}
			return ""
		}
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path + ": one is nil"
			}
			return ""
		}
		return diffValue(a.Elem(), b.Elem(), path, ignore)
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() || slices.Contains(ignore, f.Name) {
				continue
			}
			if d := diffValue(a.Field(i), b.Field(i), path+"."+f.Name, ignore); d != "" {
				return d
			}
		}
		return ""
	}
	if a.CanInterface() && b.CanInterface() && !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return path + ": " + show(a) + " ≠ " + show(b)
	}
	return ""
}

// blank is an empty slice or map, or etcd's list flags given "": [""].
func blank(v reflect.Value) bool {
	if v.Len() == 0 {
		return true
	}
	return v.Kind() == reflect.Slice && v.Len() == 1 && v.Index(0).Kind() == reflect.String && v.Index(0).String() == ""
}

func show(v reflect.Value) string {
	s := strings.ReplaceAll(strings.TrimSpace(strings.ReplaceAll(fmt.Sprintf("%v", v.Interface()), "\n", " ")), "  ", " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
