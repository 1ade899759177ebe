package cascade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/server/v3/auth"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"golang.org/x/crypto/bcrypt"
)

// The copy of the source's auth (authz): read from an upstream as root,
// at one auth revision, and built into an etcd auth store of its own.

// authState is the source's auth, as read from an upstream.
type authState struct {
	enabled bool
	rev     uint64
	users   map[string][]string
	roles   map[string][]*authpb.Permission
}

// read reads the source's whole auth state, at one auth revision.
func (a *authz) read(ctx context.Context) (authState, error) {
	for range 3 {
		st, err := a.cli.AuthStatus(ctx)
		if err != nil {
			return authState{}, fmt.Errorf("cascade: the source's auth status: %w", err)
		}
		s := authState{enabled: st.Enabled, rev: st.AuthRevision, users: map[string][]string{}, roles: map[string][]*authpb.Permission{}}
		if !st.Enabled {
			return s, nil
		}
		if err := a.readUsersRoles(ctx, &s); err != nil {
			return authState{}, err
		}
		again, err := a.cli.AuthStatus(ctx)
		if err != nil {
			return authState{}, fmt.Errorf("cascade: the source's auth status: %w", err)
		}
		if again.AuthRevision == s.rev && again.Enabled {
			return s, nil
		}
	}
	return authState{}, errors.New("cascade: the source's auth changed three times while it was read")
}

func (a *authz) readUsersRoles(ctx context.Context, s *authState) error {
	ul, err := a.cli.UserList(ctx)
	if err != nil {
		return fmt.Errorf("cascade: listing the source's users (the replica's --user must have the root role): %w", err)
	}
	for _, name := range ul.Users {
		u, err := a.cli.UserGet(ctx, name)
		if err != nil {
			return fmt.Errorf("cascade: the source's user %q: %w", name, err)
		}
		s.users[name] = u.Roles
	}
	rl, err := a.cli.RoleList(ctx)
	if err != nil {
		return fmt.Errorf("cascade: listing the source's roles: %w", err)
	}
	for _, name := range rl.Roles {
		r, err := a.cli.RoleGet(ctx, name)
		if err != nil {
			return fmt.Errorf("cascade: the source's role %q: %w", name, err)
		}
		s.roles[name] = r.Perm
	}
	return nil
}

// build makes an auth store holding s, beside the local store.
func (a *authz) build(s authState) (*authView, error) {
	v := &authView{enabled: s.enabled, rev: s.rev}
	if !s.enabled {
		return v, nil
	}
	v.path = filepath.Join(a.dir, fmt.Sprintf("auth-%d.db", a.builds.Add(1)))
	_ = os.Remove(v.path)
	v.be = backend.NewDefaultBackend(a.lg, v.path)
	tp, err := auth.NewTokenProvider(a.lg, "", nil, 0)
	if err != nil {
		_ = v.be.Close()
		return nil, err
	}
	v.as = auth.NewAuthStore(a.lg, schema.NewAuthBackend(a.lg, v.be), tp, bcrypt.MinCost)
	if err := fill(v.as, s); err != nil {
		v.close()
		return nil, fmt.Errorf("cascade: copying the source's auth (revision %d): %w", s.rev, err)
	}
	return v, nil
}

// fill adds s's roles, users and grants to as, then enables it.
func fill(as auth.AuthStore, s authState) error {
	for name, perms := range s.roles {
		if _, err := as.RoleAdd(&pb.AuthRoleAddRequest{Name: name}); err != nil {
			return fmt.Errorf("role %q: %w", name, err)
		}
		for _, p := range perms {
			if _, err := as.RoleGrantPermission(&pb.AuthRoleGrantPermissionRequest{Name: name, Perm: p}); err != nil {
				return fmt.Errorf("role %q: %w", name, err)
			}
		}
	}
	for name, roles := range s.users {
		if _, err := as.UserAdd(&pb.AuthUserAddRequest{Name: name, Options: &authpb.UserAddOptions{NoPassword: true}}); err != nil {
			return fmt.Errorf("user %q: %w", name, err)
		}
		for _, r := range roles {
			if _, err := as.UserGrantRole(&pb.AuthUserGrantRoleRequest{User: name, Role: r}); err != nil {
				return fmt.Errorf("user %q: %w", name, err)
			}
		}
	}
	return as.AuthEnable()
}
