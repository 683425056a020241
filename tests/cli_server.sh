#!/usr/bin/env bash
# tests/cli_server.sh — gimgd (gimgd(1)) as the tools use it, without a
# GPU: a server on the CPU (GIMGD_DEVICE=cpu), in a private runtime folder.
#  - usage: gimgd's operands and options, --status and --stop with none;
#  - a start by hand: detaches, its folder 0700, socket 0600, lock with its
#    pid, log; a second start (detached: done; --foreground: refused);
#  - --device gpu through the server equals --device cpu byte for byte, for
#    the four tools, several layouts and formats, metadata kept (an EXIF
#    orientation resolved by the tool for --op auto), a batch, and a pipe
#    of three tools that ends (the server holds none of its pipes);
#  - start on demand (--device gpu; auto for a job that pays for it);
#    sixteen clients at once;
#  - --no-server and GIMG_SERVER=off bypass it; a server started with
#    other settings (GIMG_GPU_MEM_LIMIT), or of another build, is not used;
#  - faults cost only time: a request past GIMG_SERVER_TIMEOUT and a
#    server killed mid-request leave the job to the tool, with the same
#    output and exit 0; --stop answers the running requests first; the idle
#    exit and SIGTERM remove the socket.
# One PASS/FAIL/SKIP line per test; BIN and BUILD as in cli_lib.sh.
TOOL=gimgd
. "$(dirname "$0")/cli_lib.sh"
GD=$PROG
GC=$BIN/gconv
GT=$BIN/gtranspose
GS=$BIN/gstats
GH=$BIN/ghist

export XDG_RUNTIME_DIR=$T/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
export GIMGD_DEVICE=cpu
unset GIMG_SERVER GIMG_SERVER_TIMEOUT GIMG_GPU_MEM_LIMIT GIMG_DEVICE GIMGD
DIR=$XDG_RUNTIME_DIR/gimg
# The slow request's image grows with the cores, so that it takes a while
# however many compute it: 1024 rows per two cores.
cores=$(nproc 2>/dev/null || echo 2)
SLOW_ROWS=$((cores < 2 ? 1024 : cores / 2 * 1024))
[ "$SLOW_ROWS" -gt 16384 ] && SLOW_ROWS=16384
# Whatever happens, no server of this test outlives it.
trap '"$GD" --stop >/dev/null 2>&1; rm -rf "$T"' EXIT

server_pid() { cat "$DIR/gimgd.lock" 2>/dev/null | tr -d '\n'; }
# alive PID: running (a zombie waiting for its reaper is not).
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null && [ "$(ps -o stat= -p "$1" | cut -c1)" != Z ]; }
# wait_gone PID: up to 10 s for the process to end.
wait_gone() {
    local i
    for i in $(seq 100); do alive "$1" || return 0; sleep 0.1; done
    return 1
}

"$GEN" --seed 1 101 67 3 8 rgb8.ppm &&
    "$GEN" --seed 2 53 41 1 16 gray16.pgm &&
    "$GEN" --seed 3 45 37 4 16 rgba16.pam &&
    "$GEN" --seed 4 33 29 3 32 rgbf.pfm &&
    "$GEN" --seed 5 -f png 61 47 4 8 rgba8.png &&
    "$GEN" --seed 6 -f jpg 80 60 3 8 photo.jpg &&
    "$GEN" --seed 7 1024 "$SLOW_ROWS" 3 8 slow.ppm ||
    { fail setup "gen failed"; exit 1; }
INPUTS="rgb8.ppm gray16.pgm rgba16.pam rgbf.pfm rgba8.png photo.jpg"
# A request that takes the CPU server a while (two seconds on two cores):
# twenty dense 31x31 kernels over a megapixel per two cores. The faults
# below strike once the server says it computes (wait_busy).
DENSE=$(awk 'BEGIN { for (i = 0; i < 31; i++) for (j = 0; j < 31; j++)
    printf "%s%d", (i || j) ? "," : "", (i * 7 + j * 13 + i * j) % 17 - 7 }')
SLOW=()
for i in $(seq 20); do SLOW+=(-k "$DENSE"); done
# wait_busy: up to 10 s until the server computes a request.
wait_busy() {
    local i
    for i in $(seq 200); do "$GD" --status 2>/dev/null | grep -q "(1 busy)" && return 0; sleep 0.05; done
    return 1
}

# ---------------------------------------------------------------- usage
expect_fail usage-operand 2 "" -- "$GD" extra
expect_fail usage-idle 2 "" -- "$GD" --idle -1
expect_fail usage-device-auto 2 "" -- "$GD" --device auto
expect_fail usage-device 2 "" -- "$GD" --device tpu
expect_fail usage-status-and-stop 2 "" -- "$GD" --status --stop
expect_fail status-none 1 "" -- "$GD" --status
why=""
"$GD" --stop >out.txt 2>err.txt || why="exit status $?"
[ -s out.txt ] || [ -s err.txt ] && why+=" printed something"
result stop-none "$why"

# ------------------------------------------------------- start by hand
why=""
"$GD" --idle 60 >out.txt 2>err.txt || why="exit status $?"
pid=$(server_pid)
alive "$pid" || why+=" no server running (pid '$pid')"
[ "$(stat -c %a "$DIR" 2>/dev/null)" = 700 ] || why+=" folder mode $(stat -c %a "$DIR")"
[ -S "$DIR/gimgd.sock" ] && [ "$(stat -c %a "$DIR/gimgd.sock")" = 600 ] ||
    why+=" socket: $(stat -c '%F %a' "$DIR/gimgd.sock" 2>&1)"
grep -q "listening on $DIR/gimgd.sock (cpu" "$DIR/gimgd.log" 2>/dev/null || why+=" log: $(head -c 200 "$DIR/gimgd.log" 2>&1)"
[ -s out.txt ] && why+=" printed on stdout"
result start-by-hand "$why"

why=""
"$GD" --status >status.txt 2>&1 || why="exit status $?"
grep -q "^pid $pid," status.txt && grep -q "^backend: cpu" status.txt || why+=" $(head -c 200 status.txt)"
result status "$why"

why=""
"$GD" >/dev/null 2>&1 || why="a second detached start: exit status $?"
[ "$(server_pid)" = "$pid" ] || why+=" the server changed"
result second-start-detached "$why"
expect_fail second-start-foreground 1 "" -- "$GD" --foreground

# ------------------------------------------------- the same results
# served NAME FILE...: the files must exist and -v.txt say the server served.
served() { grep -q "server: gimgd.*served" v.txt || echo "not served: $(grep server v.txt | head -c 200)"; }

n=0
for f in $INPUTS; do
    n=$((n + 1))
    why=""
    ext=${f##*.}
    for opts in "-k gaussian:1.5" "-k sobel --alpha keep" "-k 1,2,1;0,0,0;-1,-2,-1 --border wrap --abs"; do
        # shellcheck disable=SC2086
        "$GC" $opts --device cpu "$f" "cpu.$ext" 2>err.txt || { why+=" cpu: $(head -c 100 err.txt)"; continue; }
        # shellcheck disable=SC2086
        "$GC" -v $opts --device gpu "$f" "srv.$ext" 2>v.txt || { why+=" server: $(head -c 100 v.txt)"; continue; }
        cmp -s "cpu.$ext" "srv.$ext" || why+=" gconv $opts differs"
        why+=$(served)
    done
    for op in rot90 transverse flip; do
        "$GT" --op $op --device cpu "$f" "cpu.$ext" && "$GT" -v --op $op --device gpu "$f" "srv.$ext" 2>v.txt &&
            cmp -s "cpu.$ext" "srv.$ext" || why+=" gtranspose $op differs"
        why+=$(served)
    done
    "$GS" --device cpu "$f" >cpu.txt && "$GS" -v --device gpu "$f" >srv.txt 2>v.txt &&
        cmp -s cpu.txt srv.txt || why+=" gstats differs"
    why+=$(served)
    "$GH" --device cpu "$f" >cpu.txt && "$GH" -v --device gpu "$f" >srv.txt 2>v.txt &&
        cmp -s cpu.txt srv.txt || why+=" ghist differs"
    why+=$(served)
    result "same-as-cpu-$f" "$why"
done

if command -v exiftool >/dev/null 2>&1; then
    why=""
    cp photo.jpg turned.jpg && exiftool -q -overwrite_original -Orientation#=6 turned.jpg ||
        why="exiftool failed"
    "$GT" --op auto --device cpu turned.jpg cpu.jpg && "$GT" -v --op auto --device gpu turned.jpg srv.jpg 2>v.txt &&
        cmp -s cpu.jpg srv.jpg || why+=" --op auto differs"
    why+=$(served)
    [ "$(exiftool -s -s -s -n -Orientation srv.jpg)" = 1 ] || why+=" orientation not reset"
    # Upright already: nothing for the server to turn; the tool copies it.
    "$GT" --op auto --device cpu photo.jpg cpu.jpg && "$GT" --op auto --device gpu photo.jpg srv.jpg &&
        cmp -s cpu.jpg srv.jpg || why+=" --op auto of an upright JPEG differs"
    result metadata-auto-orientation "$why"
else
    skip metadata-auto-orientation "exiftool is not installed"
fi

why=""
mkdir -p bcpu bsrv
"$GC" -k box:2 --device cpu -o bcpu/ $INPUTS 2>err.txt &&
    "$GC" -v -j 3 -k box:2 --device gpu -o bsrv/ $INPUTS 2>v.txt || why="failed: $(head -c 200 err.txt v.txt)"
diff -r bcpu bsrv >/dev/null || why+=" outputs differ"
grep -q "served 6 operations" v.txt || why+=" $(grep server v.txt)"
result batch "$why"

why=""
timeout 30 "$GC" -k gaussian:2 --device cpu rgb8.ppm - | "$GT" --op rot90 --device cpu - - | "$GS" --device cpu - >cpu.txt
timeout 30 "$GC" -k gaussian:2 --device gpu rgb8.ppm - | timeout 30 "$GT" --op rot90 --device gpu - - |
    timeout 30 "$GS" --device gpu - >srv.txt || why="the pipe failed or hung (status $?)"
cmp -s cpu.txt srv.txt || why+=" reports differ"
result pipe "$why"

# ------------------------------------------------ start on demand, load
why=""
"$GD" --stop
wait_gone "$pid" || why="--stop left pid $pid running"
[ -e "$DIR/gimgd.sock" ] && why+=" the socket stayed"
"$GC" -v -k box:1 --device gpu rgb8.ppm srv.ppm 2>v.txt || why+=" failed: $(head -c 200 v.txt)"
grep -q "server: gimgd, started for this job, served 1 operation" v.txt || why+=" $(grep server v.txt)"
"$GC" -k box:1 --device cpu rgb8.ppm cpu.ppm && cmp -s cpu.ppm srv.ppm || why+=" output differs"
pid=$(server_pid)
alive "$pid" || why+=" no server left running"
result start-on-demand "$why"

why=""
"$GC" -k sharpen --device cpu rgb8.ppm want.ppm
for i in $(seq 16); do
    "$GC" -k sharpen --device gpu rgb8.ppm "c$i.ppm" 2>"c$i.err" &
done
wait
for i in $(seq 16); do
    cmp -s want.ppm "c$i.ppm" || why+=" client $i: $(head -c 100 "c$i.err")"
done
result sixteen-clients "$why"

# --device auto starts the server for a job that pays for the start-up (a
# 31x31 dense kernel over 4.5 MB, on one CPU thread: the break-even grows
# with the threads), not for a small one. The CPU's rate is the built-in
# one, given as a table: a build with CUDA would measure this machine's
# (lib/cost.h), and a fast CPU would keep the job.
printf 'conv_cpu_fmas_per_ms_per_thread 1e7\ncuda_start_ms 350\n' >server.cost
why=""
"$GD" --stop
"$GEN" --seed 8 1500 1000 3 8 big.ppm || why="gen failed"
GIMG_COST_TABLE=server.cost "$GC" -j 1 -v -k box:1 --device auto rgb8.ppm small.ppm 2>v.txt ||
    why+=" small: exit $?"
grep -q "server:" v.txt && why+=" small: $(grep server: v.txt)"
[ -S "$DIR/gimgd.sock" ] && why+=" a server started for a small job"
GIMG_COST_TABLE=server.cost "$GC" -j 1 -v -k "$DENSE" --device auto big.ppm big-auto.ppm 2>v.txt ||
    why+=" big: exit $?"
grep -q "server: gimgd, started for this job, served 1 operation" v.txt || why+=" big: $(grep -E 'server|backend' v.txt)"
"$GC" -k "$DENSE" --device cpu big.ppm big-cpu.ppm && cmp -s big-cpu.ppm big-auto.ppm || why+=" output differs"
result auto-starts-for-large-job "$why"

# A server already running is weighed warm: its round trip and the pixels'
# way through it, not a start. With a start-up no job could pay for, the
# big job goes to the running server; stopped, it stays here.
printf 'conv_cpu_fmas_per_ms_per_thread 1e7\ncuda_start_ms 1e6\n' >warm.cost
why=""
GIMG_COST_TABLE=warm.cost "$GC" -j 1 -v -k "$DENSE" --device auto big.ppm big-warm.ppm 2>v.txt ||
    why+=" running: exit $?"
grep -q "server: gimgd served 1 operation" v.txt || why+=" running: $(grep -E 'auto|server' v.txt | tr '\n' '|')"
cmp -s big-cpu.ppm big-warm.ppm || why+=" output differs"
"$GD" --stop
GIMG_COST_TABLE=warm.cost "$GC" -j 1 -v -k "$DENSE" --device auto big.ppm big-warm.ppm 2>v.txt ||
    why+=" stopped: exit $?"
grep -q "server:" v.txt && why+=" stopped: $(grep server: v.txt)"
[ -S "$DIR/gimgd.sock" ] && why+=" a server started"
result auto-weighs-running-server "$why"
"$GC" -k box:1 --device gpu rgb8.ppm restart.ppm # the server again, for the tests below

# ------------------------------------------------------------- bypass
for how in --no-server GIMG_SERVER=off; do
    why=""
    if [ "$how" = --no-server ]; then
        "$GC" -v --no-server -k box:1 --device gpu rgb8.ppm byp.ppm 2>v.txt
    else
        GIMG_SERVER=off "$GC" -v -k box:1 --device gpu rgb8.ppm byp.ppm 2>v.txt
    fi
    rc=$?
    grep -q "server:" v.txt && why="the server was used: $(grep server: v.txt)"
    if "$GC" --version | grep -q "not built in"; then
        [ "$rc" = 1 ] && grep -q "no usable GPU" v.txt || why+=" exit status $rc: $(head -c 200 v.txt)"
    fi
    result "bypass-$how" "$why"
done

why=""
GIMG_GPU_MEM_LIMIT=1000000 "$GC" -v -k box:1 --device gpu rgb8.ppm set.ppm 2>v.txt
grep -q "started with other settings" v.txt || why="$(head -c 300 v.txt)"
grep -q "served" v.txt && why+=" served anyway"
result other-settings-not-used "$why"

# A server of another build (a copy of gimgd elsewhere) is not this tool's.
why=""
"$GD" --stop
mkdir -p other && cp "$GD" other/gimgd && other/gimgd --idle 30 || why="the copy did not start"
"$GC" -v -k box:1 --device gpu rgb8.ppm other.ppm 2>v.txt
grep -q "another build than $GD" v.txt || why+=" $(head -c 300 v.txt)"
grep -q "served" v.txt && why+=" served anyway"
other/gimgd --stop
result other-build-not-used "$why"
"$GD" --idle 60 || fail setup "the server did not start again"

# --------------------------------------------------------------- faults
"$GC" "${SLOW[@]}" --device cpu slow.ppm slow-cpu.ppm

# A request queued behind a slow one, past its time limit: done here.
why=""
"$GC" "${SLOW[@]}" --device gpu slow.ppm slow-a.ppm 2>/dev/null &
a=$!
wait_busy || why="the server never computed"
GIMG_SERVER_TIMEOUT=0.1 "$GC" -v -k box:1 --device gpu rgb8.ppm late.ppm 2>v.txt || why="exit status $?"
grep -q "no answer within 0.1 s; the job ran here instead" v.txt || why+=" $(grep server v.txt)"
"$GC" -k box:1 --device cpu rgb8.ppm cpu.ppm && cmp -s cpu.ppm late.ppm || why+=" output differs"
wait $a || why+=" the slow request failed"
cmp -s slow-cpu.ppm slow-a.ppm || why+=" the slow output differs"
result request-time-limit "$why"

# The server killed while it computes.
why=""
pid=$(server_pid)
"$GC" -v "${SLOW[@]}" --device gpu slow.ppm slow-k.ppm 2>vk.txt &
a=$!
wait_busy || why="the server never computed"
kill -KILL "$pid"
wait $a || why="exit status $?: $(head -c 200 vk.txt)"
grep -q "server: not used: .*closed; the job ran here instead" vk.txt || why+=" $(grep server vk.txt)"
cmp -s slow-cpu.ppm slow-k.ppm || why+=" output differs"
result server-killed-mid-request "$why"

# --stop while a request runs: it is answered first.
why=""
"$GD" --idle 60 && pid=$(server_pid)
"$GC" -v "${SLOW[@]}" --device gpu slow.ppm slow-s.ppm 2>vs.txt &
a=$!
wait_busy || why="the server never computed"
"$GD" --stop
wait $a || why="exit status $?"
grep -q "served 1 operation" vs.txt || why+=" $(grep server vs.txt)"
cmp -s slow-cpu.ppm slow-s.ppm || why+=" output differs"
# --stop returns once the server let go of its lock; the process may
# still be ending (AddressSanitizer's leak check at exit, under load).
wait_gone "$pid" || why+=" still running 10 s after --stop"
result stop-answers-running "$why"

why=""
"$GD" --idle 1 && pid=$(server_pid)
sleep 1.5
wait_gone "$pid" || why="still running"
[ -e "$DIR/gimgd.sock" ] && why+=" the socket stayed"
grep -q "exiting after 1 s idle" "$DIR/gimgd.log" || why+=" log: $(tail -n 2 "$DIR/gimgd.log")"
result idle-exit "$why"

why=""
"$GD" --idle 60 && pid=$(server_pid)
kill -TERM "$pid"
wait_gone "$pid" || why="still running"
[ -e "$DIR/gimgd.sock" ] && why+=" the socket stayed"
result sigterm "$why"

why=""
"$GD" --foreground --idle 60 2>fg.txt &
fg=$!
for i in $(seq 50); do [ -S "$DIR/gimgd.sock" ] && break; sleep 0.1; done
"$GC" -k box:1 --device gpu rgb8.ppm fg.ppm 2>/dev/null && cmp -s cpu.ppm fg.ppm || why="not served"
kill -INT $fg
wait $fg || why+=" exit status $?"
grep -q "exiting on a signal" fg.txt || why+=" $(head -c 200 fg.txt)"
result foreground "$why"

exit $failed
