# tests/gpu_lib.sh — sourced by the scripts that time whole commands on a
# GPU with a gimgd of their own (tests/gpu_auto.sh, tests/bench/server.sh),
# from the top of the tree with BIN set: needs a CUDA build and a GPU
# (exit 77, skipped, otherwise, saying so as NAME); makes $tmp, a private
# runtime folder for the server (and cache folder), clears the variables
# that would steer the tools, and stops the server and removes $tmp at
# exit.
gpu_private_setup() {
    if ! "$BIN"/gconv --version | grep -q "CUDA support: built in" ||
        ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "$1: needs a CUDA build and a GPU: skipped"
        exit 77
    fi
    tmp=$(mktemp -d)
    export XDG_RUNTIME_DIR=$tmp/run XDG_CACHE_HOME=$tmp/cache
    mkdir -m 700 "$XDG_RUNTIME_DIR"
    unset GIMG_SERVER GIMGD_DEVICE GIMG_DEVICE GIMG_CODECS GIMG_COST_TABLE GIMG_COST_CACHE
    trap '"$BIN"/gimgd --stop >/dev/null 2>&1; rm -rf "$tmp"' EXIT
}
