# Helpers for black-box tests. `run CMD…` captures stdout, stderr and the
# exit code into $OUT, $ERR and $RC; the expect_* helpers fail the test
# (return non-zero, which `set -e` turns into a failure) with a message.

run() {
    set +e
    "$@" > "$TMP/stdout" 2> "$TMP/stderr"
    RC=$?
    set -e
    OUT=$(cat "$TMP/stdout")
    ERR=$(cat "$TMP/stderr")
}

fail() {
    echo "  $*"
    echo "  exit code: $RC"
    echo "  stdout: $OUT" | head -n 20
    echo "  stderr: $ERR" | head -n 20
    return 1
}

expect_rc() {
    [ "$RC" -eq "$1" ] || fail "expected exit code $1"
}

expect_out() {
    printf '%s' "$OUT" | grep -qF -- "$1" || fail "stdout lacks: $1"
}

expect_err() {
    printf '%s' "$ERR" | grep -qF -- "$1" || fail "stderr lacks: $1"
}

# expect_json FILTER VALUE: jq FILTER over stdout must print VALUE (compact).
expect_json() {
    got=$(printf '%s' "$OUT" | jq -c "$1") || fail "stdout is not JSON"
    [ "$got" = "$2" ] || fail "jq '$1' gave $got, expected $2"
}
