# Sourced by scripts/build-kube.sh and scripts/build-containerd.sh, which
# each build commands of a module they do not own in a throwaway module.
#
# write_tools_go PKG CMD... writes tools.go in the current directory, which
# imports PKG/cmd/CMD for every CMD under the build tag "tools": go mod tidy
# then resolves everything those commands need, and nothing builds it.
write_tools_go() {
  local pkg=$1 cmd
  shift
  {
    echo "//go:build tools"
    echo
    echo "// Package tools pins the commands this module builds."
    echo "package tools"
    echo
    echo "import ("
    for cmd in "$@"; do echo "	_ \"$pkg/cmd/$cmd\""; done
    echo ")"
  } >tools.go
}
