#!/usr/bin/env bash
# Regenerates names.go from the const block in mongoerr.go: each constant's Go name is its
# MongoDB codeName (Location<N> constants are left out; Code.Name spells those itself).
set -euo pipefail
cd "$(dirname "$0")"
{
  echo '// Code generated from the const block in mongoerr.go by gen_names.sh; DO NOT EDIT.'
  echo; echo 'package mongoerr'; echo; echo 'var codeTable = []codeEntry{'
  awk '/^const \($/{inb=1;next} inb&&/^\)/{inb=0} inb && $2=="Code" && $3=="=" {print $1}' mongoerr.go |
    grep -v -e '^Location' -e '^OK$' | while read -r n; do echo "	{$n, \"$n\"},"; done
  echo '	{SocketException, "SocketException"},'
  echo '}'
} > names.go
gofmt -w names.go
