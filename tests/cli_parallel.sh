#!/usr/bin/env bash
# tests/cli_parallel.sh — the README's way to outgrow one machine, run as
# written: its GNU parallel example ("On many machines sharing a file
# system") is read from README.md and run with its hosts replaced by two
# local slots (-S 2/:), on a folder of scans the test makes. Every PNG
# under scans/ must come out turned 180° in upright/, under its own name,
# once, spread over more than one gtranspose process, each started with the
# README's options. SKIP without GNU parallel (Debian's "parallel"; the
# moreutils program of that name is another tool).
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"

if ! parallel --version 2>/dev/null | grep -q '^GNU parallel'; then
    skip parallel-readme-example "GNU parallel is not installed"
    exit 0
fi

# The README's fenced block that runs parallel with -S.
example=$(awk '
    /^```/ { if (inside && block ~ /parallel / && block ~ / -S /) { printf "%s", block; exit }
             inside = !inside; block = ""; next }
    inside { block = block $0 "\n" }' "$ROOT/README.md")
if [ -z "$example" ]; then
    fail parallel-readme-example "README.md has no block running parallel with -S"
    exit 1
fi
cmd=$(printf '%s' "$example" | sed 's|-S [^ ]*|-S 2/:|')
if [ "$(printf '%s' "$cmd" | grep -c -- '-S 2/:')" -ne 1 ] || [ "$cmd" = "$example" ]; then
    fail parallel-readme-example "cannot put local slots into: $example"
    exit 1
fi

# scans/: PNGs in two folders (RGB, RGBA, 16-bit gray; a name with a space),
# and a JPEG, which the example's find does not take.
mkdir -p scans/day1 scans/day2
"$GEN" --seed 71 23 17 3 8 scans/day1/s1.png && "$GEN" --seed 72 16 9 4 8 scans/day1/s2.png &&
    "$GEN" --seed 73 11 14 1 16 scans/day1/s3.png && "$GEN" --seed 74 9 9 3 8 scans/day2/s4.png &&
    "$GEN" --seed 75 30 2 3 8 scans/day2/s5.png && "$GEN" --seed 76 5 21 4 8 scans/day2/s6.png &&
    "$GEN" --seed 77 13 8 3 8 "scans/day2/page 7.png" && "$GEN" --seed 78 8 8 3 8 scans/day2/photo.jpg ||
    fail setup "gen failed"
find scans -name '*.png' | sed 's|.*/||' | LC_ALL=C sort >want.txt

# "gtranspose" as the example names it: a script first on PATH that notes
# each process's arguments, one a line, then runs the tool under test.
# parallel keeps its state under $HOME/.parallel: here, the scratch folder.
mkdir -p wrap calls home
cat >wrap/gtranspose <<EOF
#!/bin/sh
printf '%s\n' "\$@" >"$T/calls/\$\$"
exec "$PROG" "\$@"
EOF
chmod +x wrap/gtranspose
PATH="$T/wrap:$PATH" HOME="$T/home" bash -c "$cmd" >stdout.txt 2>stderr.txt </dev/null
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(head -c 300 stderr.txt)"
[ -z "$why" ] && grep -q 'gtranspose' stderr.txt && why="the tool complained: $(head -c 300 stderr.txt)"
[ -z "$why" ] && { ls upright 2>/dev/null | LC_ALL=C sort | cmp -s - want.txt ||
    why="upright/ holds: $(ls upright 2>/dev/null | tr '\n' ' ')"; }
while IFS= read -r name; do
    [ -z "$why" ] || break
    src=$(find scans -name "$name")
    "$PROG" --op flip "$src" w-flip.pam && "$PROG" --op flop w-flip.pam w-ref.pam ||
        { why="the tool failed on $src"; break; }
    why=$(same "upright/$name" w-ref.pam)
done <want.txt
result parallel-readme-example "$why"

# The work was spread over the slots, each process with the README's
# options, and every scan named by exactly one process.
why=""
n_calls=$(ls calls | wc -l)
[ "$n_calls" -ge 2 ] || why="$n_calls gtranspose process(es), expected one per slot"
for c in calls/*; do
    [ -z "$why" ] || break
    [ "$(head -n 6 "$c" | tr '\n' ' ')" = "--op rot180 -j 16 -o upright/ " ] ||
        why="a process started with: $(head -n 6 "$c" | tr '\n' ' ')"
done
[ -z "$why" ] && { tail -q -n +7 calls/* | sed 's|.*/||' | LC_ALL=C sort | cmp -s - want.txt ||
    why="scans named per process: $(tail -q -n +7 calls/* | tr '\n' ' ')"; }
result parallel-readme-example-spread "$why"

exit $failed
