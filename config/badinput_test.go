package config

import (
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
)

// validated loads args as the command does and validates the result: every
// problem the command would print, one per line.
type validated func(args []string) (fs *flag.FlagSet, problems error)

func validatedCommands() map[string]validated {
	return map[string]validated{
		"replica": func(args []string) (*flag.FlagSet, error) {
			cfg := DefaultReplica()
			fs := NewReplicaFlags(&cfg)
			err := LoadReplica(&cfg, fs, args)
			return fs, errors.Join(err, cfg.Validate())
		},
		"replica mirror": func(args []string) (*flag.FlagSet, error) {
			cfg := DefaultMirror()
			fs := NewMirrorFlags(&cfg)
			err := LoadMirror(&cfg, fs, append([]string{"--source-endpoints", "http://s:2379", "--dest-endpoints", "http://d:2379"}, args...))
			return fs, errors.Join(err, cfg.Validate())
		},
		"replica compare": func(args []string) (*flag.FlagSet, error) {
			cfg := DefaultCompare()
			fs := NewCompareFlags(&cfg)
			err := LoadCompare(&cfg, fs, append([]string{"--primary", "http://p:2379", "--replica", "http://r:2379", "--mirror-dest", "http://m:2379"}, args...))
			return fs, errors.Join(err, cfg.Validate())
		},
		"primary": func(args []string) (*flag.FlagSet, error) {
			cfg := DefaultPrimary()
			pf := NewPrimaryFlags(&cfg)
			err := pf.Load(args)
			return pf.FS, errors.Join(err, cfg.Validate())
		},
	}
}

func lines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// A bad value is one problem, on one line naming the flag (or variable)
// and what is valid: not the flag's zero reported again by Validate, nor
// the flag's name twice.
func TestBadValueIsOneProblem(t *testing.T) {
	clearEnv(t)
	for name, load := range validatedCommands() {
		t.Run(name, func(t *testing.T) {
			fs, err := load(nil)
			if err != nil {
				t.Fatalf("%s with no flags: %v", name, err)
			}
			checked := 0
			fs.VisitAll(func(f *flag.Flag) {
				for _, via := range []string{"flag", "env"} {
					args, who := []string{"--" + f.Name + "=bogus"}, "--"+f.Name
					if via == "env" {
						if f.Name == ConfigFileFlag {
							continue
						}
						args, who = nil, EnvPrefix+envName(f.Name)
						t.Setenv(who, "bogus")
					}
					_, err := load(args)
					if via == "env" {
						t.Setenv(who, "")
						os.Unsetenv(who)
					}
					// A value the flag itself refuses (a number, a duration,
					// a boolean, a role, a URL): one line.
					if err == nil || !strings.Contains(err.Error(), `"bogus"`) {
						continue
					}
					checked++
					ls := lines(err)
					if len(ls) != 1 {
						t.Errorf("%s %s=bogus: %d problems, want 1:\n%s", name, who, len(ls), err)
						continue
					}
					// The loader names where the value came from; Validate,
					// which sees only the value, the flag.
					if !strings.HasPrefix(ls[0], who) && !strings.Contains(ls[0], "--"+f.Name+" ") && !strings.Contains(ls[0], "--"+f.Name+":") {
						t.Errorf("%s %s=bogus: %q does not name %s or --%s", name, who, ls[0], who, f.Name)
					}
					for _, said := range []string{"--" + f.Name + ` "bogus":`, "--" + f.Name + `: "bogus":`, who + `="bogus":`} {
						if strings.Count(ls[0], said) > 1 {
							t.Errorf("%s %s=bogus: %q says %s twice", name, who, ls[0], said)
						}
					}
					if strings.Contains(ls[0], "strconv.") {
						t.Errorf("%s %s=bogus: %q: say what a valid value is, not the parser's error", name, who, ls[0])
					}
				}
			})
			if checked == 0 {
				t.Fatalf("%s: no flag refused bogus", name)
			}
			t.Logf("%s: %d bad values, each one problem", name, checked)
		})
	}
}

// The two the issue names, word for word.
func TestBadRoleAndJoinTimeoutAreOneLineEach(t *testing.T) {
	clearEnv(t)
	load := validatedCommands()["replica"]
	_, err := load([]string{"--role", "bogus"})
	if got, want := lines(err), []string{`--role "bogus": want one of reader, standby, voter`}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("--role bogus: %q, want %q", got, want)
	}
	t.Setenv("UNDERSTUDY_JOIN_TIMEOUT", "bogus")
	_, err = load(nil)
	if got, want := lines(err), []string{`UNDERSTUDY_JOIN_TIMEOUT="bogus": not a valid duration (such as 500ms, 10s, 2m)`}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("UNDERSTUDY_JOIN_TIMEOUT=bogus: %q, want %q", got, want)
	}
}
