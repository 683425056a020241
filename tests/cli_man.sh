#!/usr/bin/env bash
# tests/cli_man.sh — the manual pages: mandoc's lint is clean, and each
# tool's page agrees with its --help (the SYNOPSIS is the usage line, and
# every option --help lists is documented).
#
# Prints "PASS: name", "FAIL: name: why" or "SKIP: name: why" lines like the
# other test scripts; exits 1 if any failed. BIN names the folder of the
# tools (default bin at the top of the tree).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(cd "${BIN:-$ROOT/bin}" 2>/dev/null && pwd || echo "${BIN:-$ROOT/bin}")
MAN=$ROOT/man

failed=0
pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1: $2"; failed=1; }
skip() { echo "SKIP: $1: $2"; }

if ! command -v mandoc >/dev/null 2>&1; then
    skip man-lint "mandoc is not installed"
    skip man-synopsis "mandoc is not installed"
    exit 0
fi

shopt -s nullglob
pages=("$MAN"/*.[1-9])
if [ ${#pages[@]} -eq 0 ]; then
    fail man-lint "no manual pages in $MAN"
    exit 1
fi

for page in "${pages[@]}"; do
    name=man-lint-$(basename "$page")
    out=$(mandoc -Tlint -Wwarning "$page" 2>&1)
    rc=$?
    if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
        fail "$name" "$(echo "$out" | head -n 3 | tr '\n' ' ')"
    else
        pass "$name"
    fi
done

# A page as plain text: no overstrike, no line wrapping of the SYNOPSIS.
render() { mandoc -Tascii -Owidth=300 "$1" 2>/dev/null | sed 's/.\x08//g'; }

for page in "$MAN"/*.1; do
    tool=$(basename "$page" .1)
    if [ ! -x "$BIN/$tool" ]; then
        skip "man-synopsis-$tool" "$BIN/$tool is not built"
        continue
    fi
    text=$(render "$page")
    # The SYNOPSIS section's lines, joined, blanks squeezed.
    synopsis=$(echo "$text" | awk '/^SYNOPSIS$/ { on = 1; next } /^[A-Z]/ { on = 0 } on' |
        tr -s ' \n' '  ' | sed 's/^ //; s/ $//')
    usage=$("$BIN/$tool" --help 2>/dev/null | head -n 1)
    if [ "Usage: $synopsis" = "$usage" ]; then
        pass "man-synopsis-$tool"
    else
        fail "man-synopsis-$tool" "man page has '$synopsis', --help has '$usage'"
    fi

    # Every option of --help is in the page: "--long" words and "-x" letters
    # at the start of an option line.
    missing=""
    for opt in $("$BIN/$tool" --help 2>/dev/null | grep -oE '^ +(-[a-zA-Z](, )?)?(--[a-z][a-z0-9-]*)?' |
        grep -oE -- '--?[a-zA-Z][a-z0-9-]*'); do
        echo "$text" | grep -qE -- "(^|[^a-z0-9-])$opt([^a-z0-9-]|$)" || missing+=" $opt"
    done
    if [ -z "$missing" ]; then
        pass "man-options-$tool"
    else
        fail "man-options-$tool" "not in the manual:$missing"
    fi
done

exit $failed
